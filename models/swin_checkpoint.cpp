// Swin and FLatten-Swin checkpoints: Microsoft's and FLatten's layout renamed to timm's (as timm's
// checkpoint_filter_fn does), and the architecture read from key names and shapes.
#include "models/swin_checkpoint.h"
#include "models/checkpoint_keys.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

namespace attnscope {

namespace {

std::string swin_block_prefix(int stage, int block) {
  return "layers." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

int swin_square_side(int64_t count, const std::string& what) {
  const auto side = int64_t(std::llround(std::sqrt(double(count))));
  if (side <= 0 || side * side != count)
    throw CheckpointError(what + " has " + std::to_string(count) + " entries, not a square number");
  return int(side);
}

// An int or a per-stage list from the arch metadata; 0 when absent.
int per_stage(const nlohmann::json& value, size_t stage) {
  if (value.is_number_integer()) return value.get<int>();
  if (value.is_array() && stage < value.size() && value[stage].is_number_integer()) return value[stage].get<int>();
  return 0;
}

}  // namespace

bool looks_like_swin(const Checkpoint& checkpoint) {
  return has_tensor(checkpoint, "patch_embed.proj.weight") && has_tensor(checkpoint, "layers.0.blocks.0.norm1.weight");
}

std::string adopt_swin_layout(Checkpoint& checkpoint) {
  // Microsoft's (and FLatten's) files merge at the end of stages 0..n-2, name the head `head`, and
  // store the relative position index and shift masks that timm rebuilds.
  bool microsoft =
      has_tensor(checkpoint, "layers.0.downsample.reduction.weight") || has_tensor(checkpoint, "head.weight");
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors) {
    if (key.find("relative_position_index") != std::string::npos || key.find("attn_mask") != std::string::npos) {
      microsoft = true;
      continue;
    }
    renamed[key] = tensor;
  }
  if (!microsoft) return "timm";
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
    converted[name] = tensor;
  }
  checkpoint.tensors = std::move(converted);
  return "microsoft";
}

SwinArch infer_swin_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, const std::string& layout,
                         std::vector<std::string>& notes) {
  SwinArch arch;
  arch.source_layout = layout;
  const auto& patch = required_tensor(checkpoint, "patch_embed.proj.weight", 4);
  arch.embed_dim = int(patch.size(0));
  arch.in_chans = int(patch.size(1));
  arch.patch_size = int(patch.size(2));
  if (patch.size(2) != patch.size(3) || arch.patch_size <= 0)
    throw CheckpointError("patch_embed.proj.weight has a non-square kernel");
  arch.patch_norm = has_tensor(checkpoint, "patch_embed.norm.weight");
  if (has_tensor(checkpoint, "head.fc.weight"))
    arch.num_classes = int(required_tensor(checkpoint, "head.fc.weight", 2).size(0));

  int in_dim = arch.embed_dim;
  bool focused_anywhere = false;
  for (int stage = 0; has_tensor(checkpoint, swin_block_prefix(stage, 0) + "norm1.weight"); ++stage) {
    SwinStageArch stage_arch;
    stage_arch.dim = int(required_tensor(checkpoint, swin_block_prefix(stage, 0) + "norm1.weight", 1).size(0));
    const std::string merge = "layers." + std::to_string(stage) + ".downsample.reduction.weight";
    stage_arch.downsample = has_tensor(checkpoint, merge);
    if (stage_arch.downsample && required_tensor(checkpoint, merge, 2).size(1) != 4 * in_dim)
      throw CheckpointError("tensor '" + merge + "' does not merge 2x2 cells of width " + std::to_string(in_dim));
    if (!stage_arch.downsample && stage_arch.dim != in_dim)
      throw CheckpointError("stage " + std::to_string(stage) + " has width " + std::to_string(stage_arch.dim) +
                            " after width " + std::to_string(in_dim) + " without a patch merging (missing '" + merge +
                            "')");
    for (int block = 0; has_tensor(checkpoint, swin_block_prefix(stage, block) + "norm1.weight"); ++block) {
      const std::string prefix = swin_block_prefix(stage, block), attn = prefix + "attn.";
      SwinBlockArch b;
      b.qkv_bias = has_tensor(checkpoint, attn + "qkv.bias");
      b.mlp_hidden = int(required_tensor(checkpoint, prefix + "mlp.fc1.weight", 2).size(0));
      if (has_tensor(checkpoint, attn + "relative_position_bias_table")) {
        const auto& table = required_tensor(checkpoint, attn + "relative_position_bias_table", 2);
        b.heads = int(table.size(1));
        const int side = swin_square_side(table.size(0), attn + "relative_position_bias_table");
        if (side % 2 == 0) throw CheckpointError(attn + "relative_position_bias_table is not (2w-1)^2 entries");
        b.table_window = (side + 1) / 2;
        b.window = b.table_window;
      } else if (has_tensor(checkpoint, attn + "dwc.weight")) {
        focused_anywhere = true;
        b.native = NativeAttention::Focused;
        const auto& dwc = required_tensor(checkpoint, attn + "dwc.weight", 4);
        b.dwc_kernel = int(dwc.size(2));
        if (dwc.size(1) != 1 || dwc.size(2) != dwc.size(3) || b.dwc_kernel % 2 == 0 || dwc.size(0) <= 0 ||
            stage_arch.dim % dwc.size(0) != 0)
          throw CheckpointError("tensor '" + attn +
                                "dwc.weight' has an unexpected shape: FLatten's DWC is [d, 1, k, k] "
                                "with an odd k and d dividing the width " +
                                std::to_string(stage_arch.dim));
        b.heads = int(stage_arch.dim / dwc.size(0));
        b.encoding_side = swin_square_side(required_tensor(checkpoint, attn + "positional_encoding", 3).size(1),
                                           attn + "positional_encoding");
        b.window = b.encoding_side;
      } else {
        throw CheckpointError("block '" + prefix +
                              "' has neither attn.relative_position_bias_table (Swin) nor attn.dwc "
                              "(FLatten's focused attention)");
      }
      if (b.heads <= 0 || stage_arch.dim % b.heads != 0)
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
    for (const auto& block : stage.blocks)
      (block.native == NativeAttention::Focused ? focused_window : softmax_window) =
          std::max(block.native == NativeAttention::Focused ? focused_window : softmax_window, block.window);
  if (focused_anywhere) {
    arch.attn_type.clear();
    for (const auto& stage : arch.stages)
      arch.attn_type += stage.blocks.front().native == NativeAttention::Focused ? "L" : "S";
  }
  const bool flatten = focused_anywhere;
  for (size_t s = 0; s < arch.stages.size(); ++s)
    for (auto& block : arch.stages[s].blocks) {
      const bool focused = block.native == NativeAttention::Focused;
      int window = focused ? focused_window : softmax_window;
      if (meta.is_object()) {
        const int given = per_stage(meta.value(flatten && !focused ? "window_s" : "window", nlohmann::json()), s);
        if (given > 0) window = given;
      }
      block.window = window;
    }
  if (meta.is_object() && meta.contains("window")) notes.push_back("windows from the file's attnscope_arch metadata");

  // The training input: from the metadata, else the window rule of the released models (the last
  // stage's grid is the S window: 7 -> 224, 12 -> 384).
  int native = 0;
  if (meta.is_object()) native = per_stage(meta.value("img_size", nlohmann::json()), 0);
  if (native <= 0) {
    const int last_window = arch.stages.back().blocks.front().native == NativeAttention::Focused
                                ? arch.stages.back().blocks.front().encoding_side
                                : arch.stages.back().blocks.front().table_window;
    native = last_window * arch.patch_size * (1 << (arch.stages.size() - 1));
    notes.push_back("native input " + std::to_string(native) + " from the last stage's window (no img_size metadata)");
  }
  arch.native_height = arch.native_width = native;
  return arch;
}

}  // namespace attnscope
