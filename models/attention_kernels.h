// The attention kernels as one table of pure tensor functions on per-head q, k, v [B, h, T, d]:
// for each kernel the features its scores are built from, the rows of the equivalent T x T matrix,
// the output by the cheapest exact path, the thin factors of that matrix (spectrum and rank), and
// how its resolved settings read. Rows and output share one normalisation per kernel, so what is
// displayed is what was computed.
#pragma once

#include <torch/types.h>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "models/attention_settings.h"
#include "models/token_layout.h"

namespace attnscope {

// The similarity kernel a run uses once `Variant` is resolved against a module; what each one
// computes is its row in the kernel table below.
enum class Kernel { Softmax, Linear, Focused, Enhanced, Anchor, EluLinear, Agent, InLine, Mlla, Pola };
std::string to_string(Kernel kernel);

// A variant resolved against one attention module: what actually runs and with which values.
struct ResolvedAttention {
  Kernel kernel = Kernel::Softmax;
  int window = 0;  // 0: global
  double p = 3.0;
  FocusNorm norm = FocusNorm::AllChannels;
  bool dwc = false;       // the DWC term is computed (enabled and weights exist)
  int anchors = 0;        // anchors in use (anchor kernel)
  int anchors_asked = 0;  // --anchors when more than there are (learned anchors or patches): said, not kept
  bool learned_anchors = false;
  int agents = 0;                    // agent tokens in use (agent kernel): a square
  bool learned_agent_bias = false;   // agent: the module's position biases (its trained count and grid)
  double alpha = kDefaultPolaAlpha;  // pola: the power's range 1 + alpha * sigmoid(.)
  bool learned_power = false;        // pola: the module's own power, else sigmoid(0) = 1/2
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
  // agent: the agents' softmax over the keys [B, h, A, Tk] and the queries' over the agents
  // [B, h, Tq, A]: the equivalent matrix is their product (rank <= A).
  torch::Tensor agent_attention, query_agent_attention;
  // focused: the non-negative features f_p was applied to, (ReLU(x) + eps) / softplus(scale),
  // kept so that f_p can be studied at other p without re-running the model.
  torch::Tensor q_before_focus, k_before_focus;
  // MLLA: each query's factor of its row, z_i / n with z_i = 1 / (q_i . mean(k) + 1e-6) from the
  // un-rotated features, [B, h, T, 1] (q and k above are the rotated ones).
  torch::Tensor query_row_factor;
  // PolaFormer: the opposite-sign query features [B, h, T, 2d] (q holds the same-sign ones).
  torch::Tensor q_opposite;
  // Softmax over all keys, when a capture asks for it (non-null): the forward leaves here each
  // query's log-sum-exp of its scaled scores, [B, h, T], so that any entry of the matrix is one
  // dot product later (exp(scale q_i.k_j - lse_i)) without a pass over the row. Left undefined by
  // paths that do not compute it (groups of windows, masks).
  std::shared_ptr<torch::Tensor> row_log_normalizer;

  // The same features with `f` applied to every defined tensor field (the one list of them):
  // detached() and one head's slice of a capture are this.
  KernelFeatures transformed(const std::function<torch::Tensor(const torch::Tensor&)>& f) const;
  KernelFeatures detached() const;  // the same tensors out of the graph, for a capture
};

// The parameters of its own that a module brings to a kernel; undefined ones take neutral values.
struct KernelParameters {
  torch::Tensor scale;                // focused: [1, 1, C], divisor softplus(scale); else ln 2
  torch::Tensor positional_encoding;  // focused: [1, L, C] added to k, L = T or the patch count
  torch::Tensor temperature;          // enhanced: [h, 1, 1]; else d^-0.5
  torch::Tensor anchors;              // anchor: learned [m, d]; else pooled from K
  int learned_agents = 0;             // agent: the count the module's position biases were trained for
  // agent: the module's position biases for this layer's tokens, agents over keys [1, h, A, Tk] and
  // queries over agents [1, h, Tq, A]; undefined: none (a swap).
  torch::Tensor agent_key_bias, query_agent_bias;
  torch::Tensor power;                // pola: [1, h, 1, d], the power 1 + alpha * sigmoid(power); undefined: 0
  KernelParameters detached() const;  // the same parameters out of the graph, for a capture
};

// The one resolution of a variant against an attention layer that was trained with `native`, has
// `parameters` and DWC weights (`has_dwc`) and sees `patch_tokens` keys: the kernel that runs and
// its values. Anchors 0 means every learned anchor, or kDefaultPooledAnchors pooled from K. The
// window is the caller's: a ViT swaps one in, a windowed family's layers are windowed already.
ResolvedAttention resolve_for_layer(const AttentionSettings& settings, Kernel native,
                                    const KernelParameters& parameters, bool has_dwc, int patch_tokens);

// The features a resolved kernel scores with, from per-head q, k [B, h, T, d]. `k` gains the
// positional encoding when one is used. Pooled anchors come from the patch keys of `layout`.
KernelFeatures kernel_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters& parameters, const TokenLayout& layout);
// k plus the module's learned positional encoding [1, L, C] when the resolved kernel reads it (FLatten's
// focused blocks, PolaFormer's native ones): L is every key or the patch keys; throws for another L.
void add_learned_encoding(const ResolvedAttention& resolved, const KernelParameters& parameters,
                          const TokenLayout& layout, torch::Tensor& k);

// [B, L, C] with heads side by side in C -> [B, h, L, d], the per-head layout of q, k and v.
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads);

// Which keys each query may see under a w x w window restriction: [T, T] bool, or [Q, T] for the
// query tokens `queries` when defined. Prefix-token queries and keys stay global. Returns an
// undefined tensor when w is 0 or covers the grid.
torch::Tensor window_mask(const TokenLayout& layout, int window, torch::Device device,
                          const torch::Tensor& queries = {});

// attend(kernel, features, v, window_mask(layout, window)) without autograd on the CPU, window by
// window: each window's patch queries against its own patches and the prefix tokens only, the
// prefix queries against every key. O(T w^2) instead of the mask's O(T^2) (at 5,477 tokens and
// 7 x 7 windows: 53 keys a query instead of 5,477); the masked keys' weights were exact zeros, so
// the rows are the mask's up to summation order. Kernels over all keys only (anchors) have no
// windows.
torch::Tensor attend_in_windows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                                const TokenLayout& layout, int window);
// Whether attend_in_windows is worth its per-window calls: when a query's keys there (w^2 + the
// prefix) are at most a quarter of the mask's (all T). DeiT at 224 in 7 x 7 windows (197 tokens, 4
// windows) stays with the mask; at 577 tokens and more the windows win.
inline bool window_keys_pay(const TokenLayout& layout, int window) {
  return window > 0 && 4 * (window * window + layout.prefix_tokens()) <= layout.total_tokens();
}

// FLatten's f_p on non-negative features [B, h, T, d]: (x^p / ||x^p||) * ||x||, with norms
// over all heads' channels of a token or over each head's own.
torch::Tensor focus(const torch::Tensor& x, double p, FocusNorm norm);

// Mean-pooling matrix [m, grid_h * grid_w] that averages patch keys into m regions: r bands of
// rows, each split into columns (AnchorFormer anchors for models trained without them).
torch::Tensor anchor_pooling_matrix(int grid_h, int grid_w, int anchors);

// Rows of the equivalent matrix, batched: scores for `query_index` [B, h, Q, Tk] from features,
// normalised per kernel. `allowed` is bool, [Q, Tk] or broadcastable to [B, h, Q, Tk], or
// undefined (all keys). `additive` (kernels that take it: softmax) is added to the scaled scores:
// a relative position bias or a shift mask, broadcastable to [B, h, Q, Tk].
torch::Tensor equivalent_rows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& query_index,
                              const torch::Tensor& allowed, const torch::Tensor& additive = {});

// The attention output [B, h, Tq, d] for v [B, h, Tk, d], using the cheapest exact path for the
// kernel. `allowed` and `additive` as for equivalent_rows, over all Tq queries.
torch::Tensor attend(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                     const torch::Tensor& allowed, const torch::Tensor& additive = {});

// An equivalent attention matrix as a product of two thin factors: matrix = left @ right^T.
struct MatrixFactors {
  torch::Tensor left;   // [T, r]
  torch::Tensor right;  // [T, r]
};

// One head's equivalent matrix over all keys as thin factors in float64 on the CPU, when the
// kernel has them: linear kernels (row normalisation folded into `left`, r = d) and anchors
// (r = m); none for softmax.
std::optional<MatrixFactors> equivalent_factors(Kernel kernel, const KernelFeatures& features, int64_t batch,
                                                int64_t head);

// The depthwise conv on V, patch tokens only: [B, h, T, d] -> [B, h, T, d] with zeros for the
// prefix tokens. `weight` [d, 1, k, k] is shared by the heads (FLatten); [h * d, 1, k, k] is one
// kernel per channel of the heads side by side (Agent Attention's dwc over all C).
torch::Tensor depthwise_conv_on_values(const torch::Tensor& v, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TokenLayout& layout);

// A depthwise 3 x 3 conv with a kernel per batch item and channel (InLine's predicted residual):
// `kernels` [B * h * d, 1, 3, 3], channel = head * d + i; patch tokens only, no bias, zero padding.
torch::Tensor depthwise_conv_per_item(const torch::Tensor& v, const torch::Tensor& kernels, const TokenLayout& layout);

// The DWC's contribution to the display matrix for some queries: [Q, T], the channel mean of
// the kernel at each key's offset from the query (patch tokens only).
torch::Tensor depthwise_conv_band(const torch::Tensor& weight, const TokenLayout& layout,
                                  const torch::Tensor& query_index);

// ---- The kernel table -------------------------------------------------------------------------

// The learned parameters of a layer a kernel reads, where the layer has them (bits of KernelSpec::reads).
enum KernelRead : unsigned {
  kReadsScale = 1u << 0,
  kReadsPositionalEncoding = 1u << 1,
  kReadsTemperature = 1u << 2,
  kReadsAnchors = 1u << 3,
  kReadsDwc = 1u << 4,
  kReadsAgentBias = 1u << 5,
  kReadsPower = 1u << 6,
};

// How a linear kernel (weights phi(q_i) . phi(k_j), normalised per row) normalises, in the three
// forms its computations take. Each keeps its own order of operations: outputs stay bit for bit.
struct LinearNormalisation {
  // Weights [B, h, Q, Tk] from scores zero outside `allowed` (bool, broadcastable, or undefined).
  torch::Tensor (*rows)(const torch::Tensor& scores, const KernelFeatures& features, const torch::Tensor& allowed);
  // The output [B, h, T, d] over all keys from kv = K^T V [B, h, d, d] and the key sum [B, h, d, 1].
  torch::Tensor (*output)(const KernelFeatures& features, const torch::Tensor& kv, const torch::Tensor& key_sum);
  // One head's row factor [T, 1] (float64) from its score row sums [T, 1] over `keys` keys.
  torch::Tensor (*row_scale)(const torch::Tensor& row_sum, double keys, const KernelFeatures& features, int64_t head);
};

struct KernelSpec {
  Kernel kernel;
  const char* name;             // summary.json, info, captions; also what a model's native attention is called
  unsigned reads;               // KernelRead bits
  bool global_only = false;     // global by construction (anchors): windows and masks do not apply
  bool takes_additive = false;  // a relative position bias and shift masks add to its scores
  KernelFeatures (*features)(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters& parameters, const TokenLayout& layout);
  torch::Tensor (*rows)(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& query_index,
                        const torch::Tensor& allowed, const torch::Tensor& additive);
  torch::Tensor (*attend)(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                          const torch::Tensor& allowed, const torch::Tensor& additive);
  // One head's factors (see equivalent_factors); null: the matrix has none.
  std::optional<MatrixFactors> (*factors)(const KernelSpec& spec, const KernelFeatures& features, int64_t batch,
                                          int64_t head);
  void (*describe)(const ResolvedAttention& resolved, std::ostream& out);  // its own settings; may be null
  // A second matrix the kernel computes beside the one `rows` gives, and its name (PolaFormer's
  // opposite-sign part, which weighs the second half of each head's value channels); null: none.
  const char* second_matrix;
  torch::Tensor (*second_rows)(const KernelSpec& spec, const KernelFeatures& features,
                               const torch::Tensor& query_index);
  LinearNormalisation linear{};    // linear kernels: what their shared rows, attend and factors read
  std::vector<std::string> knobs;  // the knobs of the knob table it reads besides the window (p, anchors, ...)
  // Multiply-adds of one layer's attention products over all heads, for bench's work count:
  // `tokens` queries seeing `keys` keys each (a window's, or all), width `dim`, heads of `head_dim`;
  // counts it reads from `settings` at their defaults when 0.
  double (*multiply_adds)(const AttentionSettings& settings, double tokens, double keys, double dim, double head_dim);
  // Whether its features are ReLU(q), ReLU(k): the q.k products through a negative channel are
  // dropped (PolaFormer's argument; the kernel diagnostics measure their share).
  bool drops_negative_products;
};
const std::vector<KernelSpec>& kernel_table();
// The kernel a variant swaps in, or `native` for Variant::Native.
Kernel swapped_kernel(Variant variant, Kernel native);
const KernelSpec& kernel_spec(Kernel kernel);
// Whether a layer running `spec` reads `knob`: the window restricts every kernel that is not
// global only; the others are the kernel's own `knobs`.
bool kernel_reads_knob(const KernelSpec& spec, const AttentionKnob& knob);

}  // namespace attnscope
