#include "models/model_loader.h"

#include "core/assets.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "models/arch_limits.h"
#include "models/checkpoint_layouts.h"
#include "models/finite_checks.h"
#include "models/model_families.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace attnscope {

namespace {

std::string shape_string(const torch::IntArrayRef& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << "]";
  return out.str();
}

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
      throw CheckpointError("tensor '" + excerpt(key) + "' has shape " + shape_string(t.sizes()) + ", expected " +
                            std::to_string(expected_dims) + " dimensions");
    // Shapes cost nothing in a file; a size beyond int would wrap when it becomes a layer width.
    if (t.size(dim) > std::numeric_limits<int>::max())
      throw CheckpointError("tensor '" + excerpt(key) + "' has shape " + shape_string(t.sizes()) +
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

ArchOverrides ArchOverrides::parse(const std::string& text) {
  ArchOverrides overrides;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("--arch expects key=value pairs, got '" + excerpt(item) + "'");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto number = [&](auto convert) {
      try {
        return convert(value);
      } catch (const std::exception&) {
        throw std::invalid_argument("--arch " + excerpt(key + "=" + value) + " is not a number");
      }
    };
    if (key == "heads")
      overrides.heads = number([](const std::string& s) { return std::stoi(s); });
    else if (key == "eps")
      overrides.layer_norm_eps = number([](const std::string& s) { return std::stod(s); });
    else if (key == "act" && (value == "gelu" || value == "quick_gelu"))
      overrides.activation = value;
    else if (key == "act")
      throw std::invalid_argument("--arch act must be gelu or quick_gelu, got '" + excerpt(value) + "'");
    else
      throw std::invalid_argument("unknown --arch key '" + excerpt(key) + "' (known: heads, eps, act)");
  }
  if (overrides.heads < 0 || overrides.heads > 4096) throw std::invalid_argument("--arch heads must be from 1 to 4096");
  // 0 means "not given"; anything else must be a usable LayerNorm epsilon.
  if (!(std::isfinite(overrides.layer_norm_eps) && overrides.layer_norm_eps >= 0 && overrides.layer_norm_eps < 1))
    throw std::invalid_argument("--arch eps must be a number from 0 (exclusive) to 1, e.g. 1e-6");
  return overrides;
}

std::string LoadReport::describe() const {
  std::ostringstream out;
  auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out << items.size() << " " << what << ": ";
    for (size_t i = 0; i < items.size() && i < 6; ++i) out << (i ? ", " : "") << items[i];
    if (items.size() > 6) out << ", ...";
    out << "; ";
  };
  list("missing", missing);
  list("unexpected", unexpected);
  list("mis-shaped", misshaped);
  std::string text = out.str();
  if (text.size() >= 2) text.resize(text.size() - 2);
  return text;
}

VitArch infer_arch(const Checkpoint& checkpoint, const ArchOverrides& overrides, LoadReport* report,
                   const LayoutFacts* layout) {
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
    throw CheckpointError("patch_embed.proj.weight has shape " + shape_string(patch_weight.sizes()) +
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
  if (overrides.layer_norm_eps > 0) arch.layer_norm_eps = overrides.layer_norm_eps;

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

  // Heads: from variant parameters, else the overrides, metadata, then timm's 64-wide heads.
  int heads = overrides.heads;
  std::string heads_source = "--arch";
  if (heads == 0 && facts.heads > 0) {
    heads = facts.heads;
    heads_source = facts.layout + " layout";
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
  }
  if (heads > 0 && dim % heads != 0)
    throw CheckpointError(std::to_string(heads) + " heads (from " + heads_source + ") do not divide the width " +
                          std::to_string(dim));
  if (heads <= 0)
    throw CheckpointError("cannot tell the head count of a width-" + std::to_string(dim) +
                          " model: pass --arch heads=N");
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
            throw CheckpointError("tensor '" + attn + "dwc.weight' has shape " + shape_string(dwc.sizes()) +
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
  if (!overrides.activation.empty())
    for (auto& block : arch.blocks)
      block.activation = overrides.activation == "quick_gelu" ? MlpActivation::QuickGelu : MlpActivation::Gelu;
  else if (arch.norm_pre && facts.layout == "timm")
    note(
        "norm_pre present (a CLIP-style tower): the MLP runs exact GELU; for OpenAI CLIP weights, which use "
        "QuickGELU and LayerNorm eps 1e-5, pass --arch act=quick_gelu,eps=1e-5");
  if (overrides.layer_norm_eps > 0) arch.layer_norm_eps = overrides.layer_norm_eps;
  check_arch_limits(vit_arch_estimate(arch));
  return arch;
}

void copy_weights(torch::nn::Module& model, const Checkpoint& checkpoint, LoadReport& report) {
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  auto copy_one = [&](const std::string& name, torch::Tensor& target, bool optional) {
    auto it = checkpoint.tensors.find(name);
    if (it == checkpoint.tensors.end()) {
      if (!optional) report.missing.push_back(name);
      return;
    }
    used.insert(name);
    if (!it->second.sizes().equals(target.sizes())) {
      report.misshaped.push_back(name + ": file " + shape_string(it->second.sizes()) + " vs model " +
                                 shape_string(target.sizes()));
      return;
    }
    target.copy_(it->second.to(target.dtype()));
  };
  for (auto& item : model.named_parameters()) copy_one(item.key(), item.value(), false);
  for (auto& item : model.named_buffers()) {
    // BatchNorm's batch counter does not change inference.
    const bool optional =
        item.key().size() >= 19 && item.key().compare(item.key().size() - 19, 19, "num_batches_tracked") == 0;
    copy_one(item.key(), item.value(), optional);
  }
  for (const auto& entry : checkpoint.tensors)
    if (!used.count(entry.first)) report.unexpected.push_back(entry.first);
}

namespace {

// A TorchScript archive without attnscope's metadata can still hold weights attnscope runs
// natively (OpenAI's released CLIP files): its parameters are read, its forward never runs.
Checkpoint read_weights(const std::string& file) {
  if (!is_torchscript_archive(file)) return load_checkpoint(file);
  Checkpoint checkpoint;
  checkpoint.format = "torchscript-weights";
  checkpoint.tensors = scripted_state_dict(file);
  if (!checkpoint.tensors.count("visual.conv1.weight"))
    throw CheckpointError(file +
                          ": a TorchScript file without attnscope.json; export the model with "
                          "scripts/export_torchscript.py (see its --help for what a model must satisfy)");
  return checkpoint;
}

// What the file (or the config beside it) declares about its input, for every family alike.
void adopt_declared_preprocessing(const LayoutFacts& layout, LoadedModel& loaded) {
  loaded.normalization.mean = layout.mean;
  loaded.normalization.std = layout.std;
  loaded.normalization_source =
      layout.normalization_source.empty() ? "ImageNet (timm default)" : layout.normalization_source;
  loaded.declared.normalization = loaded.normalization;
  loaded.declared.normalization_source = loaded.normalization_source;
  loaded.declared.resize = layout.resize;
  loaded.declared.crop_pct = layout.crop_pct;
  loaded.declared.interpolation = layout.interpolation;
  loaded.declared.source = layout.preprocessing_source;
}

LoadedModel load_scripted_model(const std::string& path, const std::string& file, torch::Device device) {
  LoadedModel loaded;
  loaded.path = path;
  loaded.format = "torchscript";
  auto scripted = std::make_shared<ScriptedModel>(file, device);
  loaded.backbone = scripted;
  loaded.class_names = scripted->class_names();
  loaded.normalization.mean = scripted->mean();
  loaded.normalization.std = scripted->std();
  loaded.normalization_source = "attnscope.json";
  loaded.declared.normalization = loaded.normalization;
  loaded.declared.normalization_source = loaded.normalization_source;
  loaded.device = device;
  loaded.parameter_count = scripted->parameter_count();
  loaded.report.notes.push_back("TorchScript file '" + scripted->name() +
                                "': " + std::to_string(scripted->layers().size()) +
                                " attention layers report their probabilities; variant swaps, f_p and Grad-CAM "
                                "need a model attnscope implements natively");
  return loaded;
}

}  // namespace

Backbone& LoadedModel::native(const std::string& what) {
  if (is_scripted())
    throw std::invalid_argument(what +
                                " needs q, k and the activations of a model attnscope implements natively; a "
                                "TorchScript file reports only its attention probabilities");
  return *backbone;
}

VisionTransformerImpl& LoadedModel::vit() const {
  auto* model = dynamic_cast<VisionTransformerImpl*>(backbone.get());
  if (!model) throw std::invalid_argument("a " + backbone->family() + " model is not a ViT");
  return *model;
}

const VitArch& LoadedModel::vit_arch() const {
  // A TorchScript file describes its token layout with the same fields.
  if (auto* scripted = dynamic_cast<const ScriptedModel*>(backbone.get())) return scripted->arch();
  return vit().arch();
}

LoadedModel load_model(const std::string& path, const ArchOverrides& overrides, torch::Device device) {
  const std::string file = resolve_weights_file(path);
  if (is_torchscript_archive(file) && has_attnscope_metadata(file)) return load_scripted_model(path, file, device);
  Checkpoint checkpoint = read_weights(file);
  // A training checkpoint with several weight sets: the one the family's paper reports (L2ViT:
  // model_ema), said in the notes either way.
  std::vector<std::string> container_notes;
  const std::string preferred = preferred_container(checkpoint);
  if (!preferred.empty()) {
    std::string others;
    for (const std::string& key : checkpoint.containers)
      if (key != preferred && (key == "model" || key == "model_ema" || key == "state_dict" || key == "state_dict_ema"))
        others += (others.empty() ? "" : ", ") + ("'" + key + "'");
    if (preferred != checkpoint.container_key) checkpoint = load_checkpoint(file, preferred);
    container_notes.push_back("weights from '" + preferred + "'" +
                              (preferred == "model_ema" ? " (the EMA weights the paper reports)" : "") +
                              (others.empty() ? "" : "; the file also holds " + others));
  }
  LoadedModel loaded;
  loaded.path = path;
  loaded.format = checkpoint.format;
  loaded.container_key = checkpoint.container_key;
  loaded.metadata = checkpoint.metadata;
  const LayoutFacts layout = adopt_known_layout(checkpoint, path);
  loaded.report.notes = layout.notes;
  loaded.report.notes.insert(loaded.report.notes.end(), container_notes.begin(), container_notes.end());
  // Other families first (their keys never look like a ViT's), then the ViT family.
  if (layout.layout == "timm") {
    if (auto family = build_family_backbone(checkpoint, architecture_metadata(checkpoint, file), loaded.report.notes)) {
      loaded.backbone = family;
      copy_weights(*family, checkpoint, loaded.report);
      if (!loaded.report.ok())
        throw CheckpointError(path + ": weights do not fit the inferred " + family->family() +
                              " architecture: " + loaded.report.describe());
      if (const auto names = non_finite_tensors(checkpoint.tensors); !names.empty())
        loaded.report.warnings.push_back("the checkpoint's " + describe_non_finite(names));
      adopt_declared_preprocessing(layout, loaded);
      loaded.class_names = class_names_for(loaded);
      family->eval();
      family->to(device);
      loaded.device = device;
      loaded.parameter_count = family->parameter_count();
      return loaded;
    }
  }
  const VitArch arch = infer_arch(checkpoint, overrides, &loaded.report, &layout);
  auto model = std::make_shared<VisionTransformerImpl>(arch);
  loaded.backbone = model;
  copy_weights(*model, checkpoint, loaded.report);
  if (!loaded.report.ok())
    throw CheckpointError(path + ": weights do not fit the inferred " + arch.family() +
                          " architecture: " + loaded.report.describe());
  if (const auto names = non_finite_tensors(checkpoint.tensors); !names.empty())
    loaded.report.warnings.push_back("the checkpoint's " + describe_non_finite(names));
  adopt_declared_preprocessing(layout, loaded);
  loaded.class_names = layout.class_names.size() == size_t(arch.num_classes) && arch.num_classes > 0
                           ? layout.class_names
                           : class_names_for(loaded);
  model->eval();
  model->to(device);
  loaded.device = device;
  loaded.parameter_count = model->parameter_count();
  return loaded;
}

std::vector<std::string> class_names_for(const LoadedModel& model) {
  auto it = model.metadata.find("class_names");
  if (it != model.metadata.end()) {
    nlohmann::json parsed;
    try {
      parsed = parse_json_checked(it->second, "metadata class_names");
    } catch (const std::invalid_argument&) {
      parsed = nullptr;  // unusable names: the outputs are numbered instead
    }
    if (parsed.is_array() && int(parsed.size()) == model.num_classes()) {
      std::vector<std::string> names;
      for (const auto& name : parsed)
        names.push_back(name.is_string() ? excerpt(name.get<std::string>()) : "class " + std::to_string(names.size()));
      return names;
    }
  }
  if (model.num_classes() == 1000) return read_class_names(asset_path("imagenet1k_classes.txt"));
  return {};
}

std::string output_name(const LoadedModel& model, int index) {
  const std::string kind = model.output_kind();
  if (index < 0) return "norm of the " + kind;
  if (kind != "logits") return kind + " dim " + std::to_string(index);
  return index < int(model.class_names.size()) ? model.class_names[size_t(index)] : "class " + std::to_string(index);
}

torch::Device resolve_device(const std::string& name) {
  if (name.empty() || name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::kCPU;
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw std::invalid_argument("--device cuda: this LibTorch build has no CUDA or no GPU is visible");
    return torch::Device(name);
  }
  throw std::invalid_argument("unknown device '" + excerpt(name) + "' (expected auto, cpu or cuda)");
}

}  // namespace attnscope
