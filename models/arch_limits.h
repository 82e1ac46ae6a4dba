// Sane bounds on an architecture read from a checkpoint's shapes, checked before any module is
// built: a shape costs nothing in a file ([5e7, 0] is 0 bytes) but decides what gets allocated.
// Each model family lists its dimensions and a memory estimate; one check judges them all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/vit.h"

namespace attnscope {

// One size of the architecture, the checkpoint key it was read from, and its accepted range.
struct ArchDimension {
  std::string name;    // "MLP hidden size"
  std::string source;  // "blocks.2.mlp.fc1.weight"
  int64_t value = 0;
  int64_t min = 1, max = 1;
};

struct ArchEstimate {
  std::string family;  // for messages: "ViT"
  std::vector<ArchDimension> dimensions;
  double parameter_bytes = 0;  // float32 parameters (the checkpoint's copy is held beside them while loading)
  double forward_bytes = 0;    // one forward pass at the native input size, with the captures the views read
  double total_bytes() const { return 2 * parameter_bytes + forward_bytes; }
};

// The most memory a model may need by the estimate: large enough for ViT-g at 518 pixels (about
// 10 GB), small enough that a hostile file is refused before it gets the machine killed.
constexpr double kMaxModelBytes = double(uint64_t(16) << 30);

// Throws CheckpointError naming the first dimension outside its range with its key, or the
// estimate when it is above kMaxModelBytes.
void check_arch_limits(const ArchEstimate& estimate);

// The dimensions (with timm's key names) and the memory estimate of a ViT/DeiT.
ArchEstimate vit_arch_estimate(const VitArch& arch);

}  // namespace attnscope
