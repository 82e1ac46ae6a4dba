// Sane bounds on an architecture read from a checkpoint's shapes, checked before any module is
// built: a shape costs nothing in a file ([5e7, 0] is 0 bytes) but decides what gets allocated.
// Each model family lists its dimensions (as its ShapeReader reads them, models/checkpoint_keys.h)
// and a memory estimate; one check judges them all.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "models/vit.h"

namespace attnscope {

// The accepted values of one kind of size; outside them a file is damaged or not a model attnscope runs.
struct SizeRange {
  int64_t min = 1, max = 1;
};
constexpr SizeRange kWidthRange{1, 16384};         // channels of a stage or a token
constexpr SizeRange kDepthRange{1, 1024};          // blocks of a model
constexpr SizeRange kStageRange{1, 16};            // stages of a hierarchical model
constexpr SizeRange kHeadRange{1, 4096};           // heads of an attention layer
constexpr SizeRange kHeadWidthRange{1, 16384};     // channels of one head
constexpr SizeRange kPatchRange{1, 1024};          // pixels a side of a patch or stem kernel
constexpr SizeRange kRgbRange{3, 3};               // input channels: the images are RGB
constexpr SizeRange kGridRange{1, 1024};           // tokens a side: position grids, windows, stripes
constexpr SizeRange kInputRange{1, 16384};         // pixels a side of the native input
constexpr SizeRange kClassRange{0, 1'000'000};     // 0: no head, the features are the output
constexpr SizeRange kHiddenRange{1, 262144};       // an MLP's hidden channels
constexpr SizeRange kKernelRange{1, 255};          // a convolution's kernel side
constexpr SizeRange kEncodingRange{1, 1'000'000};  // tokens of a learned positional encoding
constexpr SizeRange kTableRange{1, 4'190'209};     // entries of a relative position table: (2 x 1024 - 1)^2
constexpr SizeRange kVocabRange{2, 1'048'576};     // token ids of a text tower (CLIP's: 49408)
constexpr SizeRange kContextRange{1, 4096};        // positions of a text tower (CLIP's: 77)

// One size of the architecture, the checkpoint key it was read from, and its accepted range.
struct ArchDimension {
  std::string name;    // "MLP hidden size"
  std::string source;  // "blocks.2.mlp.fc1.weight", as the file names it
  int64_t value = 0;
  SizeRange range;
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

// Throws CheckpointError naming `dimension`'s key and value when it is outside its range.
void check_dimension(const std::string& family, const ArchDimension& dimension);

// Throws CheckpointError naming the first dimension outside its range with its key, or the
// estimate when it is above kMaxModelBytes.
void check_arch_limits(const ArchEstimate& estimate);

// The dimensions (with timm's key names) and the memory estimate of a ViT/DeiT.
ArchEstimate vit_arch_estimate(const VitArch& arch);

// A staged model's memory at its native input, counted as its family builds it, stage by stage.
// The forward pass follows the rule vit_arch_estimate counts a ViT's by: about six [T, C] tensors
// kept per block, a block's widest activation (an MLP's hidden), and every head's T x T matrix of
// one layer.
class StagedMemory {
 public:
  // What one block holds: its parameters, heads and widest activation.
  struct Block {
    double parameters = 0, heads = 0, widest = 0;
  };
  // The memory of `arch_stages` (each with `dim` and `blocks`) whose grids halve from `first_grid`
  // tokens a side, joined by merges that read `merge_area` cells per output cell (a 2x2 merge: 4),
  // with `block_memory(stage, block)` of each block and `other_parameters` (stem, norms, head).
  template <typename ArchStages, typename BlockMemory>
  static StagedMemory halving(const ArchStages& arch_stages, double first_grid, double merge_area,
                              double other_parameters, BlockMemory block_memory) {
    StagedMemory memory;
    memory.parameters_ = other_parameters;
    double grid = first_grid, in_dim = 0;
    for (const auto& stage : arch_stages) {
      const double dim = stage.dim;
      if (in_dim > 0) memory.parameters_ += merge_area * in_dim * dim, grid = std::ceil(grid / 2);
      memory.stages_.push_back({grid * grid, dim});
      for (const auto& block : stage.blocks) memory.add_block(block_memory(stage, block));
      in_dim = dim;
    }
    return memory;
  }
  double parameter_bytes() const { return 4 * parameters_; }  // float32
  double forward_bytes() const;

 private:
  struct Stage {
    double tokens = 0, width = 0, blocks = 0, heads = 0, widest = 0;
  };
  void add_block(const Block& block);
  double parameters_ = 0;
  std::vector<Stage> stages_;
};

}  // namespace attnscope
