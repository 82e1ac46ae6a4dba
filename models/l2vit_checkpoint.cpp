#include "models/l2vit_checkpoint.h"
#include "models/checkpoint_keys.h"

#include <algorithm>

namespace attnscope {

namespace {

std::string l2vit_block_prefix(int stage, int block) {
  return "stages." + std::to_string(stage) + "." + std::to_string(block) + ".";
}

int meta_int_list_entry(const nlohmann::json& meta, const char* key, size_t index) {
  if (!meta.is_object() || !meta.contains(key) || !meta[key].is_array() || index >= meta[key].size()) return 0;
  const auto& value = meta[key][index];
  return value.is_number_integer() ? value.get<int>() : 0;
}

}  // namespace

bool looks_like_l2vit(const Checkpoint& checkpoint) {
  return has_tensor(checkpoint, "downsample_layers.0.norm.weight") && has_tensor(checkpoint, "stages.0.0.norm1.weight");
}

const std::vector<std::string>& l2vit_container_preference() {
  static const std::vector<std::string> order{"model_ema", "model", "state_dict_ema", "state_dict"};
  return order;
}

L2ViTArch infer_l2vit_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, std::vector<std::string>& notes) {
  L2ViTArch arch;
  const std::string stem = "downsample_layers.0.proj.proj.";
  if (!has_tensor(checkpoint, stem + "0.weight"))
    throw CheckpointError(
        "L2ViT without the conv stem ('" + stem +
        "0.weight' missing): attnscope runs the released models (conv_stem=True, mix_local_enhanced_vit)");
  const auto& first = required_tensor(checkpoint, stem + "0.weight", 4);
  arch.in_chans = int(first.size(1));
  arch.stem_conv_bias = has_tensor(checkpoint, stem + "0.bias");
  if (has_tensor(checkpoint, "head.weight"))
    arch.num_classes = int(required_tensor(checkpoint, "head.weight", 2).size(0));
  if (meta.is_object() && meta.contains("window") && meta["window"].is_number_integer())
    arch.window = std::max(1, meta["window"].get<int>());
  else
    notes.push_back("L2ViT window: 7 (the released models but L2ViT_Base_384, which uses 12); the keys do not show it");
  bool heads_guessed = false;
  int in_dim = 0;
  for (int s = 0; has_tensor(checkpoint, l2vit_block_prefix(s, 0) + "norm1.weight"); ++s) {
    L2ViTStageArch stage;
    stage.dim = int(required_tensor(checkpoint, l2vit_block_prefix(s, 0) + "norm1.weight", 1).size(0));
    if (s > 0) {
      const std::string key = "downsample_layers." + std::to_string(s) + ".proj.weight";
      const auto& conv = required_tensor(checkpoint, key, 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim || conv.size(2) != 2 || conv.size(3) != 2)
        throw CheckpointError("L2ViT: tensor '" + key + "' is not a 2x2 conv from width " + std::to_string(in_dim) +
                              " to " + std::to_string(stage.dim));
    }
    // Heads: the metadata's, else the global blocks' temperature [h, 1, 1], else the authors' width / 32.
    int heads = meta_int_list_entry(meta, "heads", size_t(s));
    if (heads <= 0 && has_tensor(checkpoint, l2vit_block_prefix(s, 1) + "attn.temperature"))
      heads = int(required_tensor(checkpoint, l2vit_block_prefix(s, 1) + "attn.temperature", 3).size(0));
    if (heads <= 0) heads = std::max(1, stage.dim / 32), heads_guessed = true;
    for (int b = 0; has_tensor(checkpoint, l2vit_block_prefix(s, b) + "norm1.weight"); ++b) {
      const std::string prefix = l2vit_block_prefix(s, b);
      L2ViTBlockArch block;
      block.global = has_tensor(checkpoint, prefix + "local_mp.conv1.weight");
      if (block.global != (b % 2 == 1))
        throw CheckpointError("L2ViT: block '" + prefix +
                              "' breaks the alternation of local (even) and global (odd) blocks "
                              "(global blocks have local_mp.*)");
      block.heads = heads;
      if (block.global) {
        const int temperature_heads = int(required_tensor(checkpoint, prefix + "attn.temperature", 3).size(0));
        if (temperature_heads != heads)
          throw CheckpointError("L2ViT: tensor '" + prefix + "attn.temperature' has " +
                                std::to_string(temperature_heads) + " heads, the stage " + std::to_string(heads));
      }
      if (heads <= 0 || stage.dim % heads != 0)
        throw CheckpointError("L2ViT: " + std::to_string(heads) + " heads do not divide the width " +
                              std::to_string(stage.dim) + " of '" + prefix + "'");
      block.qkv_bias = has_tensor(checkpoint, prefix + "attn.qkv.bias");
      block.mlp_hidden = int(required_tensor(checkpoint, prefix + "mlp.fc1.weight", 2).size(0));
      stage.blocks.push_back(block);
    }
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (arch.stages.empty()) throw CheckpointError("L2ViT: no stage found ('stages.0.0.norm1.weight' missing)");
  if (heads_guessed) notes.push_back("L2ViT heads of stages without metadata or global blocks: width / 32");
  int native = 224;
  if (meta.is_object() && meta.contains("img_size") && meta["img_size"].is_number_integer())
    native = std::max(8, meta["img_size"].get<int>());
  arch.native_height = arch.native_width = native;
  return arch;
}

}  // namespace attnscope
