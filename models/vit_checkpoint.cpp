#include "models/vit_checkpoint.h"

#include <cmath>
#include <limits>

#include "core/excerpt.h"
#include "models/checkpoint_keys.h"
#include "models/checkpoint_layouts.h"
#include "models/model_families.h"
#include "models/model_loader.h"

namespace attnscope {

namespace {

int perfect_square_root(int64_t n) {
  if (n <= 0) return 0;
  const auto root = int64_t(std::llround(std::sqrt(double(n))));
  return root * root == n ? int(root) : 0;
}

class KeyReader {
 public:
  explicit KeyReader(const Checkpoint& checkpoint) : tensors_(checkpoint.tensors) {}
  bool has(const std::string& key) const { return tensors_.count(key) > 0; }
  const torch::Tensor& get(const std::string& key) const {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) throw CheckpointError("missing tensor '" + excerpt(key) + "'");
    return it->second;
  }
  // Size of a dimension, with a clear error when the tensor has too few dimensions.
  int64_t size(const std::string& key, int64_t dim, int64_t expected_dims) const {
    const auto& t = get(key);
    if (t.dim() != expected_dims)
      throw CheckpointError("tensor '" + excerpt(key) + "' has shape " + shape_text(t.sizes()) + ", expected " +
                            std::to_string(expected_dims) + " dimensions");
    // Shapes cost nothing in a file; a size beyond int would wrap when it becomes a layer width.
    if (t.size(dim) > std::numeric_limits<int>::max())
      throw CheckpointError("tensor '" + excerpt(key) + "' has shape " + shape_text(t.sizes()) +
                            ", larger than any model's: the checkpoint is damaged");
    return t.size(dim);
  }

 private:
  const std::map<std::string, torch::Tensor>& tensors_;
};

// The head count that attention parameters reveal, or 0 when none does.
int heads_from_attention(const KeyReader& keys, const std::string& prefix, int dim) {
  if (keys.has(prefix + "temperature")) return int(keys.size(prefix + "temperature", 0, 3));
  if (keys.has(prefix + "dwc.weight")) {
    const int64_t head_dim = keys.size(prefix + "dwc.weight", 0, 4);
    if (head_dim > 0 && dim % head_dim == 0) return int(dim / head_dim);
  }
  if (keys.has(prefix + "dist_anchor_B.weight")) {
    const int64_t head_dim = keys.size(prefix + "dist_anchor_B.weight", 1, 2);
    if (head_dim > 0 && dim % head_dim == 0) return int(dim / head_dim);
  }
  return 0;
}

}  // namespace

namespace {

// A size the weights show, in the released tables' argument name ("embed_dim", "depth").
struct ShownSize {
  const char* argument;
  int64_t value;
  std::string read_from;  // "patch_embed.proj.weight"
};

// When a registered name supplied values (`sources` says "the released NAME"), throws
// CheckpointError naming both where the name's released arguments contradict what the weights
// show: a name is trusted for what the weights cannot show only when it agrees with what they do.
void check_released_against_weights(const std::map<std::string, std::string>& sources,
                                    const std::vector<ShownSize>& shown) {
  static const std::string kReleased = "the released ";
  std::string name;
  for (const auto& [key, source] : sources)
    if (source.rfind(kReleased, 0) == 0) name = source.substr(kReleased.size());
  const ReleasedArch* released = name.empty() ? nullptr : find_released(name);
  if (!released) return;
  const nlohmann::json args = nlohmann::json::parse(released->model_args);
  std::string released_text, weights_text;
  for (const ShownSize& size : shown) {
    if (!args.contains(size.argument) || !args[size.argument].is_number_integer() ||
        args[size.argument].get<int64_t>() == size.value)
      continue;
    released_text += (released_text.empty() ? "" : ", ") + std::string(size.argument) + " " +
                     std::to_string(args[size.argument].get<int64_t>());
    weights_text += (weights_text.empty() ? "" : ", ") + std::string(size.argument) + " " + std::to_string(size.value) +
                    " (" + size.read_from + ")";
  }
  if (!released_text.empty())
    throw CheckpointError("the config names architecture '" + name + "' (" + released_text +
                          "), but the weights have " + weights_text +
                          ": the name belongs to another model; remove it or give the weights' own");
}

}  // namespace

VitArch infer_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, LoadReport* report,
                   const LayoutFacts* layout, const std::map<std::string, std::string>* sources) {
  const LayoutFacts timm_layout;
  const LayoutFacts& facts = layout ? *layout : timm_layout;
  const KeyReader keys(checkpoint);
  auto note = [&](const std::string& text) {
    if (report) report->notes.push_back(text);
  };
  if (!keys.has("patch_embed.proj.weight") || !keys.has("pos_embed") || !keys.has("blocks.0.norm1.weight"))
    throw CheckpointError(
        "unsupported model: not a ViT/DeiT in timm's layout (needs patch_embed.proj.weight, pos_embed and "
        "blocks.N.*; found " +
        std::to_string(checkpoint.tensors.size()) + " tensors, first '" +
        (checkpoint.tensors.empty() ? std::string("none") : excerpt(checkpoint.tensors.begin()->first)) + "')");
  VitArch arch;
  const auto& patch_weight = keys.get("patch_embed.proj.weight");
  if (patch_weight.dim() != 4 || patch_weight.size(2) != patch_weight.size(3))
    throw CheckpointError("patch_embed.proj.weight has shape " + shape_text(patch_weight.sizes()) +
                          ", expected [C, 3, P, P]");
  arch.embed_dim = int(keys.size("patch_embed.proj.weight", 0, 4));
  arch.in_chans = int(keys.size("patch_embed.proj.weight", 1, 4));
  arch.patch_size = int(keys.size("patch_embed.proj.weight", 2, 4));
  arch.class_token = keys.has("cls_token");
  arch.dist_token = keys.has("dist_token");
  if (keys.has("reg_token")) arch.register_tokens = int(keys.size("reg_token", 1, 3));
  arch.final_norm = keys.has("norm.weight");
  arch.fc_norm = keys.has("fc_norm.weight");
  if (keys.has("head.weight")) arch.num_classes = int(keys.size("head.weight", 0, 2));
  arch.dist_head = arch.dist_token && keys.has("head_dist.weight");
  auto given = [&](const char* key) {
    return meta.is_object() && meta.contains(key) ? meta.at(key) : nlohmann::json();
  };
  auto source_of = [&](const char* key) -> std::string {
    if (!sources || !sources->count(key)) return "--arch";
    return sources->at(key);
  };
  const double layer_norm_eps = given("eps").is_number() ? given("eps").get<double>() : 0.0;
  if (layer_norm_eps > 0) arch.layer_norm_eps = layer_norm_eps;
  const std::string activation = given("act").is_string() ? given("act").get<std::string>() : "";
  if (!activation.empty() && activation != "gelu" && activation != "quick_gelu")
    throw CheckpointError("act '" + excerpt(activation) + "' (from " + source_of("act") +
                          ") is not gelu or quick_gelu");

  const int prefix = arch.prefix_tokens();
  const int64_t positions = keys.size("pos_embed", 1, 3);
  if (facts.pos_embed_prefix_tokens >= 0) {
    const int grid = perfect_square_root(positions - facts.pos_embed_prefix_tokens);
    if (grid == 0)
      throw CheckpointError("pos_embed has " + std::to_string(positions) + " positions: not " +
                            std::to_string(facts.pos_embed_prefix_tokens) + " prefix position(s) plus a square grid");
    arch.pos_embed_prefix_tokens = facts.pos_embed_prefix_tokens;
    arch.pos_grid_h = arch.pos_grid_w = grid;
  } else if (int grid = perfect_square_root(positions - prefix); grid > 0) {
    arch.pos_embed_prefix_tokens = -1;
    arch.pos_grid_h = arch.pos_grid_w = grid;
  } else if (int patches_only = perfect_square_root(positions); patches_only > 0) {
    arch.pos_embed_prefix_tokens = 0;
    arch.pos_grid_h = arch.pos_grid_w = patches_only;
    note("pos_embed covers the patches only (timm no_embed_class)");
  } else {
    throw CheckpointError("pos_embed has " + std::to_string(positions) + " positions: neither " +
                          std::to_string(prefix) + " prefix tokens plus a square grid nor a square grid");
  }

  while (keys.has("blocks." + std::to_string(arch.depth) + ".norm1.weight")) ++arch.depth;
  // A block past the counted ones means a missing key, not a shorter model.
  for (const auto& [key, tensor] : checkpoint.tensors) {
    if (key.rfind("blocks.", 0) != 0) continue;
    const std::string index = key.substr(7, key.find('.', 7) - 7);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(index) >= arch.depth)
      throw CheckpointError("missing tensor 'blocks." + std::to_string(arch.depth) + ".norm1.weight' (the file has '" +
                            excerpt(key) + "'): the checkpoint is incomplete or damaged");
  }
  for (const char* head : {"head", "head_dist"})
    if (keys.has(std::string(head) + ".bias") && !keys.has(std::string(head) + ".weight"))
      throw CheckpointError(std::string("missing tensor '") + head + ".weight' (the file has " + head +
                            ".bias): the checkpoint is incomplete or damaged");
  const int dim = arch.embed_dim;
  if (sources)
    check_released_against_weights(*sources, {{"embed_dim", dim, "patch_embed.proj.weight"},
                                              {"depth", arch.depth, "blocks.N"},
                                              {"patch_size", arch.patch_size, "patch_embed.proj.weight"}});

  // Heads: what a source gives, else the layout's config, variant parameters, file metadata, then
  // timm's 64-wide heads (assumed, and said).
  if (!given("heads").is_null() && !given("heads").is_number_integer())
    throw CheckpointError("heads " + excerpt(given("heads").dump(), 60) + " (from " + source_of("heads") +
                          "): a ViT has one head count for every block");
  int heads = given("heads").is_null() ? 0 : given("heads").get<int>();
  std::string heads_source = source_of("heads");
  if (heads == 0 && facts.heads > 0) {
    heads = facts.heads;
    heads_source = to_string(facts.layout) + " layout";
  }
  for (int i = 0; heads == 0 && i < arch.depth; ++i) {
    heads = heads_from_attention(keys, "blocks." + std::to_string(i) + ".attn.", dim);
    heads_source = "attention parameters";
  }
  if (heads == 0 && checkpoint.metadata.count("num_heads")) {
    const std::string& text = checkpoint.metadata.at("num_heads");
    const bool digits = !text.empty() && text.size() <= 4 && text.find_first_not_of("0123456789") == std::string::npos;
    heads = digits ? std::stoi(text) : 0;
    if (heads <= 0)
      throw CheckpointError("file metadata num_heads '" + excerpt(text) +
                            "' is not a head count from 1 to 9999; fix the metadata or pass --arch heads=N");
    heads_source = "file metadata";
  }
  if (heads == 0 && dim % 64 == 0) {
    heads = dim / 64;
    heads_source = "head dim 64 (timm convention; override with --arch heads=N)";
    if (report)
      report->assumed.push_back({"heads", heads, "width " + std::to_string(dim) + " / 64, timm's head width"});
  }
  if (heads > 0 && dim % heads != 0)
    throw CheckpointError(std::to_string(heads) + " heads (from " + heads_source + ") do not divide the width " +
                          std::to_string(dim));
  if (heads <= 0)
    throw unfit_default_error("the width " + std::to_string(dim) + " is not a multiple of timm's head width 64",
                              "heads");
  arch.heads = heads;
  note(std::to_string(heads) + " heads from " + heads_source);

  // Plain qkv blocks trained as ReLU linear attention carry no parameter that says so.
  const auto attention_entry = checkpoint.metadata.find("attention");
  const bool linear_by_metadata = attention_entry != checkpoint.metadata.end() && attention_entry->second == "linear";
  if (linear_by_metadata) note("native attention: linear (file metadata)");
  for (int i = 0; i < arch.depth; ++i) {
    const std::string block = "blocks." + std::to_string(i) + ".";
    const std::string attn = block + "attn.";
    BlockArch b;
    b.attention.dim = dim;
    b.attention.heads = heads;
    if (keys.has(attn + "x_to_emb.weight")) {
      b.attention.native = NativeAttention::Anchor;
      b.attention.anchors = int(keys.size(attn + "dist_anchor_B.weight", 0, 2));
    } else if (keys.has(attn + "qkv.weight")) {
      b.attention.qkv_bias = keys.has(attn + "qkv.bias");
      if (linear_by_metadata) {
        b.attention.native = NativeAttention::Linear;
      } else if (keys.has(attn + "temperature")) {
        b.attention.native = NativeAttention::Enhanced;
      } else if (keys.has(attn + "dwc.weight") || keys.has(attn + "scale") || keys.has(attn + "positional_encoding")) {
        b.attention.native = NativeAttention::Focused;
        if (keys.has(attn + "dwc.weight")) {
          const auto& dwc = keys.get(attn + "dwc.weight");
          b.attention.dwc_kernel = int(keys.size(attn + "dwc.weight", 2, 4));
          // FLatten's DWC pads k / 2 on each side: only odd square kernels keep the grid.
          if (b.attention.dwc_kernel % 2 == 0 || dwc.size(3) != dwc.size(2) || dwc.size(1) != 1)
            throw CheckpointError("tensor '" + attn + "dwc.weight' has shape " + shape_text(dwc.sizes()) +
                                  ": FLatten's depthwise conv needs [d, 1, k, k] with an odd k");
        }
        b.attention.has_scale = keys.has(attn + "scale");
        if (keys.has(attn + "positional_encoding"))
          b.attention.positional_encoding_tokens = int(keys.size(attn + "positional_encoding", 1, 3));
      }
    } else if (keys.has(attn + "q.weight") || keys.has(attn + "kv.weight")) {
      throw CheckpointError("block " + std::to_string(i) +
                            " uses separate attn.q / attn.kv projections (PVT layout), which is not supported yet");
    } else {
      throw CheckpointError("block " + std::to_string(i) + " has no attention projection (attn.qkv or attn.x_to_emb)");
    }
    b.mlp_hidden = int(keys.size(block + "mlp.fc1.weight", 0, 2));
    b.layer_scale = keys.has(block + "ls1.gamma");
    b.local_concentration = keys.has(block + "local_mp.conv1.weight");
    arch.blocks.push_back(b);
  }
  facts.apply_to(arch);
  // What the keys show, whatever the layout (timm's CLIP models carry norm_pre and a bias-free head).
  arch.patch_bias = keys.has("patch_embed.proj.bias");
  arch.norm_pre = keys.has("norm_pre.weight");
  arch.head_bias = arch.num_classes == 0 || keys.has("head.bias");
  if (!activation.empty())
    for (auto& block : arch.blocks)
      block.activation = activation == "quick_gelu" ? MlpActivation::QuickGelu : MlpActivation::Gelu;
  else if (arch.norm_pre && facts.layout == CheckpointLayout::Timm)
    note(
        "norm_pre present (a CLIP-style tower): the MLP runs exact GELU; for OpenAI CLIP weights, which use "
        "QuickGELU and LayerNorm eps 1e-5, pass --arch act=quick_gelu,eps=1e-5");
  if (layer_norm_eps > 0) arch.layer_norm_eps = layer_norm_eps;
  check_arch_limits(vit_arch_estimate(arch));
  return arch;
}

// timm's ViT and DeiT names (timm/models/vision_transformer.py, deit.py; img_size from the default
// pretrained tag). The keys show everything but the heads.
const std::vector<ReleasedArch>& vit_released() {
  static const std::vector<ReleasedArch> table = {
      {"vit_tiny_patch16_224", R"({"patch_size":16,"embed_dim":192,"depth":12,"num_heads":3,"img_size":224})"},
      {"vit_tiny_patch16_384", R"({"patch_size":16,"embed_dim":192,"depth":12,"num_heads":3,"img_size":384})"},
      {"vit_small_patch32_224", R"({"patch_size":32,"embed_dim":384,"depth":12,"num_heads":6,"img_size":224})"},
      {"vit_small_patch32_384", R"({"patch_size":32,"embed_dim":384,"depth":12,"num_heads":6,"img_size":384})"},
      {"vit_small_patch16_224", R"({"patch_size":16,"embed_dim":384,"depth":12,"num_heads":6,"img_size":224})"},
      {"vit_small_patch16_384", R"({"patch_size":16,"embed_dim":384,"depth":12,"num_heads":6,"img_size":384})"},
      {"vit_small_patch8_224", R"({"patch_size":8,"embed_dim":384,"depth":12,"num_heads":6,"img_size":224})"},
      {"vit_base_patch32_224", R"({"patch_size":32,"embed_dim":768,"depth":12,"num_heads":12,"img_size":224})"},
      {"vit_base_patch32_384", R"({"patch_size":32,"embed_dim":768,"depth":12,"num_heads":12,"img_size":384})"},
      {"vit_base_patch16_224", R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":224})"},
      {"vit_base_patch16_384", R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":384})"},
      {"vit_base_patch8_224", R"({"patch_size":8,"embed_dim":768,"depth":12,"num_heads":12,"img_size":224})"},
      {"vit_large_patch32_224", R"({"patch_size":32,"embed_dim":1024,"depth":24,"num_heads":16,"img_size":224})"},
      {"vit_large_patch32_384", R"({"patch_size":32,"embed_dim":1024,"depth":24,"num_heads":16,"img_size":384})"},
      {"vit_large_patch16_224", R"({"patch_size":16,"embed_dim":1024,"depth":24,"num_heads":16,"img_size":224})"},
      {"vit_large_patch16_384", R"({"patch_size":16,"embed_dim":1024,"depth":24,"num_heads":16,"img_size":384})"},
      {"vit_large_patch14_224", R"({"patch_size":14,"embed_dim":1024,"depth":24,"num_heads":16,"img_size":224})"},
      {"vit_huge_patch14_224", R"({"patch_size":14,"embed_dim":1280,"depth":32,"num_heads":16,"img_size":224})"},
      {"vit_giant_patch14_224", R"({"patch_size":14,"embed_dim":1408,"depth":40,"num_heads":16,"img_size":224})"},
      {"vit_gigantic_patch14_224", R"({"patch_size":14,"embed_dim":1664,"depth":48,"num_heads":16,"img_size":224})"},
      {"vit_small_patch14_dinov2",
       R"({"patch_size":14,"embed_dim":384,"depth":12,"num_heads":6,"init_values":1e-05,"img_size":518})"},
      {"vit_small_patch14_reg4_dinov2",
       R"({"patch_size":14,"embed_dim":384,"depth":12,"num_heads":6,"init_values":1e-05,"reg_tokens":4,"no_embed_class":true,"img_size":518})"},
      {"vit_base_patch14_dinov2",
       R"({"patch_size":14,"embed_dim":768,"depth":12,"num_heads":12,"init_values":1e-05,"img_size":518})"},
      {"vit_base_patch14_reg4_dinov2",
       R"({"patch_size":14,"embed_dim":768,"depth":12,"num_heads":12,"init_values":1e-05,"reg_tokens":4,"no_embed_class":true,"img_size":518})"},
      {"vit_large_patch14_dinov2",
       R"({"patch_size":14,"embed_dim":1024,"depth":24,"num_heads":16,"init_values":1e-05,"img_size":518})"},
      {"vit_large_patch14_reg4_dinov2",
       R"({"patch_size":14,"embed_dim":1024,"depth":24,"num_heads":16,"init_values":1e-05,"reg_tokens":4,"no_embed_class":true,"img_size":518})"},
      {"vit_giant_patch14_dinov2",
       R"({"patch_size":14,"embed_dim":1536,"depth":40,"num_heads":24,"init_values":1e-05,"img_size":518})"},
      {"vit_giant_patch14_reg4_dinov2",
       R"({"patch_size":14,"embed_dim":1536,"depth":40,"num_heads":24,"init_values":1e-05,"reg_tokens":4,"no_embed_class":true,"img_size":518})"},
      {"deit_tiny_patch16_224", R"({"patch_size":16,"embed_dim":192,"depth":12,"num_heads":3,"img_size":224})"},
      {"deit_small_patch16_224", R"({"patch_size":16,"embed_dim":384,"depth":12,"num_heads":6,"img_size":224})"},
      {"deit_base_patch16_224", R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":224})"},
      {"deit_base_patch16_384", R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":384})"},
      {"deit_tiny_distilled_patch16_224",
       R"({"patch_size":16,"embed_dim":192,"depth":12,"num_heads":3,"img_size":224,"distilled":true})"},
      {"deit_small_distilled_patch16_224",
       R"({"patch_size":16,"embed_dim":384,"depth":12,"num_heads":6,"img_size":224,"distilled":true})"},
      {"deit_base_distilled_patch16_224",
       R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":224,"distilled":true})"},
      {"deit_base_distilled_patch16_384",
       R"({"patch_size":16,"embed_dim":768,"depth":12,"num_heads":12,"img_size":384,"distilled":true})"},
  };
  return table;
}

const BackboneFamily& vit_family() {
  static const BackboneFamily family{
      "vit",
      "ViT/DeiT (timm, Hugging Face, CLIP, DINOv2)",
      // Any file: what infer_arch finds missing says what the file is not.
      [](const Checkpoint&) { return true; },
      [](FamilyInput& input) {
        LoadReport report;
        const VitArch arch = infer_arch(input.checkpoint, input.meta, &report, &input.layout, &input.sources);
        input.notes.insert(input.notes.end(), report.notes.begin(), report.notes.end());
        input.assumed.insert(input.assumed.end(), report.assumed.begin(), report.assumed.end());
        return inferred_backbone<VisionTransformerImpl>(arch, vit_arch_estimate(arch));
      },
      {},
      vit_released(),
      {{"eps", "", "LayerNorm epsilon (ViT)", ArchKey::Number},
       {"act", "act_layer", "MLP activation, gelu or quick_gelu (ViT)", ArchKey::Text}},
      {}};
  return family;
}

}  // namespace attnscope
