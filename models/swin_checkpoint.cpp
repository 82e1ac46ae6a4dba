// Swin and FLatten-Swin checkpoints: Microsoft's and FLatten's layout renamed to timm's (as timm's
// checkpoint_filter_fn does), the architecture read from key names and shapes, and the family's
// registry entry.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/checkpoint_keys.h"
#include "models/model_families.h"
#include "models/swin.h"

namespace attnscope {

namespace {

std::string swin_block_prefix(int stage, int block) {
  return "layers." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

int swin_square_side(const ShapeReader& shapes, const std::string& key, int64_t count) {
  const auto side = int64_t(std::llround(std::sqrt(double(count))));
  if (side <= 0 || side * side != count)
    throw shapes.error(key, "has " + std::to_string(count) + " entries, not a square number");
  return int(side);
}

bool looks_like_swin(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("patch_embed.proj.weight") &&
         checkpoint.tensors.count("layers.0.blocks.0.norm1.weight");
}

// Renames Microsoft's layout (merging at the end of stages, `head`, stored relative_position_index
// and attn_mask) to timm's in place, as timm's checkpoint_filter_fn does, telling `shapes` the
// file's names; returns "microsoft" or "timm".
CheckpointLayout adopt_swin_layout(FamilyInput& input, ShapeReader& shapes) {
  Checkpoint& checkpoint = input.checkpoint;
  // Microsoft's (and FLatten's) files merge at the end of stages 0..n-2, name the head `head`, and
  // store the relative position index and shift masks that timm rebuilds.
  bool microsoft =
      checkpoint.tensors.count("layers.0.downsample.reduction.weight") || checkpoint.tensors.count("head.weight");
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors) {
    if (key.find("relative_position_index") != std::string::npos || key.find("attn_mask") != std::string::npos ||
        key.find("relative_coords_table") != std::string::npos) {
      microsoft = true;
      continue;
    }
    renamed[key] = tensor;
  }
  if (!microsoft) return CheckpointLayout::Timm;
  std::map<std::string, torch::Tensor> converted;
  for (auto& [key, tensor] : renamed) {
    std::string name = key;
    if (name.rfind("layers.", 0) == 0) {
      const size_t dot = name.find('.', 7);
      const std::string stage = name.substr(7, dot - 7);
      if (dot != std::string::npos && name.compare(dot, 12, ".downsample.") == 0 &&
          stage.find_first_not_of("0123456789") == std::string::npos && !stage.empty() && stage.size() < 4)
        name = "layers." + std::to_string(std::stoi(stage) + 1) + name.substr(dot);
    } else if (name.rfind("head.", 0) == 0) {
      name = "head.fc." + name.substr(5);
    }
    if (name != key) shapes.renamed(name, key);
    converted[name] = tensor;
  }
  checkpoint.tensors = std::move(converted);
  input.notes.push_back("Microsoft/FLatten Swin layout, renamed to timm's keys");
  return CheckpointLayout::Microsoft;
}

// A given attn_type (config, yaml, --arch) must say what the keys show, stage by stage: the
// successor's letter where a stage's blocks are all its kind, the softmax letter where none is, M
// where they mix (the authors' "IIMS2"); its trailing count is the authors' and not checked.
void check_given_attn_type(const nlohmann::json& meta, const SwinArch& arch, NativeAttention successor) {
  if (!meta.is_object() || !meta.contains("attn_type") || !meta["attn_type"].is_string()) return;
  const std::string given = meta["attn_type"].get<std::string>();
  const std::string letters_given = given.substr(0, given.find_last_not_of("0123456789") + 1);
  const char* letters = attn_type_letters(successor == NativeAttention::Softmax ? NativeAttention::Focused : successor);
  std::string shown;
  for (const auto& stage : arch.stages) {
    size_t successors = 0;
    for (const auto& block : stage.blocks) successors += block.native != NativeAttention::Softmax;
    shown += successors == 0 ? letters[1] : successors == stage.blocks.size() ? letters[0] : 'M';
  }
  if (letters_given != shown)
    throw CheckpointError("attn_type '" + excerpt(given, 40) + "' does not say what the weights' blocks are: " + shown +
                          " (" + std::to_string(arch.stages.size()) + " stages; " + letters[0] + " " +
                          to_string(successor == NativeAttention::Softmax ? NativeAttention::Focused : successor) +
                          ", " + letters[1] + " softmax, M mixed): give " + shown + " or leave attn_type out");
}

// The architecture from timm-layout keys; `meta` (gather_arch_config's values) gives what the keys
// cannot tell (the configured window, the training input size); heads it gives must agree with the
// tables'. Throws CheckpointError naming the key that is missing, misshapen or beyond the bounds.
SwinArch infer_swin_arch(ShapeReader& shapes, const nlohmann::json& meta, CheckpointLayout layout,
                         std::vector<ArchAssumption>& assumed) {
  SwinArch arch;
  arch.source_layout = layout;
  const std::string patch = "patch_embed.proj.weight";
  arch.embed_dim = shapes.size(patch, 4, 0, "width", kWidthRange);
  arch.in_chans = shapes.size(patch, 4, 1, "input channel count", kRgbRange);
  arch.patch_size = shapes.size(patch, 4, 2, "patch size", kPatchRange);
  if (shapes.tensor(patch, 4).size(3) != arch.patch_size) throw shapes.error(patch, "has a non-square kernel");
  arch.patch_norm = shapes.has("patch_embed.norm.weight");
  if (shapes.has("head.fc.weight")) arch.num_classes = shapes.size("head.fc.weight", 2, 0, "class count", kClassRange);

  int in_dim = arch.embed_dim, depth = 0;
  for (int stage = 0; shapes.has(swin_block_prefix(stage, 0) + "norm1.weight"); ++stage) {
    shapes.bounded("stage count", "layers.S", stage + 1, kStageRange);
    SwinStageArch stage_arch;
    stage_arch.dim = shapes.size(swin_block_prefix(stage, 0) + "norm1.weight", 1, 0, "width", kWidthRange);
    const std::string merge = "layers." + std::to_string(stage) + ".downsample.reduction.weight";
    stage_arch.downsample = shapes.has(merge);
    // Swin V2 reduces, then normalises the reduced width; V1 normalises the 4 cells first.
    const std::string merge_norm = "layers." + std::to_string(stage) + ".downsample.norm.weight";
    stage_arch.merge_norm_after = stage_arch.downsample && shapes.has(merge_norm) &&
                                  shapes.tensor(merge_norm, 1).size(0) == stage_arch.dim &&
                                  stage_arch.dim != 4 * in_dim;
    if (stage_arch.downsample && shapes.tensor(merge, 2).size(1) != 4 * in_dim)
      throw shapes.error(merge, "does not merge 2x2 cells of width " + std::to_string(in_dim));
    if (!stage_arch.downsample && stage_arch.dim != in_dim)
      throw CheckpointError("stage " + std::to_string(stage) + " has width " + std::to_string(stage_arch.dim) +
                            " after width " + std::to_string(in_dim) + " without a patch merging (missing '" +
                            shapes.file_key(merge) + "')");
    for (int block = 0; shapes.has(swin_block_prefix(stage, block) + "norm1.weight"); ++block) {
      shapes.bounded("depth", "layers.S.blocks.B", ++depth, kDepthRange);
      const std::string prefix = swin_block_prefix(stage, block), attn = prefix + "attn.";
      SwinBlockArch b;
      b.qkv_bias = shapes.has(attn + "qkv.bias");
      b.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      if (shapes.has(attn + "logit_scale")) {
        // Swin V2: the window is not in the keys (the bias comes from an MLP over coordinates).
        b.v2 = true;
        b.heads = shapes.size(attn + "logit_scale", 3, 0, "head count", kHeadRange);
        b.qkv_bias = shapes.has(attn + "q_bias");
        b.window = b.table_window = 0;
      } else if (shapes.has(attn + "relative_position_bias_table")) {
        const std::string table = attn + "relative_position_bias_table";
        b.heads = shapes.size(table, 2, 1, "head count", kHeadRange);
        const int side =
            swin_square_side(shapes, table, shapes.size(table, 2, 0, "relative position table length", kTableRange));
        if (side % 2 == 0) throw shapes.error(table, "is not (2w-1)^2 entries");
        b.table_window = (side + 1) / 2;
        b.window = b.table_window;
      } else if (shapes.has(attn + "qkvg.weight")) {
        // PolaFormer's L blocks (pola_swin.py): FLatten's DWC, scale and encoding, a learned power
        // per head and channel, and q, k, v and a gate from one linear.
        const FocusedShapes focused = read_focused_attention(shapes, attn, stage_arch.dim);
        b.native = NativeAttention::Pola;
        b.qkv_bias = shapes.has(attn + "qkvg.bias");
        b.dwc_kernel = focused.dwc_kernel;
        b.heads = focused.heads;
        b.encoding_side = swin_square_side(shapes, attn + "positional_encoding", focused.encoding_tokens);
        b.window = b.encoding_side;
        const auto& power = shapes.tensor(attn + "power", 4);
        if (power.sizes() != c10::IntArrayRef({1, b.heads, 1, stage_arch.dim / b.heads}))
          throw shapes.error(attn + "power", "is not [1, heads, 1, head width] for the " + std::to_string(b.heads) +
                                                 " heads its dwc gives");
        if (shapes.tensor(attn + "qkvg.weight", 2).sizes() != c10::IntArrayRef({4 * stage_arch.dim, stage_arch.dim}))
          throw shapes.error(attn + "qkvg.weight",
                             "is not [4C, C] (q, k, v and the gate) for the width " + std::to_string(stage_arch.dim));
        shapes.tensor(attn + "scale", 3);
      } else if (shapes.has(attn + "an_bias")) {
        // Agent-Swin's A blocks: the bias grid is the stage's at training (the authors' window 56
        // clamped to it), their attention global over it.
        const AgentShapes agent = read_agent_attention(shapes, attn, stage_arch.dim);
        b.native = NativeAttention::Agent;
        b.heads = agent.heads;
        b.agents = agent.agents;
        b.agent_side = b.window = agent.side;
      } else if (shapes.has(attn + "residual.0.weight")) {
        b.native = NativeAttention::InLine;  // InLine-Swin's I blocks: global over the stage
        b.heads = read_inline_residual(shapes, attn, stage_arch.dim);
        b.window = 0;  // the stage's grid, set below
      } else if (shapes.has(attn + "dwc.weight")) {
        b.native = NativeAttention::Focused;
        const FocusedShapes focused = read_focused_attention(shapes, attn, stage_arch.dim);
        b.dwc_kernel = focused.dwc_kernel;
        b.heads = focused.heads;
        b.encoding_side = swin_square_side(shapes, attn + "positional_encoding", focused.encoding_tokens);
        b.window = b.encoding_side;
      } else {
        throw CheckpointError("block '" + prefix +
                              "' has none of attn.relative_position_bias_table (Swin), attn.dwc (FLatten's focused "
                              "attention), attn.an_bias (Agent-Swin) or attn.residual (InLine-Swin)");
      }
      if (stage_arch.dim % b.heads != 0)
        throw CheckpointError(std::to_string(b.heads) + " heads do not divide the width " +
                              std::to_string(stage_arch.dim) + " of '" + prefix + "'");
      stage_arch.blocks.push_back(b);
    }
    in_dim = stage_arch.dim;
    arch.stages.push_back(stage_arch);
  }
  if (arch.stages.empty()) throw CheckpointError("no Swin stage found (missing 'layers.0.blocks.0.norm1.weight')");
  if (arch.stages.front().downsample)
    throw CheckpointError("stage 0 has a patch merging: not Swin's layout (timm merges at the start of stages 1..n)");

  // The windows blocks ask for: the tables and encodings were stored for windows clamped to the
  // training grid, so the largest over the stages is the configured one; the metadata says best.
  int softmax_window = 0, focused_window = 0;
  for (const auto& stage : arch.stages)
    for (const auto& block : stage.blocks) {
      if (block.encoded()) focused_window = std::max(focused_window, block.window);
      if (block.native == NativeAttention::Softmax) softmax_window = std::max(softmax_window, block.window);
    }
  // The authors' per-stage letters: FLatten's L/S, Agent's A/B, InLine's I/S (the stage's first block).
  NativeAttention successor = NativeAttention::Softmax;
  for (const auto& stage : arch.stages)
    for (const auto& block : stage.blocks)
      if (block.native != NativeAttention::Softmax) {
        if (successor != NativeAttention::Softmax && successor != block.native)
          throw CheckpointError("a Swin checkpoint mixing " + to_string(successor) + " and " + to_string(block.native) +
                                " blocks: no released model does, and the letters of its attn_type cannot say it");
        successor = block.native;
      }
  if (successor != NativeAttention::Softmax) {
    const char* letters = attn_type_letters(successor);
    for (const auto& stage : arch.stages)
      arch.attn_type += stage.blocks.front().native == successor ? letters[0] : letters[1];
  }
  check_given_attn_type(meta, arch, successor);
  std::vector<int> weights_agents;
  for (const auto& stage : arch.stages) {
    int agents = 0;
    for (const auto& block : stage.blocks) agents = std::max(agents, block.agents);
    weights_agents.push_back(agents);
  }
  check_config_agent_counts(meta, weights_agents,
                            [&](size_t s) { return shapes.file_key(swin_block_prefix(int(s), 0) + "attn.an_bias"); });
  const std::vector<int> heads = stage_counts(meta, "heads", arch.stages.size());
  for (size_t s = 0; s < heads.size(); ++s)
    if (heads[s] != arch.stages[s].blocks.front().heads)
      throw CheckpointError("the config gives stage " + std::to_string(s) + " " + std::to_string(heads[s]) +
                            " heads, the weights of '" + swin_block_prefix(int(s), 0) + "attn' have " +
                            std::to_string(arch.stages[s].blocks.front().heads) + ": the config is not this model's");
  // FLatten's, Agent's and InLine's softmax blocks take window_s (the authors': max(7, window // 8)).
  const bool flatten = successor != NativeAttention::Softmax;
  const bool v2 = arch.stages.front().blocks.front().v2;
  if (v2) {
    // No key shows V2's window; the name or the config does (swinv2_*_window8_256, window16 ...).
    std::vector<int> given = stage_counts(meta, "window", arch.stages.size());
    if (given.empty()) {
      given.assign(arch.stages.size(), 8);
      assumed.push_back({"window", 8, "Swin V2's keys do not show its window: the released window8 models'"});
    }
    const std::vector<int> pretrained = stage_counts(meta, "pretrained_window", arch.stages.size());
    for (size_t s = 0; s < arch.stages.size(); ++s)
      for (auto& block : arch.stages[s].blocks) {
        if (!block.v2) throw CheckpointError("a Swin checkpoint mixing V2 blocks (attn.logit_scale) with V1 blocks");
        block.window = block.table_window = shapes.bounded("window", "arch window", given[s], kGridRange);
        block.pretrained_window = pretrained.empty() ? 0 : pretrained[s];
      }
    softmax_window = *std::max_element(given.begin(), given.end());
  }
  const std::vector<int> windows = stage_counts(meta, "window", arch.stages.size());
  const std::vector<int> softmax_windows = stage_counts(meta, flatten ? "window_s" : "window", arch.stages.size());
  for (size_t s = 0; s < arch.stages.size() && !v2; ++s)
    for (auto& block : arch.stages[s].blocks) {
      if (block.whole_stage()) continue;  // their window is the stage's grid
      const bool focused = block.encoded();
      const std::vector<int>& given = focused ? windows : softmax_windows;
      block.window = given.empty() ? (focused ? focused_window : softmax_window)
                                   : shapes.bounded("window", focused || !flatten ? "arch window" : "arch window_s",
                                                    given[s], kGridRange);
    }

  // The training input: from the metadata, else the window rule of the released models (the last
  // stage's grid is the S window: 7 -> 224, 12 -> 384).
  int native = 0;
  if (meta.contains("img_size")) native = meta["img_size"].get<int>();
  if (native > 0) {
    shapes.bounded("native input size", "arch metadata img_size", native, kInputRange);
  } else {
    // An agent block's bias grid is its stage's grid; InLine's blocks show none.
    int last_window = 0;
    for (const auto& block : arch.stages.back().blocks)
      if (last_window == 0)
        last_window = block.encoded()                          ? block.encoding_side
                      : block.native == NativeAttention::Agent ? block.agent_side
                                                               : block.table_window;
    if (last_window == 0)
      throw CheckpointError(
          "no key shows the training input of this InLine-Swin (its last stage has only InLine "
          "blocks): give it with --arch img_size=N or a config.json");
    native = shapes.bounded("native input size", "the last stage's window",
                            int64_t(last_window) * arch.patch_size << (arch.stages.size() - 1), kInputRange);
    assumed.push_back({"img_size", native, "the released rule: the last stage's grid is its window"});
  }
  arch.native_height = arch.native_width = native;
  // Agent and InLine blocks attend over their stage: at the native input, its grid (timm's floor).
  for (size_t s = 0; s < arch.stages.size(); ++s)
    for (auto& block : arch.stages[s].blocks)
      if (block.whole_stage() && block.window == 0) block.window = std::max(1, (native / arch.patch_size) >> s);
  return arch;
}

// Parameters and one forward pass at the native input, counted from the architecture.
StagedMemory swin_memory(const SwinArch& arch) {
  const double width = arch.stages.back().dim, classes = arch.num_classes;
  const double stem_and_head = double(arch.embed_dim) * (arch.in_chans * arch.patch_size * arch.patch_size + 3) +
                               (classes + 2) * width + classes;
  return StagedMemory::halving(
      arch.stages, double(arch.native_height) / arch.patch_size, 4, stem_and_head,
      [](const SwinStageArch& stage, const SwinBlockArch& block) {
        const double dim = stage.dim;
        const double table = 2.0 * block.table_window - 1, encoding = double(block.encoding_side) * block.encoding_side;
        const double heads = block.heads, agents = block.agents, side = block.agent_side;
        double attention = table * table * heads;
        if (block.native == NativeAttention::Focused)
          attention = (encoding + 1 + double(block.dwc_kernel) * block.dwc_kernel) * dim;
        else if (block.native == NativeAttention::Pola)  // and the gate's quarter of qkvg, the power
          attention = (encoding + 2 + double(block.dwc_kernel) * block.dwc_kernel) * dim + dim * (dim + 1.0);
        else if (block.native == NativeAttention::Agent)
          attention = 10 * dim + heads * agents * (2 * 49 + 4 * side);
        else if (block.native == NativeAttention::InLine)
          attention = 10 * dim * dim / heads + 10 * dim;
        return StagedMemory::Block{4 * dim * dim + 2 * dim * block.mlp_hidden + 10 * dim + attention,
                                   double(block.heads), double(block.mlp_hidden)};
      });
}

InferredBackbone infer_swin(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "Swin");
  const CheckpointLayout layout = adopt_swin_layout(input, shapes);
  read_trained_focusing_factor(input.meta, input.notes);
  return inferred_backbone<SwinTransformerImpl>(shapes, infer_swin_arch(shapes, input.meta, layout, input.assumed),
                                                swin_memory);
}

}  // namespace

// timm's swin_* (timm/models/swin_transformer.py; img_size from the default pretrained tag) and FLatten's
// flatten_swin (models/build.py with config.py's defaults, which a cfgs/*.yaml overrides).
const std::vector<ReleasedArch>& swin_released() {
  static const std::vector<ReleasedArch> table = {
      {"swin_tiny_patch4_window7_224",
       R"({"patch_size":4,"window_size":7,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"img_size":224})"},
      {"swin_small_patch4_window7_224",
       R"({"patch_size":4,"window_size":7,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"img_size":224})"},
      {"swin_base_patch4_window7_224",
       R"({"patch_size":4,"window_size":7,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"img_size":224})"},
      {"swin_base_patch4_window12_384",
       R"({"patch_size":4,"window_size":12,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"img_size":384})"},
      {"swin_large_patch4_window7_224",
       R"({"patch_size":4,"window_size":7,"embed_dim":192,"depths":[2,2,18,2],"num_heads":[6,12,24,48],"img_size":224})"},
      {"swin_large_patch4_window12_384",
       R"({"patch_size":4,"window_size":12,"embed_dim":192,"depths":[2,2,18,2],"num_heads":[6,12,24,48],"img_size":384})"},
      {"swin_s3_tiny_224",
       R"({"patch_size":4,"window_size":[7,7,14,7],"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"img_size":224})"},
      {"swin_s3_small_224",
       R"({"patch_size":4,"window_size":[14,14,14,7],"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"img_size":224})"},
      {"swin_s3_base_224",
       R"({"patch_size":4,"window_size":[7,7,14,7],"embed_dim":96,"depths":[2,2,30,2],"num_heads":[3,6,12,24],"img_size":224})"},
      // timm's Swin V2 (timm/models/swin_transformer_v2.py), listed by scripts/timm_registry.py's reader.
      {"swinv2_tiny_window16_256",
       R"({"patch_size":4,"window_size":16,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"img_size":256})"},
      {"swinv2_tiny_window8_256",
       R"({"patch_size":4,"window_size":8,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"img_size":256})"},
      {"swinv2_small_window16_256",
       R"({"patch_size":4,"window_size":16,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"img_size":256})"},
      {"swinv2_small_window8_256",
       R"({"patch_size":4,"window_size":8,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"img_size":256})"},
      {"swinv2_base_window16_256",
       R"({"patch_size":4,"window_size":16,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"img_size":256})"},
      {"swinv2_base_window8_256",
       R"({"patch_size":4,"window_size":8,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"img_size":256})"},
      {"swinv2_base_window12_192",
       R"({"patch_size":4,"window_size":12,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"img_size":192})"},
      {"swinv2_base_window12to16_192to256",
       R"({"patch_size":4,"window_size":16,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"pretrained_window_sizes":[12,12,12,6],"img_size":256})"},
      {"swinv2_base_window12to24_192to384",
       R"({"patch_size":4,"window_size":24,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"pretrained_window_sizes":[12,12,12,6],"img_size":384})"},
      {"swinv2_large_window12_192",
       R"({"patch_size":4,"window_size":12,"embed_dim":192,"depths":[2,2,18,2],"num_heads":[6,12,24,48],"img_size":192})"},
      {"swinv2_large_window12to16_192to256",
       R"({"patch_size":4,"window_size":16,"embed_dim":192,"depths":[2,2,18,2],"num_heads":[6,12,24,48],"pretrained_window_sizes":[12,12,12,6],"img_size":256})"},
      {"swinv2_large_window12to24_192to384",
       R"({"patch_size":4,"window_size":24,"embed_dim":192,"depths":[2,2,18,2],"num_heads":[6,12,24,48],"pretrained_window_sizes":[12,12,12,6],"img_size":384})"},
      {"flatten_swin",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"window_size":7,"img_size":224,"focusing_factor":3,"attn_type":"LLLL"})"},
      // The FLatten authors' successors (Agent-Attention agent_transformer/cfgs/agent_swin_*.yaml, InLine
      // cfgs/inline_swin_*.yaml): MODEL.NAME with its SWIN and AGENT / INLINE values.
      {"agent_swin_tiny",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"AAAB","agent_num":"9-16-49-49"})"},
      {"agent_swin_small",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"AABB","agent_num":"9-16-49-49"})"},
      {"agent_swin_small_288",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"window_size":72,"img_size":288,"attn_type":"AABB","agent_num":"9-16-49-49"})"},
      {"agent_swin_base",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":56,"img_size":224,"attn_type":"AAMB2","agent_num":"9-16-49-49"})"},
      {"agent_swin_base_384",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":96,"img_size":384,"attn_type":"AAMB2","agent_num":"9-16-49-49"})"},
      {"inline_swin_tiny",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"IIIS"})"},
      {"inline_swin_small",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"IISS"})"},
      {"inline_swin_base",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":56,"img_size":224,"attn_type":"IIMS2"})"},
      {"inline_swin_base_384",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":96,"img_size":384,"attn_type":"IIMS2"})"},
      // PolaFormer (ZacharyMeng/PolaFormer cfgs/pola_swin_*.yaml; alpha 4 and DWC kernel 5 in all of them).
      {"pola_swin_tiny_patch4_224",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,6,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"LLSS"})"},
      {"pola_swin_small_patch4_224",
       R"({"patch_size":4,"embed_dim":96,"depths":[2,2,18,2],"num_heads":[3,6,12,24],"window_size":56,"img_size":224,"attn_type":"LLSS"})"},
      {"pola_swin_base_patch4_224",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":56,"img_size":224,"attn_type":"LLSS"})"},
      {"pola_swin_base_patch4_384_finetune",
       R"({"patch_size":4,"embed_dim":128,"depths":[2,2,18,2],"num_heads":[4,8,16,32],"window_size":96,"img_size":384,"attn_type":"LLSS"})"},
  };
  return table;
}

const BackboneFamily& swin_family() {
  static const BackboneFamily family{
      "swin",
      "Swin, Swin V2, FLatten-Swin, Agent-Swin, InLine-Swin, PolaFormer-Swin",
      looks_like_swin,
      infer_swin,
      {},
      swin_released(),
      {{"window", "window_size", "window side (Swin, FLatten-Swin's focused blocks, L2ViT's local blocks)",
        ArchKey::Counts},
       {"window_s", "", "FLatten-Swin's window of its softmax blocks", ArchKey::Counts},
       {"attn_type", "attn_type",
        "the block kinds per stage: FLatten's (L focused, S softmax), Agent's (A agent, B softmax), InLine's (I, S)",
        ArchKey::Text},
       {"agents", "agent_num", "Agent-Swin's agent count per stage (its biases' count must agree)", ArchKey::Counts},
       {"focusing_factor", "focusing_factor", "FLatten's p of f_p it was trained with", ArchKey::Number},
       {"pretrained_window", "pretrained_window_sizes",
        "Swin V2: the window its coordinates were normalised by in pretraining, per stage (0: its own)",
        ArchKey::Counts}},
      {{{"MODEL", "SWIN", "NUM_HEADS"}, "num_heads"},
       {{"MODEL", "SWIN", "WINDOW_SIZE"}, "window_size"},
       {{"MODEL", "LA", "ATTN_TYPE"}, "attn_type"},
       {{"MODEL", "LA", "FOCUSING_FACTOR"}, "focusing_factor"},
       {{"MODEL", "AGENT", "ATTN_TYPE"}, "attn_type"},
       {{"MODEL", "AGENT", "NUM"}, "agent_num"},
       {{"MODEL", "INLINE", "ATTN_TYPE"}, "attn_type"}}};
  return family;
}

}  // namespace attnscope
