#include "models/vit_checkpoint.h"

#include <cmath>
#include <limits>

#include "core/excerpt.h"
#include "core/number_text.h"
#include "models/attention_kernels_successors.h"
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
  if (keys.has(prefix + "proj_l.weight")) return int(keys.size(prefix + "proj_l.weight", 0, 2));  // CaiT
  if (keys.has(prefix + "an_bias")) return int(keys.size(prefix + "an_bias", 0, 4));              // Agent Attention
  if (keys.has(prefix + "residual.0.weight")) {  // InLine: Conv1d(C, C, 1, groups=heads)
    const int64_t per_group = keys.size(prefix + "residual.0.weight", 1, 3);
    if (per_group > 0 && dim % per_group == 0) return int(dim / per_group);
  }
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

// When the config names a registered architecture, throws CheckpointError naming both where its
// constructor's arguments (with the config's model_args laid over them, as timm's create_model lays
// them) contradict what the weights show: a name is trusted for what the weights cannot show only
// when it agrees with what they do.
void check_registered_against_weights(const nlohmann::json& meta, const std::vector<ShownSize>& shown) {
  if (!meta.is_object() || !meta.contains("registered_args") || !meta.contains("architecture")) return;
  const nlohmann::json& args = meta.at("registered_args");
  const std::string name = meta.at("architecture").is_string() ? meta.at("architecture").get<std::string>() : "";
  std::string registered_text, weights_text;
  for (const ShownSize& size : shown) {
    if (!args.contains(size.argument)) continue;
    const nlohmann::json& value = args[size.argument];
    const int64_t registered = value.is_boolean()          ? int64_t(value.get<bool>())
                               : value.is_number_integer() ? value.get<int64_t>()
                                                           : -1;
    if (registered < 0 || registered == size.value) continue;
    registered_text += (registered_text.empty() ? "" : ", ") + std::string(size.argument) + " " + value.dump();
    weights_text += (weights_text.empty() ? "" : ", ") + std::string(size.argument) + " " + std::to_string(size.value) +
                    " (" + size.read_from + ")";
  }
  if (!registered_text.empty())
    throw CheckpointError("the config names architecture '" + excerpt(name) + "' (" + registered_text +
                          "), but the weights have " + weights_text +
                          ": the name belongs to another model; remove it or give the weights' own");
}

// Constructor arguments of a registered name that build something attnscope's ViT does not run:
// refused by name rather than read as a plain ViT.
void refuse_unrun_arguments(const nlohmann::json& meta) {
  if (!meta.is_object() || !meta.contains("registered_args")) return;
  const nlohmann::json& args = meta.at("registered_args");
  const std::string name = meta.contains("architecture") ? meta.at("architecture").dump() : "the config";
  auto refuse = [&](const std::string& argument, const std::string& why) {
    throw CheckpointError("the registered " + excerpt(name) + " builds its model with " + argument + "=" +
                          excerpt(args[argument].dump(), 60) + ", " + why +
                          " attnscope does not run; export it with scripts/export_torchscript.py to see its "
                          "attention instead");
  };
  for (const char* argument : {"block_fn", "attn_layer", "embed_layer", "embed_norm_layer", "norm_layer"})
    if (args.contains(argument) && !args[argument].is_null()) refuse(argument, "a layer");
  if (args.value("use_post_norm", false)) refuse("use_post_norm", "post-norm blocks, which");
  if (args.value("gated_attn", false)) refuse("gated_attn", "gated attention, which");
  if (args.contains("proj_bias") && args["proj_bias"] == false)
    refuse("proj_bias", "an output projection without bias, which");
  if (args.contains("mlp_layer") && args["mlp_layer"].is_string()) {
    const std::string layer = args["mlp_layer"].get<std::string>();
    if (layer != "SwiGLUPacked" && layer != "SwiGLU" && layer != "Mlp") refuse("mlp_layer", "an MLP");
  }
  if (args.contains("attn_type") && args["attn_type"] != "eva" && args["attn_type"] != "rope")
    refuse("attn_type", "an attention");
}

// Keys only timm's Eva class writes (its attention's q_bias / q_proj, its SwiGLU, its layer scale).
bool has_eva_keys(const KeyReader& keys, const LayoutFacts& facts) {
  return facts.eva_layer_scale || keys.has("blocks.0.attn.q_bias") || keys.has("blocks.0.attn.q_proj.weight") ||
         keys.has("blocks.0.mlp.fc1_g.weight");
}

// What the configs say, read once: a value and where it came from.
struct ConfigReader {
  const nlohmann::json& meta;
  const std::map<std::string, std::string>* sources;
  nlohmann::json get(const char* key) const {
    return meta.is_object() && meta.contains(key) ? meta.at(key) : nlohmann::json();
  }
  std::string source(const char* key) const {
    if (!sources || !sources->count(key)) return "--arch";
    return sources->at(key);
  }
  bool given(const char* key) const { return !get(key).is_null(); }
};

// The rotary positions the configs describe; none when they name no rotary model. A file without
// pos_embed and without a config is read as DINOv3 (the released models without any position
// embedding), and that is said.
RotaryArch read_rope(const ConfigReader& config, const LayoutFacts& facts, bool has_positions, bool eva_keys,
                     LoadReport* report) {
  if (facts.rope && !config.given("use_rot_pos_emb")) return *facts.rope;
  RotaryArch rope;
  bool enabled = config.given("use_rot_pos_emb") && config.get("use_rot_pos_emb").get<bool>();
  const bool assumed_dinov3 = !config.given("use_rot_pos_emb") && !has_positions;
  if (assumed_dinov3) {
    enabled = true;
    if (report)
      report->assumed.push_back({"rope_type", "dinov3",
                                 "the weights have no pos_embed and no config names the architecture: DINOv3's "
                                 "rotary positions (base 100, half rotation), the released models without one"});
  } else if (!config.given("use_rot_pos_emb") && eva_keys && report) {
    report->assumed.push_back({"use_rot_pos_emb", false,
                               "an EVA-layout file whose config names no architecture: no rotary positions (EVA-02 "
                               "and PE rotate; give their registered name)"});
  }
  if (!enabled) return rope;
  const std::string type = config.given("rope_type") ? config.get("rope_type").get<std::string>()
                           : assumed_dinov3          ? "dinov3"
                                                     : "cat";
  if (type == "cat") {
    rope.kind = RotaryKind::Axial;
  } else if (type == "dinov3") {
    rope.kind = RotaryKind::DinoV3;
  } else {
    throw CheckpointError("rope_type '" + excerpt(type) + "' (from " + config.source("rope_type") +
                          ") is not one attnscope runs: cat (EVA-02, PE) or dinov3");
  }
  rope.temperature = config.given("rope_temperature") ? config.get("rope_temperature").get<double>()
                     : assumed_dinov3                 ? 100.0
                                                      : 10000.0;
  rope.rotate_half = config.given("rope_rotate_half") ? config.get("rope_rotate_half").get<bool>() : assumed_dinov3;
  if (rope.kind == RotaryKind::Axial) {  // timm hands these to the axial kind only
    rope.grid_offset = config.given("rope_grid_offset") ? config.get("rope_grid_offset").get<double>() : 0.0;
    if (config.given("rope_grid_indexing")) {
      const std::string indexing = config.get("rope_grid_indexing").get<std::string>();
      if (indexing != "ij" && indexing != "xy")
        throw CheckpointError("rope_grid_indexing '" + excerpt(indexing) + "' (from " +
                              config.source("rope_grid_indexing") + ") is neither ij nor xy");
      rope.xy_indexing = indexing == "xy";
    }
    if (config.given("ref_feat_shape")) rope.ref_grid_h = rope.ref_grid_w = config.get("ref_feat_shape").get<int>();
  }
  if (!(rope.temperature > 1.0) || !std::isfinite(rope.temperature) || !std::isfinite(rope.grid_offset))
    throw CheckpointError("rope_temperature " + std::to_string(rope.temperature) +
                          " is not a frequency base above 1 (from " + config.source("rope_temperature") + ")");
  return rope;
}

// How block `prefix`'s attention projects queries, keys and values, from which keys it has.
void read_projections(const KeyReader& keys, const std::string& attn, AttentionArch& attention) {
  if (keys.has(attn + "q_proj.weight")) {
    attention.qkv_layout = QkvLayout::Separate;
    attention.qkv_bias = keys.has(attn + "q_proj.bias");
    attention.k_bias = keys.has(attn + "k_proj.bias");
    if (keys.has(attn + "v_proj.bias") != attention.qkv_bias)
      throw CheckpointError("'" + attn + "q_proj' and '" + attn +
                            "v_proj' disagree on a bias: the checkpoint is incomplete or damaged");
  } else if (keys.has(attn + "q_bias") || keys.has(attn + "v_bias")) {
    if (!keys.has(attn + "q_bias") || !keys.has(attn + "v_bias"))
      throw CheckpointError("missing tensor '" + attn + (keys.has(attn + "q_bias") ? "v_bias" : "q_bias") +
                            "' (EVA's attention has both): the checkpoint is incomplete or damaged");
    attention.qkv_layout = QkvLayout::FusedQvBias;
    attention.qkv_bias = false;
  }
  attention.qk_norm = keys.has(attn + "q_norm.weight");
  attention.inner_norm = keys.has(attn + "norm.weight");
}

// agent_deit's AgentAttention: the agent count and trained grid from its position biases, which must
// all be there with the depthwise conv on V.
void read_agent_attention(const KeyReader& keys, const std::string& attn, AttentionArch& attention) {
  for (const char* part : {"an_bias", "na_bias", "ah_bias", "aw_bias", "ha_bias", "wa_bias", "ac_bias", "ca_bias",
                           "dwc.weight", "dwc.bias"})
    if (!keys.has(attn + part))
      throw CheckpointError("missing tensor '" + attn + part +
                            "' (Agent Attention's module has every position bias and its depthwise conv): the "
                            "checkpoint is incomplete or damaged");
  attention.native = NativeAttention::Agent;
  attention.agents = int(keys.size(attn + "an_bias", 1, 4));
  attention.agent_grid = int(keys.size(attn + "ah_bias", 3, 5));
  const int64_t grid = attention.agent_grid;
  if (const std::string problem = successor_kernels::agent_count_problem(attention.agents, int(grid * grid));
      !problem.empty())
    throw CheckpointError("'" + attn + "an_bias': " + problem);
}

// The MLP of block `block`: plain, or gated with its inputs packed in fc1 or apart (fc1_g, fc1_x).
void read_mlp(const KeyReader& keys, const std::string& block, BlockArch& arch) {
  const std::string mlp = block + "mlp.";
  arch.mlp_norm = keys.has(mlp + "norm.weight");
  if (keys.has(mlp + "fc1_g.weight")) {
    arch.gate = MlpGate::Separate;
    arch.activation = MlpActivation::Silu;
    arch.mlp_hidden = int(keys.size(mlp + "fc1_x.weight", 0, 2));
    if (keys.size(mlp + "fc1_g.weight", 0, 2) != arch.mlp_hidden)
      throw CheckpointError("'" + mlp + "fc1_g.weight' and '" + mlp + "fc1_x.weight' differ in width: not a SwiGLU");
    return;
  }
  const int64_t fc1 = keys.size(mlp + "fc1.weight", 0, 2);
  const int64_t fc2_in = keys.has(mlp + "fc2.weight") ? keys.size(mlp + "fc2.weight", 1, 2) : fc1;
  if (fc2_in > 0 && fc1 == 2 * fc2_in) {  // timm's GluMlp (SwiGLUPacked): fc1 holds the gate and the value
    arch.gate = MlpGate::Packed;
    arch.activation = MlpActivation::Silu;
    arch.mlp_hidden = int(fc2_in);
  } else {
    // Any other disagreement with fc2 is named by the weights' check (mis-shaped), after the sizes' bounds.
    arch.mlp_hidden = int(fc1);
  }
}

// Which features the head reads (timm's global_pool) and, for an attention-pool head, its shape.
void read_pool(const KeyReader& keys, const ConfigReader& config, const LayoutFacts& facts, bool eva_class,
               VitArch& arch, LoadReport* report) {
  const bool has_pool_head = keys.has("attn_pool.latent");
  std::string pool = config.given("global_pool") ? config.get("global_pool").get<std::string>()
                     : facts.pool                ? to_string(*facts.pool)
                                                 : "";
  const bool has_class_token = arch.class_token || !arch.class_blocks.empty();
  if (pool.empty()) pool = has_pool_head ? "map" : eva_class ? "avg" : has_class_token ? "token" : "avg";
  if (pool == "token") {
    if (!has_class_token)
      throw CheckpointError("global_pool token (from " + config.source("global_pool") +
                            ") reads the class token, and the weights have no cls_token");
    arch.pool = GlobalPool::Token;
  } else if (pool == "avg") {
    arch.pool = GlobalPool::Average;
  } else if (pool == "map") {
    if (!has_pool_head)
      throw CheckpointError("global_pool map (from " + config.source("global_pool") +
                            ") needs the attention-pool head attn_pool.*, which the weights do not have");
    arch.pool = GlobalPool::AttentionPool;
  } else {
    throw CheckpointError("global_pool '" + excerpt(pool) + "' (from " + config.source("global_pool") +
                          ") is not one attnscope reads: token, avg or map");
  }
  if (has_pool_head && arch.pool != GlobalPool::AttentionPool)
    throw CheckpointError("the weights have an attention-pool head (attn_pool.*) but global_pool is " + pool +
                          " (from " + config.source("global_pool") +
                          "): give --arch global_pool=map, or the weights without it");
  if (arch.pool != GlobalPool::AttentionPool) return;
  if (keys.size("attn_pool.latent", 1, 3) != 1)
    throw CheckpointError("attn_pool.latent has " + std::to_string(keys.size("attn_pool.latent", 1, 3)) +
                          " latent queries; attnscope reads attention-pool heads with one");
  arch.attn_pool.heads =
      config.given("attn_pool_num_heads") ? config.get("attn_pool_num_heads").get<int>() : arch.heads;
  arch.attn_pool.mlp_hidden = int(keys.size("attn_pool.mlp.fc1.weight", 0, 2));
  arch.attn_pool.activation = eva_class ? MlpActivation::Gelu : arch.blocks.front().activation;
  arch.attn_pool.include_prefix =
      eva_class || (config.given("pool_include_prefix") && config.get("pool_include_prefix").get<bool>());
  if (arch.embed_dim % arch.attn_pool.heads != 0)
    throw CheckpointError(
        std::to_string(arch.attn_pool.heads) + " attention-pool heads (from " +
        (config.given("attn_pool_num_heads") ? config.source("attn_pool_num_heads") : "the model's heads") +
        ") do not divide the width " + std::to_string(arch.embed_dim));
  if (!config.given("timm_class") && arch.class_token && report && facts.layout == CheckpointLayout::Timm)
    report->assumed.push_back({"timm_class", eva_class ? "Eva" : "VisionTransformer",
                               std::string("the attention-pool head ") +
                                   (eva_class ? "attends over the class token too (timm's Eva, read from its keys)"
                                              : "attends over the patch tokens only (timm's VisionTransformer); PE "
                                                "pools over its class token too: give its registered name")});
}

}  // namespace

VitArch infer_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, LoadReport* report,
                   const LayoutFacts* layout, const std::map<std::string, std::string>* sources) {
  const LayoutFacts timm_layout;
  const LayoutFacts& facts = layout ? *layout : timm_layout;
  const KeyReader keys(checkpoint);
  const ConfigReader config{meta, sources};
  auto note = [&](const std::string& text) {
    if (report) report->notes.push_back(text);
  };
  if (!keys.has("patch_embed.proj.weight") || !keys.has("blocks.0.norm1.weight"))
    throw CheckpointError(
        "unsupported model: not a ViT/DeiT/EVA in timm's layout (needs patch_embed.proj.weight and "
        "blocks.N.*; found " +
        std::to_string(checkpoint.tensors.size()) + " tensors, first '" +
        (checkpoint.tensors.empty() ? std::string("none") : excerpt(checkpoint.tensors.begin()->first)) + "')");
  refuse_unrun_arguments(meta);
  VitArch arch;
  const auto& patch_weight = keys.get("patch_embed.proj.weight");
  if (patch_weight.dim() != 4 || patch_weight.size(2) != patch_weight.size(3))
    throw CheckpointError("patch_embed.proj.weight has shape " + shape_text(patch_weight.sizes()) +
                          ", expected [C, 3, P, P]");
  arch.embed_dim = int(keys.size("patch_embed.proj.weight", 0, 4));
  arch.in_chans = int(keys.size("patch_embed.proj.weight", 1, 4));
  arch.patch_size = int(keys.size("patch_embed.proj.weight", 2, 4));
  arch.class_token = keys.has("cls_token");
  // CaiT: the class token joins after the blocks, at its class-attention blocks.
  int class_blocks = 0;
  while (keys.has("blocks_token_only." + std::to_string(class_blocks) + ".norm1.weight")) ++class_blocks;
  if (class_blocks > 0 && !arch.class_token)
    throw CheckpointError(
        "the file has class-attention blocks (blocks_token_only.*, CaiT's) but no cls_token for them to "
        "update: the checkpoint is incomplete or damaged");
  if (class_blocks > 0) arch.class_token = false;
  arch.dist_token = keys.has("dist_token");
  if (keys.has("reg_token")) arch.register_tokens = int(keys.size("reg_token", 1, 3));
  arch.final_norm = keys.has("norm.weight");
  arch.fc_norm = keys.has("fc_norm.weight");
  if (keys.has("head.weight")) arch.num_classes = int(keys.size("head.weight", 0, 2));
  arch.dist_head = arch.dist_token && keys.has("head_dist.weight");
  const bool eva_keys = has_eva_keys(keys, facts);
  // timm's Eva and Beit pool the mean of the patches unless told otherwise; their keys show them.
  const bool eva_class =
      config.given("timm_class") ? (config.get("timm_class") == "Eva" || config.get("timm_class") == "Beit") : eva_keys;
  const double layer_norm_eps = config.given("eps") ? config.get("eps").get<double>() : 0.0;
  if (layer_norm_eps > 0) arch.layer_norm_eps = layer_norm_eps;
  const std::string activation = config.given("act") ? config.get("act").get<std::string>() : "";
  try {
    if (!activation.empty()) parse_mlp_activation(activation);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string(e.what()) + " (from " + config.source("act") + ")");
  }

  const int prefix = arch.prefix_tokens();
  arch.abs_pos_embed = keys.has("pos_embed");
  // BEiT's relative position bias tables show the grid they were trained on: (2g - 1)^2 + 3 rows.
  int relative_bias_grid = 0;
  if (keys.has("blocks.0.attn.relative_position_bias_table")) {
    const int64_t rows = keys.size("blocks.0.attn.relative_position_bias_table", 0, 2);
    const int root = perfect_square_root(rows - 3);
    if (root == 0 || root % 2 == 0)
      throw CheckpointError("blocks.0.attn.relative_position_bias_table has " + std::to_string(rows) +
                            " rows: not (2g - 1)^2 + 3 for a square grid g (BEiT's relative position bias)");
    relative_bias_grid = (root + 1) / 2;
  }
  if (keys.has("rel_pos_bias.relative_position_bias_table"))
    throw CheckpointError(
        "one relative position bias shared by every block (rel_pos_bias.*, BEiT's pretraining "
        "use_shared_rel_pos_bias) is not read; BEiT's fine-tuned files with a table per block are");
  if (!arch.abs_pos_embed && relative_bias_grid > 0) {
    arch.pos_grid_h = arch.pos_grid_w = relative_bias_grid;
  } else if (!arch.abs_pos_embed) {
    // Positions are rotary: the grid is only the training input's, for the default input size.
    const int side = config.given("img_size") ? config.get("img_size").get<int>() : 224;
    if (!config.given("img_size") && report)
      report->assumed.push_back({"img_size", side, "no pos_embed shows the training grid: timm's default input"});
    arch.pos_grid_h = arch.pos_grid_w = std::max(1, side / arch.patch_size);
  } else {
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
  check_registered_against_weights(meta, {{"embed_dim", dim, "patch_embed.proj.weight"},
                                          {"depth", arch.depth, "blocks.N"},
                                          {"patch_size", arch.patch_size, "patch_embed.proj.weight"},
                                          {"reg_tokens", arch.register_tokens, "reg_token"},
                                          {"num_reg_tokens", arch.register_tokens, "reg_token"},
                                          {"class_token", arch.class_token, "cls_token"}});

  // Heads: what a source gives, else the layout's config, variant parameters, file metadata, then
  // timm's 64-wide heads (assumed, and said).
  if (config.given("heads") && !config.get("heads").is_number_integer())
    throw CheckpointError("heads " + excerpt(config.get("heads").dump(), 60) + " (from " + config.source("heads") +
                          "): a ViT has one head count for every block");
  int heads = config.given("heads") ? config.get("heads").get<int>() : 0;
  std::string heads_source = config.source("heads");
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
  arch.rope = read_rope(config, facts, arch.abs_pos_embed || relative_bias_grid > 0, eva_keys, report);
  if (arch.rope.enabled() && (dim / heads) % 4 != 0)
    throw CheckpointError("rotary positions need a head width that is a multiple of 4; " + std::to_string(heads) +
                          " heads (from " + heads_source + ") of width " + std::to_string(dim) + " give " +
                          std::to_string(dim / heads));
  if (arch.rope.enabled()) note("rotary positions: " + arch.rope.describe());

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
    b.attention.rope = arch.rope;
    if (keys.has(attn + "relative_position_bias_table")) {
      if (keys.size(attn + "relative_position_bias_table", 0, 2) !=
              keys.size("blocks.0.attn.relative_position_bias_table", 0, 2) ||
          keys.size(attn + "relative_position_bias_table", 1, 2) != heads)
        throw CheckpointError("'" + attn + "relative_position_bias_table' has shape " +
                              shape_text(keys.get(attn + "relative_position_bias_table").sizes()) + ", not [" +
                              std::to_string(keys.size("blocks.0.attn.relative_position_bias_table", 0, 2)) + ", " +
                              std::to_string(heads) + "] (the distances of the first block, one column per head)");
      b.attention.relative_bias_grid_h = b.attention.relative_bias_grid_w = relative_bias_grid;
    }
    if (keys.has(attn + "x_to_emb.weight")) {
      b.attention.native = NativeAttention::Anchor;
      b.attention.anchors = int(keys.size(attn + "dist_anchor_B.weight", 0, 2));
    } else if (keys.has(attn + "qkv.weight") || keys.has(attn + "q_proj.weight")) {
      b.attention.qkv_bias = keys.has(attn + "qkv.bias");
      read_projections(keys, attn, b.attention);
      if (keys.has(attn + "an_bias")) {
        read_agent_attention(keys, attn, b.attention);
      } else if (keys.has(attn + "residual.0.weight") || keys.has(attn + "residual.2.weight")) {
        if (!keys.has(attn + "residual.0.weight") || !keys.has(attn + "residual.2.weight"))
          throw CheckpointError("missing tensor '" + attn +
                                (keys.has(attn + "residual.0.weight") ? "residual.2.weight" : "residual.0.weight") +
                                "' (InLine's residual has both convolutions): the checkpoint is incomplete or damaged");
        b.attention.native = NativeAttention::InLine;
        b.attention.inline_residual = true;
      } else if (linear_by_metadata) {
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
      throw CheckpointError("block " + std::to_string(i) +
                            " has no attention projection (attn.qkv, attn.q_proj or attn.x_to_emb)");
    }
    b.attention.talking_heads = keys.has(attn + "proj_l.weight") || keys.has(attn + "proj_w.weight");
    if (b.attention.talking_heads && !(keys.has(attn + "proj_l.weight") && keys.has(attn + "proj_w.weight")))
      throw CheckpointError("missing tensor '" + attn + (keys.has(attn + "proj_l.weight") ? "proj_w" : "proj_l") +
                            ".weight' (CaiT's talking heads have both): the checkpoint is incomplete or damaged");
    if (b.attention.talking_heads && b.attention.qkv_layout != QkvLayout::Fused)
      throw CheckpointError("block " + std::to_string(i) +
                            " has talking heads (proj_l, proj_w) beside separate q/k/v projections: CaiT's "
                            "TalkingHeadAttn has one qkv");
    read_mlp(keys, block, b);
    b.layer_scale = keys.has(block + "ls1.gamma");
    b.local_concentration = keys.has(block + "local_mp.conv1.weight");
    arch.blocks.push_back(b);
  }
  for (int i = 0; i < class_blocks; ++i) {
    const std::string block = "blocks_token_only." + std::to_string(i) + ".";
    for (const char* part : {"attn.q.weight", "attn.k.weight", "attn.v.weight", "ls1.gamma", "ls2.gamma"})
      if (!keys.has(block + part))
        throw CheckpointError("missing tensor '" + block + part +
                              "' (a CaiT class-attention block's; its layer scale may be named gamma_1, gamma_2): "
                              "the checkpoint is incomplete or damaged");
    ClassAttentionArch class_block;
    class_block.qkv_bias = keys.has(block + "attn.q.bias");
    class_block.mlp_hidden = int(keys.size(block + "mlp.fc1.weight", 0, 2));
    arch.class_blocks.push_back(class_block);
  }
  if (class_blocks > 0)
    note("CaiT: " + std::to_string(class_blocks) + " class-attention blocks after the " + std::to_string(arch.depth) +
         " blocks" + (arch.blocks.front().attention.talking_heads ? " (talking heads)" : "") +
         "; the class token joins there");
  facts.apply_to(arch);
  // What the keys show, whatever the layout (timm's CLIP models carry norm_pre and a bias-free head).
  arch.patch_bias = keys.has("patch_embed.proj.bias");
  arch.norm_pre = keys.has("norm_pre.weight");
  arch.head_bias = arch.num_classes == 0 || keys.has("head.bias");
  if (!activation.empty())
    for (auto& block : arch.blocks)
      if (block.gate == MlpGate::None) block.activation = parse_mlp_activation(activation);
  if (activation.empty() && arch.norm_pre && facts.layout == CheckpointLayout::Timm && !eva_class &&
      !config.given("architecture"))
    note(
        "norm_pre present (a CLIP-style tower): the MLP runs exact GELU; for OpenAI CLIP weights, which use "
        "QuickGELU and LayerNorm eps 1e-5, pass --arch act=quick_gelu,eps=1e-5");
  if (layer_norm_eps > 0) arch.layer_norm_eps = layer_norm_eps;
  if (report)
    for (const ArchAssumption& assumed : facts.assumed)
      if (!config.given(assumed.key.c_str())) report->assumed.push_back(assumed);
  read_pool(keys, config, facts, eva_class, arch, report);
  if (arch.pool == GlobalPool::Average && arch.class_token && !config.given("global_pool"))
    note(
        "features: the mean of the patch tokens (timm's Eva default global_pool avg; --arch global_pool=token "
        "reads the class token, as DINOv3's own code does)");
  if (config.given("architecture") && config.get("architecture").is_string())
    note("settings of timm's registered " + excerpt(config.get("architecture").get<std::string>()) + ": eps " +
         format_double(arch.layer_norm_eps) + ", activation " + to_string(arch.blocks.front().activation) +
         ", rotary " + arch.rope.describe() + ", global_pool " + to_string(arch.pool));
  check_arch_limits(vit_arch_estimate(arch));
  return arch;
}

// Every ViT, EVA and DeiT name timm registers, with its constructor's arguments: generated from
// timm's sources by scripts/timm_registry.py.
const std::vector<ReleasedArch>& vit_released() {
  static const std::vector<ReleasedArch> table = {
#include "models/timm_registered.inc"
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
       {"act", "act_layer", "MLP activation: gelu, quick_gelu, gelu_tanh or silu (ViT)", ArchKey::Text},
       {"global_pool", "global_pool", "features read by the head: token, avg or map (ViT)", ArchKey::Text},
       {"timm_class", "", "timm's class for the name: VisionTransformer, Eva, Beit or Cait (ViT)", ArchKey::Text},
       {"use_rot_pos_emb", "use_rot_pos_emb", "rotary positions on queries and keys (ViT)", ArchKey::Flag},
       {"rope_type", "rope_type", "rotary kind: cat (EVA-02, PE) or dinov3 (ViT)", ArchKey::Text},
       {"rope_temperature", "rope_temperature", "rotary frequency base (ViT)", ArchKey::Number},
       {"rope_grid_offset", "rope_grid_offset", "rotary coordinate offset (ViT)", ArchKey::Number},
       {"rope_grid_indexing", "rope_grid_indexing", "rotary axis order: ij or xy (ViT)", ArchKey::Text},
       {"ref_feat_shape", "ref_feat_shape", "rotary pretraining grid the coordinates scale to (ViT)", ArchKey::Count},
       {"rope_rotate_half", "rope_rotate_half", "rotate the halves of a head, not pairs (ViT)", ArchKey::Flag},
       {"attn_pool_num_heads", "attn_pool_num_heads", "heads of the attention-pool head (ViT)", ArchKey::Count},
       {"pool_include_prefix", "pool_include_prefix", "the attention pool reads the prefix tokens too (ViT)",
        ArchKey::Flag}},
      {}};
  return family;
}

}  // namespace attnscope
