// Where a pooling head reads the image from: the attention of SigLIP's and PE's attention-pool head,
// or of CaiT's class-attention blocks (ForwardOutput::pool_attention), per head over the patch grid.
// `run`'s pool_overlay.png, the workbench's "pool" view and its figure all take their maps from here.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "models/backbone.h"

namespace attnscope {

struct PoolMaps {
  std::string layer;           // the module: "attn_pool", "blocks_token_only.1.attn"
  torch::Tensor heads;         // [h, gh, gw] float32: each head's attention on the patches
  torch::Tensor mean;          // [gh, gw]: their mean over heads
  torch::Tensor prefix_share;  // [h]: the share each head gives the prefix tokens it reads (PE's and
                               // CaiT's class token), 0 where it reads the patches alone (SigLIP)
  int prefix_tokens = 0;       // the tokens before the patches that the pool reads
};

// The pool attention `pool` of the first image on `layout`'s patch grid. Throws
// std::invalid_argument when it reads fewer tokens than the grid holds.
PoolMaps pool_maps(const PoolAttention& pool, const TokenLayout& layout);

// The pool attention a model's features are read through: the last of `pools`. Throws
// std::invalid_argument naming why there is none (a class token or mean pooling).
const PoolAttention& features_pool(const std::vector<PoolAttention>& pools, const std::string& family);

}  // namespace attnscope
