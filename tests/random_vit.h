// A plain ViT (width 64, 2 blocks, 4 heads, patches of 8 px) with initialised random weights and a
// grid of `grid` x `grid` patches, saved with its metadata: the many-token cases of the tests
// (grid 32: 1,025 tokens; 40: 1,601).
#pragma once

#include <filesystem>
#include <string>

#include "core/checkpoint.h"
#include "models/demo_models.h"

namespace attnscope {

inline std::string save_random_vit(const std::filesystem::path& file, int grid, uint64_t seed) {
  torch::manual_seed(seed);
  const VitArch arch = plain_vit_arch(64, 2, 4, /*patch_size=*/8, grid, 10);
  VisionTransformer model(arch);
  initialise_weights(*model.get());
  save_safetensors(file.string(), state_dict(*model), model_metadata(arch, {}));
  return file.string();
}

}  // namespace attnscope
