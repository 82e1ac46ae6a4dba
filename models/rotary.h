// Rotary position embedding (RoPE) on the patch grid, as timm computes it for the models that rotate
// queries and keys instead of adding a position to the tokens: EVA-02 and Perception Encoder
// (RotaryEmbeddingCat: axial frequencies over integer coordinates, optionally rescaled to the
// pretraining grid) and DINOv3 (RotaryEmbeddingDinoV3: periods over [-1, 1] coordinates of cell
// centres). The table is rebuilt for every grid, so any input size rotates as the model would.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace attnscope {

enum class RotaryKind {
  None,
  Axial,   // timm RotaryEmbeddingCat (rope_type 'cat'): EVA-02, PE
  DinoV3,  // timm RotaryEmbeddingDinoV3 (rope_type 'dinov3')
};
template <>
struct EnumTable<RotaryKind> {
  static const std::vector<EnumEntry<RotaryKind>>& entries();
};
inline std::string to_string(RotaryKind kind) { return enum_name(kind); }  // "none", "axial", "dinov3"

struct RotaryArch {
  RotaryKind kind = RotaryKind::None;
  double temperature = 10000.0;  // DINOv3's "base" (100); the axial kind's frequency base
  double grid_offset = 0.0;      // added to each cell's coordinate
  bool xy_indexing = false;      // rope_grid_indexing 'xy': the x (column) frequencies come first
  // The axial kind's coordinate rescale to the pretraining grid (EVA's ref_feat_shape); 0: none.
  int ref_grid_h = 0, ref_grid_w = 0;
  // Which channels the attention rotates together: the two halves of a head (DINOv3) or
  // neighbouring pairs (EVA-02, PE: timm's interleaved layout). The table's own layout is the
  // kind's, as timm builds it: tiled for DINOv3, each angle twice in a row for the axial kind.
  bool rotate_half = false;
  // DINOv3: the periods a file stores (Meta's rope_embed.periods, rounded as they were saved), used
  // as the authors' model uses its loaded buffer; empty: computed from the base.
  std::vector<float> periods;

  bool enabled() const { return kind != RotaryKind::None; }
  std::string describe() const;  // "dinov3 (base 100, half rotation)", for info and summary.json
};

void to_json(nlohmann::json& j, const RotaryArch& rope);

// [grid_h * grid_w, 2 * head_dim]: sin then cos for each patch in row-major order, float32 as timm
// builds it. Throws std::invalid_argument when head_dim is not a multiple of 4 (two axes, each in
// rotated pairs).
torch::Tensor rotary_table(const RotaryArch& rope, int grid_h, int grid_w, int64_t head_dim,
                           const torch::Device& device);

// Rotates the patch tokens of q or k [B, h, T, d] (tokens past the first `prefix` ones) by `table`
// from rotary_table; the prefix tokens (class, registers) keep their values, as timm leaves them.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& table, int64_t prefix, bool rotate_half);

}  // namespace attnscope
