// CARE checkpoints (the authors' keys: stem.*, stages.S.downsample.*, stages.S.blocks.B.*, head.*,
// dist_head.*): the architecture from the keys, plus the attention head width per stage from the
// file's arch metadata (the keys cannot show it), and the family's registry entry.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/care.h"
#include "models/checkpoint_keys.h"
#include "models/model_families.h"

namespace attnscope {

namespace {

std::string care_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

// The authors' CARENets default att_head_dim=(1, 1, 16, 32) (stages 0 and 1 have no attention).
const int kReleasedHeadDims[] = {1, 1, 16, 32};

bool looks_like_care(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("dist_head.fc.weight") && checkpoint.tensors.count("stem.0.weight") &&
         checkpoint.tensors.count("stages.0.blocks.0.inter_layer.inter1_norm.weight");
}

// `meta`: the attnscope_arch metadata or .arch.json sidecar (null when absent): att_head_dim [per
// stage] (default: the authors' 1, 1, 16, 32), img_size (informative). Throws CheckpointError
// naming the key that is missing, does not fit or is beyond the bounds.
CareArch infer_care_arch(ShapeReader& shapes, const nlohmann::json& meta, std::vector<ArchAssumption>& assumed) {
  if (meta.is_object() && meta.contains("family") && meta["family"] != "care")
    throw CheckpointError("the file's arch metadata says family " + meta["family"].dump() +
                          " but its keys are CARE's (stem.*, stages.S.blocks.B.inter_layer.*, dist_head.*)");
  CareArch arch;
  const auto& stem = shapes.tensor("stem.0.weight", 4);
  arch.in_chans = shapes.size("stem.0.weight", 4, 1, "input channel count", kRgbRange);
  if (stem.size(2) != 4 || stem.size(3) != 4)
    throw CheckpointError("stem.0.weight has a " + std::to_string(stem.size(2)) + "x" + std::to_string(stem.size(3)) +
                          " kernel; CARE's stem is a 4x4 stride-4 conv");
  int stages = 0;
  while (shapes.has(care_block_prefix(stages, 0) + "inter_layer.inter1_norm.weight"))
    shapes.bounded("stage count", "stages.S", ++stages, kStageRange);
  if (stages == 0)
    throw CheckpointError("no CARE stage found (missing 'stages.0.blocks.0.inter_layer.inter1_norm.weight')");
  const std::vector<int> head_dims = stage_counts(meta, "att_head_dim", size_t(stages));
  bool head_dims_from_defaults = false;
  int in_dim = shapes.size("stem.0.weight", 4, 0, "width", kWidthRange), depth = 0;
  for (int s = 0; s < stages; ++s) {
    CareStageArch stage;
    const std::string stage_name = "stages." + std::to_string(s);
    stage.dim = shapes.size(care_block_prefix(s, 0) + "inter_layer.inter2_norm.weight", 1, 0, "width", kWidthRange);
    stage.part_channels =
        shapes.size(care_block_prefix(s, 0) + "token_mixer.dwconv1.weight", 4, 0, "part width", kWidthRange);
    if (3 * stage.part_channels > stage.dim)
      throw CheckpointError("tensor '" + care_block_prefix(s, 0) + "token_mixer.dwconv1.weight' gives " +
                            std::to_string(stage.part_channels) + " part channels, more than a third of the width " +
                            std::to_string(stage.dim));
    stage.downsample = shapes.has(stage_name + ".downsample.1.weight");
    if (stage.downsample) {
      const auto& conv = shapes.tensor(stage_name + ".downsample.1.weight", 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim)
        throw CheckpointError("tensor '" + stage_name + ".downsample.1.weight' does not map width " +
                              std::to_string(in_dim) + " to " + std::to_string(stage.dim));
    } else if (s > 0) {
      throw CheckpointError("missing tensor '" + stage_name +
                            ".downsample.1.weight' (every stage after the first "
                            "starts with a BatchNorm and a 2x2 stride-2 conv)");
    } else if (in_dim != stage.dim) {
      throw CheckpointError("stem.0.weight gives width " + std::to_string(in_dim) + ", stage 0 has " +
                            std::to_string(stage.dim));
    }
    if (!head_dims.empty()) {
      stage.att_head_dim = shapes.bounded("head width", "arch att_head_dim", head_dims[size_t(s)], kHeadWidthRange);
    } else {
      stage.att_head_dim = stages == 4 ? kReleasedHeadDims[s] : 1;
      head_dims_from_defaults = true;
    }
    for (int b = 0; shapes.has(care_block_prefix(s, b) + "inter_layer.inter1_norm.weight"); ++b) {
      shapes.bounded("depth", "stages.S.blocks.B", ++depth, kDepthRange);
      const std::string prefix = care_block_prefix(s, b);
      CareBlockArch block;
      block.attention = shapes.has(prefix + "token_mixer.qk.weight");
      if (block.attention) {
        if (stage.part_channels % stage.att_head_dim != 0 && head_dims.empty())
          throw unfit_default_error("the weights do not show CARE's head widths, and the released att_head_dim " +
                                        std::to_string(stage.att_head_dim) + " of stage " + std::to_string(s) +
                                        " does not divide its " + std::to_string(stage.part_channels) +
                                        " attention channels",
                                    "att_head_dim");
        if (stage.part_channels % stage.att_head_dim != 0)
          throw CheckpointError("att_head_dim " + std::to_string(stage.att_head_dim) + " of stage " +
                                std::to_string(s) + " does not divide its " + std::to_string(stage.part_channels) +
                                " attention channels ('" + prefix + "token_mixer.qk.weight')");
        block.heads = stage.part_channels / stage.att_head_dim;
      }
      block.last = !shapes.has(prefix + "inter_layer.inter2_fc2.weight");
      block.layer_scale = shapes.has(prefix + "gamma");
      if (block.last && block.layer_scale)
        throw CheckpointError("missing tensor '" + prefix +
                              "inter_layer.inter2_fc2.weight' (the block has a gamma, "
                              "so it is not the last block)");
      block.inter1_hidden =
          shapes.size(prefix + "inter_layer.inter1_fc1.weight", 4, 0, "interaction hidden size", kHiddenRange);
      block.inter2_hidden =
          shapes.size(prefix + "inter_layer.inter2_fc1.weight", 4, 0, "interaction hidden size", kHiddenRange);
      stage.blocks.push_back(block);
    }
    for (size_t b = 0; b < stage.blocks.size(); ++b) {
      const bool network_last = s + 1 == stages && b + 1 == stage.blocks.size();
      if (stage.blocks[b].last && !network_last)
        throw CheckpointError("missing tensor '" + care_block_prefix(s, int(b)) +
                              "inter_layer.inter2_fc2.weight' (only the network's last block goes without it)");
      if (stage.blocks[b].attention != stage.blocks.front().attention)
        throw CheckpointError("stage " + std::to_string(s) + " mixes attention and strip-conv blocks ('" +
                              care_block_prefix(s, int(b)) + "token_mixer.qk.weight')");
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  const CareBlockArch& last = arch.stages.back().blocks.back();
  arch.cls_dim = last.last ? last.inter2_hidden : arch.stages.back().dim;
  arch.num_classes = shapes.size("head.fc.weight", 2, 0, "class count", SizeRange{1, kClassRange.max});
  const auto& fc = shapes.tensor("head.fc.weight", 2);
  if (fc.size(1) != arch.cls_dim)
    throw CheckpointError("tensor 'head.fc.weight' takes " + std::to_string(fc.size(1)) +
                          " features but the last block "
                          "outputs " +
                          std::to_string(arch.cls_dim));
  if (head_dims_from_defaults) {
    std::vector<int> used;
    for (const auto& stage : arch.stages) used.push_back(stage.att_head_dim);
    assumed.push_back({"att_head_dim", used,
                       stages == 4 ? "the released models' head widths 1/1/16/32; the weights do not show them"
                                   : "1 (not a four-stage CARE); the weights do not show them"});
  }
  int native = 224;
  if (meta.contains("img_size"))
    native = shapes.bounded("native input size", "arch metadata img_size",
                            std::max<int64_t>(32, meta["img_size"].get<int64_t>()), kInputRange);
  else
    assumed.push_back({"img_size", native, "CARE's training input; sets the default input size only"});
  arch.native_height = arch.native_width = native;
  return arch;
}

// Parameters and one forward pass at the native input, counted from the architecture: a 4x4
// stem, 2x2 merges, and per block its token mixer (3x3, 7x7 and strip convs, or qk) and the two
// interaction MLPs.
StagedMemory care_memory(const CareArch& arch) {
  const double first = arch.stages.front().dim, classes = arch.num_classes, features = arch.cls_dim;
  const double stem_and_heads = first * (16.0 * arch.in_chans + 5) + 2 * ((classes + 2) * features + classes);
  return StagedMemory::halving(
      arch.stages, std::floor(arch.native_height / 4.0), 4, stem_and_heads,
      [](const CareStageArch& stage, const CareBlockArch& block) {
        const double dim = stage.dim, part = stage.part_channels;
        const double inter1 = block.inter1_hidden, inter2 = block.inter2_hidden;
        const double mixer = 60 * part + (block.attention ? 2 * part * part : 24 * part);
        return StagedMemory::Block{mixer + 6 * part * inter1 + 10 * inter1 + 2 * dim * inter2 + 10 * inter2 + 10 * dim,
                                   double(block.heads), std::max(inter1, inter2)};
      });
}

InferredBackbone infer_care(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "CARE");
  return inferred_backbone<CareNetImpl>(shapes, infer_care_arch(shapes, input.meta, input.assumed), care_memory);
}

}  // namespace

// The released CARE sizes (zhouyuan888888/CARETrans models/CARETrans.py @register_model; att_head_dim is
// the constructor's default (1, 1, 16, 32), which no registered size overrides).
const std::vector<ReleasedArch>& care_released() {
  static const std::vector<ReleasedArch> table = {
      {"CARETrans_S0",
       R"({"depths":[2,4,8,4],"feat_dims":[24,48,96,192],"mem_dims":[8,16,32,64],"cls_dim":1024,"att_head_dim":[1,1,16,32],"img_size":224})"},
      {"CARETrans_S1",
       R"({"depths":[3,6,10,6],"feat_dims":[24,48,96,192],"mem_dims":[8,16,32,64],"cls_dim":1024,"att_head_dim":[1,1,16,32],"img_size":224})"},
      {"CARETrans_S2",
       R"({"depths":[3,6,10,6],"feat_dims":[24,48,144,288],"mem_dims":[8,16,48,96],"cls_dim":1536,"att_head_dim":[1,1,16,32],"img_size":224})"},
  };
  return table;
}

const BackboneFamily& care_family() {
  static const BackboneFamily family{"care",
                                     "CARE",
                                     looks_like_care,
                                     infer_care,
                                     {},
                                     care_released(),
                                     {{"att_head_dim", "att_head_dim", "CARE's head width per stage", ArchKey::Counts}},
                                     {}};
  return family;
}

}  // namespace attnscope
