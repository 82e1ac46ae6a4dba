// A plain ViT (width 64, 2 blocks, 4 heads, patches of 8 px) with initialised random weights and a
// grid of `grid` x `grid` patches, saved with its metadata: the many-token cases of the tests
// (grid 32: 1,025 tokens; 40: 1,601).
#pragma once

#include <filesystem>
#include <string>

#include "core/checkpoint.h"
#include "models/demo_models.h"

namespace attnscope {

inline VitArch random_vit_arch(int grid) { return plain_vit_arch(64, 2, 4, /*patch_size=*/8, grid, 10); }

// The model in eval mode; torch's global generator seeded first, so the weights follow `seed`.
inline VisionTransformer random_vit(int grid, uint64_t seed) {
  torch::manual_seed(seed);
  VisionTransformer model(random_vit_arch(grid));
  initialise_weights(*model.get());
  model->eval();
  return model;
}

inline std::string save_random_vit(const std::filesystem::path& file, int grid, uint64_t seed) {
  VisionTransformer model = random_vit(grid, seed);
  save_safetensors(file.string(), state_dict(*model), model_metadata(random_vit_arch(grid), {}));
  return file.string();
}

}  // namespace attnscope
