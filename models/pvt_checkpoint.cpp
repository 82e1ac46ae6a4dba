// PVT v2 and FLatten-PVT v2 checkpoints: the original (whai362, FLatten) layout renamed to timm's
// keys, the architecture (stages, spatial reduction, -li, focused blocks) read from the keys, and
// the family's registry entry.
#include <regex>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/checkpoint_keys.h"
#include "models/model_families.h"
#include "models/pvt.h"

namespace attnscope {

namespace {

std::string pvt_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

bool looks_like_pvt(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("patch_embed1.proj.weight") ||
         checkpoint.tensors.count("stages.0.blocks.0.attn.q.weight");
}

// Renames the original layout (patch_embed{1-4}, block{1-4}.j, norm{1-4}, dwconv.dwconv) to timm's
// in place, as timm's _checkpoint_filter_fn does, telling `shapes` the file's names; returns
// "original" or "timm".
std::string adopt_pvt_layout(FamilyInput& input, ShapeReader& shapes) {
  Checkpoint& checkpoint = input.checkpoint;
  if (!checkpoint.tensors.count("patch_embed1.proj.weight")) return "timm";
  static const std::regex block(R"(^block(\d+)\.(\d+)\.)"), stage_norm(R"(^norm(\d+)\.)"),
      embed(R"(^patch_embed(\d+)\.)");
  auto stage_of = [](const std::smatch& match) { return std::to_string(std::stoi(match[1].str()) - 1); };
  std::map<std::string, torch::Tensor> converted;
  for (auto& [key, tensor] : checkpoint.tensors) {
    std::string name = key;
    std::smatch match;
    if (key.size() < 200 && std::regex_search(key, match, embed)) {
      const std::string stage = match[1].str();
      name = (stage == "1" ? std::string("patch_embed.") : "stages." + stage_of(match) + ".downsample.") +
             key.substr(size_t(match.length(0)));
    } else if (key.size() < 200 && std::regex_search(key, match, block)) {
      name = "stages." + stage_of(match) + ".blocks." + match[2].str() + "." + key.substr(size_t(match.length(0)));
    } else if (key.size() < 200 && std::regex_search(key, match, stage_norm)) {
      name = "stages." + stage_of(match) + ".norm." + key.substr(size_t(match.length(0)));
    }
    const size_t dwconv = name.find("dwconv.dwconv");
    if (dwconv != std::string::npos) name.replace(dwconv, 13, "dwconv");
    if (name != key) shapes.renamed(name, key);
    converted[name] = tensor;
  }
  checkpoint.tensors = std::move(converted);
  input.notes.push_back("original PVT v2 layout (whai362 / FLatten), renamed to timm's keys");
  return "original";
}

// The architecture from timm-layout keys; `meta` (the file's attnscope_arch metadata, or null)
// gives the heads per stage and the training input, which keys do not show (default: PVT v2's
// 1, 2, 5, 8 heads for four stages, 224 pixels). Throws CheckpointError naming the key.
PvtArch infer_pvt_arch(ShapeReader& shapes, const nlohmann::json& meta, const std::string& layout,
                       std::vector<std::string>& notes) {
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
  nlohmann::json heads_given = meta.is_object() ? meta.value("heads", nlohmann::json()) : nlohmann::json();
  int stages = 0;
  while (shapes.has(pvt_block_prefix(stages, 0) + "norm1.weight"))
    shapes.bounded("stage count", "stages.S", ++stages, kStageRange);
  if (stages == 0) throw CheckpointError("no PVT stage found (missing 'stages.0.blocks.0.norm1.weight')");
  static const int kReleasedHeads[] = {1, 2, 5, 8};
  bool heads_from_defaults = false;
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
    if (heads_given.is_array() && size_t(s) < heads_given.size() && heads_given[size_t(s)].is_number_integer())
      heads = shapes.bounded("head count", "arch metadata heads", heads_given[size_t(s)].get<int64_t>(), kHeadRange);
    else if (stages == 4)
      heads = kReleasedHeads[s], heads_from_defaults = true;
    else
      heads = std::max(1, stage.dim / 64), heads_from_defaults = true;
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
      if (stage.dim % block.heads != 0)
        throw CheckpointError(std::to_string(block.heads) + " heads do not divide the width " +
                              std::to_string(stage.dim) + " of '" + prefix + "'");
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      stage.blocks.push_back(block);
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (heads_from_defaults)
    notes.push_back("heads per stage: PVT v2's released 1, 2, 5, 8 (or width / 64); the keys do not show them");
  int native = 224;
  if (meta.is_object() && meta.contains("img_size") && meta["img_size"].is_number_integer())
    native = shapes.bounded("native input size", "arch metadata img_size",
                            std::max<int64_t>(8, meta["img_size"].get<int64_t>()), kInputRange);
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
  const std::string layout = adopt_pvt_layout(input, shapes);
  return inferred_backbone<PyramidVisionTransformerImpl>(
      shapes, infer_pvt_arch(shapes, input.meta, layout, input.notes), pvt_memory);
}

}  // namespace

const BackboneFamily& pvt_family() {
  static const BackboneFamily family{"pvt-v2", "PVT v2, FLatten-PVT v2", looks_like_pvt, infer_pvt, {}};
  return family;
}

}  // namespace attnscope
