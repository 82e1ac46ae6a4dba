// The attention variants as pure tensor functions on per-head q, k, v [B, h, T, d]: the fast
// forward path of each variant, and the equivalent T x T matrix its computation implies.
// Both paths share one normalisation per kernel, so what is displayed is what was computed.
#pragma once

#include <torch/types.h>

#include <string>

#include "models/attention_settings.h"
#include "models/token_layout.h"

namespace attnscope {

// The similarity kernel a run uses once `Variant` is resolved against a module.
enum class Kernel { Softmax, Linear, Focused, Enhanced, Anchor };
std::string to_string(Kernel kernel);

// A variant resolved against one attention module: what actually runs and with which values.
struct ResolvedAttention {
  Kernel kernel = Kernel::Softmax;
  int window = 0;  // 0: global
  double p = 3.0;
  FocusNorm norm = FocusNorm::AllChannels;
  bool dwc = false;  // the DWC term is computed (enabled and weights exist)
  int anchors = 0;   // anchors in use (anchor kernel)
  bool learned_anchors = false;
  bool learned_temperature = false;  // enhanced: the module's own temperature, else d^-0.5
  bool learned_scale = false;        // focused: the module's own scale, else 0 (divisor ln 2)
  bool learned_positional_encoding = false;
  bool native = false;           // the module was trained with this kernel
  bool recorded = false;         // probabilities the model reported itself (TorchScript), not recomputed
  std::string describe() const;  // e.g. "focused p=3 norm=all dwc=on"
};

// Kernel features: the tensors whose products form the scores (before normalisation).
struct KernelFeatures {
  torch::Tensor q;                  // [B, h, T, d]
  double score_scale = 1.0;         // softmax: d^-0.5, applied inside the score product
  torch::Tensor k;                  // [B, h, T, d]
  torch::Tensor anchor_assignment;  // anchor kernel: A [B, h, T, m] (softmax over anchors)
  // anchor kernel when keys are other tokens than the queries (PVT's reduced keys): the keys' own
  // assignment [B, h, Tk, m]; undefined: the keys are the queries and share A.
  torch::Tensor key_anchor_assignment;
  torch::Tensor temperature;  // enhanced: [1, h, 1, 1] or a scalar tensor
  // focused: the non-negative features f_p was applied to, (ReLU(x) + eps) / softplus(scale),
  // kept so that f_p can be studied at other p without re-running the model.
  torch::Tensor q_before_focus, k_before_focus;
};

// Which keys each query may see under a w x w window restriction: [T, T] bool. Prefix-token
// queries and keys stay global. Returns an undefined tensor when w is 0 or covers the grid.
torch::Tensor window_mask(const TokenLayout& layout, int window, torch::Device device);

// FLatten's f_p on non-negative features [B, h, T, d]: (x^p / ||x^p||) * ||x||, with norms
// over all heads' channels of a token or over each head's own.
torch::Tensor focus(const torch::Tensor& x, double p, FocusNorm norm);

// Mean-pooling matrix [m, grid_h * grid_w] that averages patch keys into m regions: r bands of
// rows, each split into columns (AnchorFormer anchors for models trained without them).
torch::Tensor anchor_pooling_matrix(int grid_h, int grid_w, int anchors);

// Rows of the equivalent matrix, batched: scores for `query_index` [B, h, Q, Tk] from features,
// normalised per kernel. `allowed` is bool, [Q, Tk] or broadcastable to [B, h, Q, Tk], or
// undefined (all keys). `additive` (softmax only) is added to the scaled scores: a relative
// position bias or a shift mask, broadcastable to [B, h, Q, Tk].
torch::Tensor equivalent_rows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& query_index,
                              const torch::Tensor& allowed, const torch::Tensor& additive = {});

// The attention output [B, h, Tq, d] for v [B, h, Tk, d], using the cheapest exact path for the
// kernel. `allowed` and `additive` as for equivalent_rows, over all Tq queries.
torch::Tensor attend(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                     const torch::Tensor& allowed, const torch::Tensor& additive = {});

// The depthwise conv on V (FLatten), patch tokens only: [B, h, T, d] -> [B, h, T, d] with zeros
// for the prefix tokens.
torch::Tensor depthwise_conv_on_values(const torch::Tensor& v, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TokenLayout& layout);

// The DWC's contribution to the display matrix for some queries: [Q, T], the channel mean of
// the kernel at each key's offset from the query (patch tokens only).
torch::Tensor depthwise_conv_band(const torch::Tensor& weight, const TokenLayout& layout,
                                  const torch::Tensor& query_index);

}  // namespace attnscope
