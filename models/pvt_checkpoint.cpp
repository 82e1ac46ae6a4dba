#include "models/pvt_checkpoint.h"
#include "models/checkpoint_keys.h"

#include <regex>

namespace attnscope {

namespace {

std::string pvt_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + ".blocks." + std::to_string(block) + ".";
}

}  // namespace

bool looks_like_pvt(const Checkpoint& checkpoint) {
  return has_tensor(checkpoint, "patch_embed1.proj.weight") ||
         has_tensor(checkpoint, "stages.0.blocks.0.attn.q.weight");
}

std::string adopt_pvt_layout(Checkpoint& checkpoint) {
  if (!has_tensor(checkpoint, "patch_embed1.proj.weight")) return "timm";
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
    converted[name] = tensor;
  }
  checkpoint.tensors = std::move(converted);
  return "original";
}

PvtArch infer_pvt_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, const std::string& layout,
                       std::vector<std::string>& notes) {
  PvtArch arch;
  arch.source_layout = layout;
  const auto& stem = required_tensor(checkpoint, "patch_embed.proj.weight", 4);
  arch.in_chans = int(stem.size(1));
  if (stem.size(2) != 7 || stem.size(3) != 7)
    throw CheckpointError("patch_embed.proj.weight has a " + std::to_string(stem.size(2)) + "x" +
                          std::to_string(stem.size(3)) + " kernel; PVT v2's overlapping patch embedding is 7x7");
  if (has_tensor(checkpoint, "head.weight"))
    arch.num_classes = int(required_tensor(checkpoint, "head.weight", 2).size(0));
  nlohmann::json heads_given = meta.is_object() ? meta.value("heads", nlohmann::json()) : nlohmann::json();
  int stages = 0;
  while (has_tensor(checkpoint, pvt_block_prefix(stages, 0) + "norm1.weight")) ++stages;
  if (stages == 0) throw CheckpointError("no PVT stage found (missing 'stages.0.blocks.0.norm1.weight')");
  static const int kReleasedHeads[] = {1, 2, 5, 8};
  bool heads_from_defaults = false;
  int in_dim = int(stem.size(0));
  for (int s = 0; s < stages; ++s) {
    PvtStageArch stage;
    stage.dim = int(required_tensor(checkpoint, pvt_block_prefix(s, 0) + "norm1.weight", 1).size(0));
    stage.downsample = s > 0;
    if (s > 0) {
      const auto& conv = required_tensor(checkpoint, "stages." + std::to_string(s) + ".downsample.proj.weight", 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim)
        throw CheckpointError("tensor 'stages." + std::to_string(s) + ".downsample.proj.weight' does not map width " +
                              std::to_string(in_dim) + " to " + std::to_string(stage.dim));
    } else if (stem.size(0) != stage.dim) {
      throw CheckpointError("patch_embed.proj.weight gives width " + std::to_string(stem.size(0)) + ", stage 0 has " +
                            std::to_string(stage.dim));
    }
    int heads = 0;
    if (heads_given.is_array() && size_t(s) < heads_given.size() && heads_given[size_t(s)].is_number_integer())
      heads = heads_given[size_t(s)].get<int>();
    else if (stages == 4)
      heads = kReleasedHeads[s], heads_from_defaults = true;
    else
      heads = std::max(1, stage.dim / 64), heads_from_defaults = true;
    for (int b = 0; has_tensor(checkpoint, pvt_block_prefix(s, b) + "norm1.weight"); ++b) {
      const std::string prefix = pvt_block_prefix(s, b), attn = prefix + "attn.";
      PvtBlockArch block;
      block.heads = heads;
      block.qkv_bias = has_tensor(checkpoint, attn + "q.bias");
      if (required_tensor(checkpoint, attn + "kv.weight", 2).size(0) != 2 * stage.dim)
        throw CheckpointError("tensor '" + attn + "kv.weight' is not [2C, C] with C = " + std::to_string(stage.dim));
      if (has_tensor(checkpoint, attn + "sr.weight")) {
        const int64_t kernel = required_tensor(checkpoint, attn + "sr.weight", 4).size(2);
        block.pooled = kernel == 1;
        block.sr_ratio = block.pooled ? 1 : int(kernel);
        if (!has_tensor(checkpoint, attn + "norm.weight"))
          throw CheckpointError("missing tensor '" + attn + "norm.weight'");
        if (block.pooled) arch.linear = true;
      }
      if (has_tensor(checkpoint, attn + "dwc.weight")) {
        arch.flatten = true;
        block.native = NativeAttention::Focused;
        const auto& dwc = required_tensor(checkpoint, attn + "dwc.weight", 4);
        block.dwc_kernel = int(dwc.size(2));
        if (dwc.size(1) != 1 || dwc.size(2) != dwc.size(3) || block.dwc_kernel % 2 == 0 || dwc.size(0) <= 0 ||
            stage.dim % dwc.size(0) != 0)
          throw CheckpointError("tensor '" + attn +
                                "dwc.weight' has an unexpected shape: FLatten's DWC is [d, 1, k, k] "
                                "with an odd k and d dividing the width " +
                                std::to_string(stage.dim));
        block.heads = int(stage.dim / dwc.size(0));
        block.encoding_tokens = int(required_tensor(checkpoint, attn + "positional_encoding", 3).size(1));
      }
      if (block.heads <= 0 || stage.dim % block.heads != 0)
        throw CheckpointError(std::to_string(block.heads) + " heads do not divide the width " +
                              std::to_string(stage.dim) + " of '" + prefix + "'");
      block.mlp_hidden = int(required_tensor(checkpoint, prefix + "mlp.fc1.weight", 2).size(0));
      stage.blocks.push_back(block);
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (heads_from_defaults)
    notes.push_back("heads per stage: PVT v2's released 1, 2, 5, 8 (or width / 64); the keys do not show them");
  int native = 224;
  if (meta.is_object() && meta.contains("img_size") && meta["img_size"].is_number_integer())
    native = std::max(8, meta["img_size"].get<int>());
  arch.native_height = arch.native_width = native;
  return arch;
}

}  // namespace attnscope
