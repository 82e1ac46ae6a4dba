// Attention rollout (Abnar & Zuidema 2020, as jacobgil/vit-explain computes it): per layer fuse the
// heads, drop the weakest links, add the identity, renormalise rows, multiply through the layers.
#pragma once

#include <torch/types.h>

#include <vector>

#include "analysis/head_fusion.h"
#include "models/attention.h"

namespace attnscope {

struct RolloutOptions {
  HeadFusion fusion = HeadFusion::Mean;
  // Fraction of each fused T x T matrix's entries, lowest first, set to 0 before the identity is
  // added. As in vit-explain, entry (0, 0) (the class token's attention to itself) is never dropped.
  double discard_ratio = 0.0;
  int query = 0;  // the token whose rolled-out row is read (the class token by default)
};

struct RolloutResult {
  torch::Tensor row;         // [T] rolled-out attention of the query over every token, CPU float32
  torch::Tensor patch_map;   // [grid_h, grid_w] the patch part of `row`
  torch::Tensor normalised;  // patch_map / max (vit-explain's mask)
};

// The heads of one captured layer fused into one matrix [T, T] (equivalent matrices, DWC band included).
torch::Tensor fuse_heads(const AttentionCapture& layer, HeadFusion fusion, int64_t batch = 0);

// One layer's rollout factor: (fused with the lowest entries dropped + I) / 2, rows renormalised.
// (vit-explain divides by a.sum(dim=-1) without keepdim, which broadcasts over columns; rows are
// what the method means, and what the result's rows summing to 1 needs.)
torch::Tensor rollout_factor(const torch::Tensor& fused, double discard_ratio);

// The layers a rollout can multiply through for the selected layer: every captured layer whose
// queries and keys are the selected layer's own tokens (a ViT: all of them; a hierarchical model:
// the layers of that stage, which share one grid). Throws std::invalid_argument, saying why, when
// the selected layer's keys are not its queries (PVT's spatial reduction).
std::vector<int> rollout_layers(const std::vector<AttentionCapture>& layers, int selected);

// Rollout over all captured layers for one query token: the query's row of R = A_L ... A_1,
// propagated as a row vector (O(L T^2) after the matrices, not O(L T^3)).
RolloutResult attention_rollout(const std::vector<AttentionCapture>& layers, const RolloutOptions& options,
                                int64_t batch = 0);

}  // namespace attnscope
