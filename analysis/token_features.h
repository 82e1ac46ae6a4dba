// The token features the representation analyses read besides attention: the tokens at named points
// of the forward pass (a block's output, the final norm's) and one layer's query, key or value
// facet from its capture. Everything comes back on the CPU as float32 rows in the model's token
// order: prefix tokens (class, distillation, registers) first, then the patch grid row-major.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "models/backbone.h"

namespace attnscope {

// One feature per token of a layout.
struct TokenRows {
  std::string point;   // where they were read: "blocks.3", "norm", "blocks.3 key" (resolved names)
  TokenLayout layout;  // of the rows: a hierarchical model's tokens have no prefix
  torch::Tensor rows;  // [T, C] float32, CPU, contiguous
  std::string note;    // what the reader should know about these features (e.g. a key with its encoding)

  // [N, C]: the patch tokens only, row-major over the grid.
  torch::Tensor patches() const;
};

// The descriptors of dino-vit-features (ShirAmir/dino-vit-features, ViTExtractor): a block's
// query, key or value (its qkv linear output on norm1, bias included, before any scaling, heads
// side by side), or its output token.
enum class Facet { Key, Query, Value, Token };
template <>
struct EnumTable<Facet> {
  static const std::vector<EnumEntry<Facet>>& entries();
};

// "blocks.N": the output of the Nth attention layer counted across stages (negative: from the end).
std::string block_point(int layer);

// One forward pass without autograd that reads every hook point in `points` (specs such as
// "blocks.3", "blocks.-1" or "norm", see Backbone::resolve_hook_point), in the order given. With
// `output` the pass also captures every attention layer (for the facets and attention rows) and
// hands its output back. Throws std::invalid_argument for a point the model does not have.
std::vector<TokenRows> read_token_rows(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                       const std::vector<std::string>& points, ForwardOutput* output = nullptr,
                                       const std::function<bool()>& cancelled = {});

// A layer's query, key or value per token from its capture [T, heads x d] (Swin's windows put back
// in image order, CSwin's branches side by side). Throws std::invalid_argument where the capture
// cannot give it: a TorchScript file (no q, k, v), keys on a reduced grid (PVT), or Facet::Token
// (a hook point, see read_token_rows).
TokenRows facet_rows(const AttentionCapture& capture, Facet facet);

}  // namespace attnscope
