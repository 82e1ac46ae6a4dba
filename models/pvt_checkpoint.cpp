// PVT v2 and FLatten-PVT v2 checkpoints: the original (whai362, FLatten) layout renamed to timm's
// keys, the architecture (stages, spatial reduction, -li, focused blocks) read from the keys, and
// the family's registry entry.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "models/checkpoint_keys.h"
#include "models/model_families.h"
#include "models/pvt.h"

namespace attnscope {

namespace {

std::string pvt_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

// "<word><digits>." at `from` in `key` (the original layout's "block2.", "norm4."): the digits and
// where the rest of the key begins. At most 9 digits, so that they fit an int.
struct NumberedPrefix {
  std::string digits;
  size_t rest = 0;
};
std::optional<NumberedPrefix> numbered_prefix(const std::string& key, size_t from, const std::string& word) {
  if (key.compare(from, word.size(), word) != 0) return std::nullopt;
  size_t end = from + word.size();
  NumberedPrefix prefix;
  while (end < key.size() && end - from - word.size() < 9 && std::isdigit(static_cast<unsigned char>(key[end]))) ++end;
  prefix.digits = key.substr(from + word.size(), end - from - word.size());
  if (end == from + word.size() || end >= key.size() || key[end] != '.') return std::nullopt;
  prefix.rest = end + 1;
  return prefix;
}

// The original layout counts stages from 1, timm's from 0.
std::string stage_prefix(const NumberedPrefix& stage) {
  return "stages." + std::to_string(std::stoi(stage.digits) - 1);
}

bool looks_like_pvt(const Checkpoint& checkpoint) {
  // PVT v1's layout (pos_embed1) is the successors' PVT (models/pvt_v1).
  return (checkpoint.tensors.count("patch_embed1.proj.weight") && !checkpoint.tensors.count("pos_embed1")) ||
         checkpoint.tensors.count("stages.0.blocks.0.attn.q.weight");
}

// Renames the original layout (patch_embed{1-4}, block{1-4}.j, norm{1-4}, dwconv.dwconv) to timm's
// in place, as timm's _checkpoint_filter_fn does, telling `shapes` the file's names; returns
// "original" or "timm".
CheckpointLayout adopt_pvt_layout(FamilyInput& input, ShapeReader& shapes) {
  Checkpoint& checkpoint = input.checkpoint;
  if (!checkpoint.tensors.count("patch_embed1.proj.weight")) return CheckpointLayout::Timm;
  std::map<std::string, torch::Tensor> converted;
  for (auto& [key, tensor] : checkpoint.tensors) {
    std::string name = key;
    if (auto embed = numbered_prefix(key, 0, "patch_embed")) {
      name = (embed->digits == "1" ? std::string("patch_embed.") : stage_prefix(*embed) + ".downsample.") +
             key.substr(embed->rest);
    } else if (auto stage = numbered_prefix(key, 0, "block")) {
      if (auto block = numbered_prefix(key, stage->rest, ""))
        name = stage_prefix(*stage) + ".blocks." + block->digits + "." + key.substr(block->rest);
    } else if (auto norm = numbered_prefix(key, 0, "norm")) {
      name = stage_prefix(*norm) + ".norm." + key.substr(norm->rest);
    }
    const size_t dwconv = name.find("dwconv.dwconv");
    if (dwconv != std::string::npos) name.replace(dwconv, 13, "dwconv");
    if (name != key) shapes.renamed(name, key);
    converted[name] = tensor;
  }
  checkpoint.tensors = std::move(converted);
  input.notes.push_back("original PVT v2 layout (whai362 / FLatten), renamed to timm's keys");
  return CheckpointLayout::Original;
}

// The architecture from timm-layout keys; `meta` (the file's attnscope_arch metadata, or null)
// gives the heads per stage and the training input, which keys do not show (default: PVT v2's
// 1, 2, 5, 8 heads for four stages, 224 pixels). Throws CheckpointError naming the key.
PvtArch infer_pvt_arch(ShapeReader& shapes, const nlohmann::json& meta, CheckpointLayout layout,
                       std::vector<ArchAssumption>& assumed) {
  PvtArch arch;
  arch.source_layout = layout;
  const std::string stem = "patch_embed.proj.weight";
  arch.in_chans = shapes.size(stem, 4, 1, "input channel count", kRgbRange);
  const auto& stem_weight = shapes.tensor(stem, 4);
  if (stem_weight.size(2) != 7 || stem_weight.size(3) != 7)
    throw shapes.error(stem, "has a " + std::to_string(stem_weight.size(2)) + "x" +
                                 std::to_string(stem_weight.size(3)) +
                                 " kernel; PVT v2's overlapping patch embedding is 7x7");
  if (shapes.has("head.weight")) arch.num_classes = shapes.size("head.weight", 2, 0, "class count", kClassRange);
  int stages = 0;
  while (shapes.has(pvt_block_prefix(stages, 0) + "norm1.weight"))
    shapes.bounded("stage count", "stages.S", ++stages, kStageRange);
  if (stages == 0) throw CheckpointError("no PVT stage found (missing 'stages.0.blocks.0.norm1.weight')");
  const std::vector<int> heads_given = stage_counts(meta, "heads", size_t(stages));
  static const int kReleasedHeads[] = {1, 2, 5, 8};
  std::vector<int> heads_per_stage;
  bool heads_assumed = false;  // a softmax block took the default
  int in_dim = shapes.size(stem, 4, 0, "width", kWidthRange), depth = 0;
  for (int s = 0; s < stages; ++s) {
    PvtStageArch stage;
    stage.dim = shapes.size(pvt_block_prefix(s, 0) + "norm1.weight", 1, 0, "width", kWidthRange);
    stage.downsample = s > 0;
    if (s > 0) {
      const std::string key = "stages." + std::to_string(s) + ".downsample.proj.weight";
      const auto& conv = shapes.tensor(key, 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim)
        throw shapes.error(key, "does not map width " + std::to_string(in_dim) + " to " + std::to_string(stage.dim));
    } else if (in_dim != stage.dim) {
      throw CheckpointError("patch_embed.proj.weight gives width " + std::to_string(in_dim) + ", stage 0 has " +
                            std::to_string(stage.dim));
    }
    int heads = 0;
    if (!heads_given.empty())
      heads = shapes.bounded("head count", "arch heads", heads_given[size_t(s)], kHeadRange);
    else
      heads = stages == 4 ? kReleasedHeads[s] : std::max(1, stage.dim / 64);
    for (int b = 0; shapes.has(pvt_block_prefix(s, b) + "norm1.weight"); ++b) {
      shapes.bounded("depth", "stages.S.blocks.B", ++depth, kDepthRange);
      const std::string prefix = pvt_block_prefix(s, b), attn = prefix + "attn.";
      PvtBlockArch block;
      block.heads = heads;
      block.qkv_bias = shapes.has(attn + "q.bias");
      if (shapes.tensor(attn + "kv.weight", 2).size(0) != 2 * stage.dim)
        throw shapes.error(attn + "kv.weight", "is not [2C, C] with C = " + std::to_string(stage.dim));
      if (shapes.has(attn + "sr.weight")) {
        const int kernel = shapes.size(attn + "sr.weight", 4, 2, "spatial reduction", kPatchRange);
        block.pooled = kernel == 1;
        block.sr_ratio = block.pooled ? 1 : kernel;
        if (!shapes.has(attn + "norm.weight"))
          throw CheckpointError("missing tensor '" + shapes.file_key(attn + "norm.weight") + "'");
        if (block.pooled) arch.linear = true;
      }
      if (shapes.has(attn + "dwc.weight")) {
        arch.flatten = true;
        block.native = NativeAttention::Focused;
        const FocusedShapes focused = read_focused_attention(shapes, attn, stage.dim);
        block.dwc_kernel = focused.dwc_kernel;
        block.heads = focused.heads;
        block.encoding_tokens = focused.encoding_tokens;
      }
      if (stage.dim % block.heads != 0 && !heads_given.empty())
        throw CheckpointError(std::to_string(block.heads) + " heads do not divide the width " +
                              std::to_string(stage.dim) + " of '" + prefix + "'");
      if (stage.dim % block.heads != 0)
        throw unfit_default_error("the weights do not show PVT v2's heads, and " +
                                      std::string(stages == 4 ? "the released " : "width / 64 = ") +
                                      std::to_string(block.heads) + " heads of stage " + std::to_string(s) +
                                      " do not divide its width " + std::to_string(stage.dim),
                                  "heads");
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      heads_assumed = heads_assumed || (heads_given.empty() && block.native != NativeAttention::Focused);
      stage.blocks.push_back(block);
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  for (const auto& stage : arch.stages) heads_per_stage.push_back(stage.blocks.back().heads);
  if (heads_assumed)
    assumed.push_back({"heads", heads_per_stage,
                       stages == 4 ? "PVT v2's released heads 1/2/5/8; the weights do not show them"
                                   : "width / 64 (not a four-stage PVT v2); the weights do not show them"});
  int native = 224;
  if (meta.contains("img_size"))
    native = shapes.bounded("native input size", "arch img_size", std::max<int64_t>(8, meta["img_size"].get<int64_t>()),
                            kInputRange);
  else
    assumed.push_back({"img_size", native, "PVT v2's training input; sets the default input size only"});
  arch.native_height = arch.native_width = native;
  return arch;
}

// Parameters and one forward pass at the native input, counted from the architecture: the
// patch embeddings are 7x7 (the stem) and 3x3 (the merges).
StagedMemory pvt_memory(const PvtArch& arch) {
  const double width = arch.stages.back().dim, classes = arch.num_classes;
  const double stem_and_head = 49.0 * arch.in_chans * arch.stages.front().dim + (classes + 1) * width;
  return StagedMemory::halving(arch.stages, std::ceil(arch.native_height / 4.0), 9, stem_and_head,
                               [](const PvtStageArch& stage, const PvtBlockArch& block) {
                                 const double dim = stage.dim;
                                 const double reduction = block.pooled ? 1 : block.sr_ratio > 1 ? block.sr_ratio : 0;
                                 const double hidden = block.mlp_hidden, encoding = block.encoding_tokens;
                                 return StagedMemory::Block{
                                     (4 + reduction * reduction) * dim * dim + (2 * dim + 11) * hidden +
                                         (encoding + 15 + double(block.dwc_kernel) * block.dwc_kernel) * dim,
                                     double(block.heads), hidden};
                               });
}

InferredBackbone infer_pvt(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "PVT v2");
  const CheckpointLayout layout = adopt_pvt_layout(input, shapes);
  read_trained_focusing_factor(input.meta, input.notes);
  return inferred_backbone<PyramidVisionTransformerImpl>(
      shapes, infer_pvt_arch(shapes, input.meta, layout, input.assumed), pvt_memory);
}

}  // namespace

// timm's pvt_v2_b0..b5 (timm/models/pvt_v2.py) and FLatten's flatten_pvt_v2_b0..b5
// (models/flatten_pvt_v2.py), as their @register_model functions build them.
const std::vector<ReleasedArch>& pvt_released() {
  static const std::vector<ReleasedArch> table = {
      {"pvt_v2_b0",
       R"({"depths":[2,2,2,2],"embed_dims":[32,64,160,256],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224})"},
      {"pvt_v2_b1",
       R"({"depths":[2,2,2,2],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224})"},
      {"pvt_v2_b2",
       R"({"depths":[3,4,6,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224})"},
      {"pvt_v2_b3",
       R"({"depths":[3,4,18,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224})"},
      {"pvt_v2_b4",
       R"({"depths":[3,8,27,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224})"},
      {"pvt_v2_b5",
       R"({"depths":[3,6,40,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[4,4,4,4],"img_size":224})"},
      {"pvt_v2_b2_li",
       R"({"depths":[3,4,6,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"linear":true,"img_size":224})"},
      {"flatten_pvt_v2_b0",
       R"({"depths":[2,2,2,2],"embed_dims":[32,64,160,256],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224,"focusing_factor":3})"},
      {"flatten_pvt_v2_b1",
       R"({"depths":[2,2,2,2],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224,"focusing_factor":3})"},
      {"flatten_pvt_v2_b2",
       R"({"depths":[3,4,6,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224,"focusing_factor":3})"},
      {"flatten_pvt_v2_b3",
       R"({"depths":[3,4,18,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224,"focusing_factor":3})"},
      {"flatten_pvt_v2_b4",
       R"({"depths":[3,8,27,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[8,8,4,4],"img_size":224,"focusing_factor":3})"},
      {"flatten_pvt_v2_b5",
       R"({"depths":[3,6,40,3],"embed_dims":[64,128,320,512],"num_heads":[1,2,5,8],"sr_ratios":[8,4,2,1],"mlp_ratios":[4,4,4,4],"img_size":224,"focusing_factor":3})"},
  };
  return table;
}

const BackboneFamily& pvt_family() {
  static const BackboneFamily family{
      "pvt-v2", "PVT v2, FLatten-PVT v2", looks_like_pvt, infer_pvt, {}, pvt_released(), {}, {}};
  return family;
}

}  // namespace attnscope
