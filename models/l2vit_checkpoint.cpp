// L2ViT checkpoints (the authors' keys, no other layout): the architecture from the keys and the
// file's arch metadata, which weight set of a training checkpoint to load, and the family's
// registry entry.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/checkpoint_keys.h"
#include "models/l2vit.h"
#include "models/model_families.h"

namespace attnscope {

namespace {

std::string l2vit_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + "." + std::to_string(block) + ".";
}

bool looks_like_l2vit(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("downsample_layers.0.norm.weight") &&
         checkpoint.tensors.count("stages.0.0.norm1.weight");
}

// The architecture from the keys; `meta` (attnscope_arch metadata or the .arch.json sidecar, or
// null) gives the heads of local blocks per stage, the window and the training input, which the
// keys do not show (defaults: the global blocks' temperature, else width / 32; window 7; 224).
// Throws CheckpointError naming the key that is missing, misshapen or beyond the bounds.
L2ViTArch infer_l2vit_arch(ShapeReader& shapes, const nlohmann::json& meta, std::vector<ArchAssumption>& assumed) {
  L2ViTArch arch;
  const std::string stem = "downsample_layers.0.proj.proj.";
  if (!shapes.has(stem + "0.weight"))
    throw CheckpointError(
        "L2ViT without the conv stem ('" + stem +
        "0.weight' missing): attnscope runs the released models (conv_stem=True, mix_local_enhanced_vit)");
  arch.in_chans = shapes.size(stem + "0.weight", 4, 1, "input channel count", kRgbRange);
  arch.stem_conv_bias = shapes.has(stem + "0.bias");
  if (shapes.has("head.weight")) arch.num_classes = shapes.size("head.weight", 2, 0, "class count", kClassRange);
  if (!meta.contains("window"))
    assumed.push_back(
        {"window", arch.window, "the released models' (L2ViT_Base_384 uses 12); the weights do not show it"});
  else if (meta["window"].is_number_integer())
    arch.window =
        shapes.bounded("window", "arch window", std::max<int64_t>(1, meta["window"].get<int64_t>()), kGridRange);
  else
    throw CheckpointError("arch window " + meta["window"].dump() + ": L2ViT has one window side for every stage");
  int stage_count = 0;
  while (shapes.has(l2vit_block_prefix(stage_count, 0) + "norm1.weight")) ++stage_count;
  const std::vector<int> heads_given = stage_counts(meta, "heads", size_t(stage_count));
  bool heads_guessed = false;
  int in_dim = 0, depth = 0;
  for (int s = 0; shapes.has(l2vit_block_prefix(s, 0) + "norm1.weight"); ++s) {
    shapes.bounded("stage count", "stages.S", s + 1, kStageRange);
    L2ViTStageArch stage;
    stage.dim = shapes.size(l2vit_block_prefix(s, 0) + "norm1.weight", 1, 0, "width", kWidthRange);
    if (s > 0) {
      const std::string key = "downsample_layers." + std::to_string(s) + ".proj.weight";
      const auto& conv = shapes.tensor(key, 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim || conv.size(2) != 2 || conv.size(3) != 2)
        throw CheckpointError("L2ViT: tensor '" + key + "' is not a 2x2 conv from width " + std::to_string(in_dim) +
                              " to " + std::to_string(stage.dim));
    }
    // Heads: the metadata's, else the global blocks' temperature [h, 1, 1], else the authors' width / 32.
    int heads =
        heads_given.empty() ? 0 : shapes.bounded("head count", "arch heads", heads_given[size_t(s)], kHeadRange);
    const std::string temperature = l2vit_block_prefix(s, 1) + "attn.temperature";
    if (heads <= 0 && shapes.has(temperature)) heads = shapes.size(temperature, 3, 0, "head count", kHeadRange);
    if (heads <= 0) {
      heads = std::max(1, stage.dim / 32), heads_guessed = true;
      if (stage.dim % heads != 0)
        throw unfit_default_error("the weights do not show the heads of L2ViT's stage " + std::to_string(s) +
                                      " (it has no global block), and the released head width 32 gives its width " +
                                      std::to_string(stage.dim) + " " + std::to_string(heads) +
                                      " heads, which do not divide it",
                                  "heads");
    }
    for (int b = 0; shapes.has(l2vit_block_prefix(s, b) + "norm1.weight"); ++b) {
      shapes.bounded("depth", "stages.S.B", ++depth, kDepthRange);
      const std::string prefix = l2vit_block_prefix(s, b);
      L2ViTBlockArch block;
      block.global = shapes.has(prefix + "local_mp.conv1.weight");
      if (block.global != (b % 2 == 1))
        throw CheckpointError("L2ViT: block '" + prefix +
                              "' breaks the alternation of local (even) and global (odd) blocks "
                              "(global blocks have local_mp.*)");
      block.heads = heads;
      if (block.global) {
        const int temperature_heads = shapes.size(prefix + "attn.temperature", 3, 0, "head count", kHeadRange);
        if (temperature_heads != heads)
          throw CheckpointError("L2ViT: tensor '" + prefix + "attn.temperature' has " +
                                std::to_string(temperature_heads) + " heads, the stage " + std::to_string(heads));
      }
      if (stage.dim % heads != 0)
        throw CheckpointError("L2ViT: " + std::to_string(heads) + " heads do not divide the width " +
                              std::to_string(stage.dim) + " of '" + prefix + "'");
      block.qkv_bias = shapes.has(prefix + "attn.qkv.bias");
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      stage.blocks.push_back(block);
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (arch.stages.empty()) throw CheckpointError("L2ViT: no stage found ('stages.0.0.norm1.weight' missing)");
  if (heads_guessed) {
    std::vector<int> per_stage;
    for (const auto& stage : arch.stages) per_stage.push_back(stage.blocks.front().heads);
    assumed.push_back({"heads", per_stage, "width / 32, the released head width, for stages without a global block"});
  }
  int native = 224;
  if (meta.contains("img_size"))
    native = shapes.bounded("native input size", "arch metadata img_size",
                            std::max<int64_t>(8, meta["img_size"].get<int64_t>()), kInputRange);
  else
    assumed.push_back({"img_size", native, "L2ViT's training input; sets the default input size only"});
  arch.native_height = arch.native_width = native;
  return arch;
}

// Parameters and one forward pass at the native input, counted from the architecture: the conv
// stem (two 3x3 convs through half the width), 2x2 merges, the LCM's two 7x7 depthwise convs.
StagedMemory l2vit_memory(const L2ViTArch& arch) {
  const double first = arch.stages.front().dim, width = arch.stages.back().dim, classes = arch.num_classes;
  const double stem_and_head = 4.5 * (arch.in_chans + first) * first + 10 * first + (classes + 3) * width;
  return StagedMemory::halving(arch.stages, std::ceil(arch.native_height / 4.0), 4, stem_and_head,
                               [](const L2ViTStageArch& stage, const L2ViTBlockArch& block) {
                                 const double dim = stage.dim;
                                 return StagedMemory::Block{4 * dim * dim + 2 * dim * block.mlp_hidden + 40 * dim +
                                                                (block.global ? 100 * dim : 0),
                                                            double(block.heads), double(block.mlp_hidden)};
                               });
}

InferredBackbone infer_l2vit(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "L2ViT");
  return inferred_backbone<L2ViTImpl>(shapes, infer_l2vit_arch(shapes, input.meta, input.assumed), l2vit_memory);
}

}  // namespace

// L2ViT's released sizes (ChuanyangZheng/L2ViT classification/models/l2vit.py @register_model; num_heads
// and window_size are the constructor's defaults where a size does not set them).
const std::vector<ReleasedArch>& l2vit_released() {
  static const std::vector<ReleasedArch> table = {
      {"L2ViT_Tiny",
       R"({"depths":[2,2,6,2],"dims":[96,192,384,768],"num_heads":[3,6,12,24],"window_size":7,"img_size":224})"},
      {"L2ViT_Small",
       R"({"depths":[2,2,18,2],"dims":[96,192,384,768],"num_heads":[3,6,12,24],"window_size":7,"img_size":224})"},
      {"L2ViT_Base",
       R"({"depths":[2,2,18,2],"dims":[128,256,512,1024],"num_heads":[4,8,16,32],"window_size":7,"img_size":224})"},
      {"L2ViT_Base_384",
       R"({"depths":[2,2,18,2],"dims":[128,256,512,1024],"num_heads":[4,8,16,32],"window_size":12,"img_size":384})"},
  };
  return table;
}

const BackboneFamily& l2vit_family() {
  // The released *-checkpoint-best-ema.pth hold `model` and `model_ema`; the paper reports `model_ema`.
  static const BackboneFamily family{"l2vit",
                                     "L2ViT",
                                     looks_like_l2vit,
                                     infer_l2vit,
                                     {"model_ema", "model", "state_dict_ema", "state_dict"},
                                     l2vit_released(),
                                     {},
                                     {}};
  return family;
}

}  // namespace attnscope
