#include "models/attention_kernels.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/number_text.h"
#include "models/attention_kernels_successors.h"
#include "models/cpu_threads.h"

#include <torch/torch.h>

#include <cmath>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace attnscope {

using torch::indexing::Slice;

namespace {

// ---- Shared by several kernels ----------------------------------------------------------------

double softmax_scale_of(const torch::Tensor& q) { return 1.0 / std::sqrt(double(q.size(3))); }

// Unnormalised scores of some queries against every key: [B, h, Q, Tk].
torch::Tensor query_scores(const KernelFeatures& features, const torch::Tensor& query_index) {
  auto query = features.q.index_select(2, query_index);
  return torch::matmul(query, features.k.transpose(-1, -2));
}

// The output from attend_queries(begin, end) [B, h, end - begin, d]: without autograd on the CPU,
// query rows split across the cores, one region for all heads.
torch::Tensor attend_by_query_chunks(const torch::Tensor& q, const torch::Tensor& v,
                                     const std::function<torch::Tensor(int64_t, int64_t)>& attend_queries) {
  if (!cpu_inference(q)) return attend_queries(0, q.size(2));
  auto out = torch::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, v.options());
  // Each core walks its queries in blocks whose scores stay about kScoreBlockBytes: layers nobody
  // looks at never hold their T x T scores (at 5,481 tokens, 6 heads: 720 MB a layer). 16 MB (a
  // block of 127 query rows there) measured fastest on the 2-core EPYC at 1,374 and 5,481 tokens:
  // 4 MB blocks (31 rows) make skinny GEMMs that repack k for every few rows, 64 MB ones leave
  // the cache between the exponentials and A V (docs/speed.md).
  constexpr int64_t kScoreBlockBytes = int64_t(16) << 20;
  const int64_t row_bytes = q.size(0) * q.size(1) * v.size(2) * int64_t(sizeof(float));
  const int64_t block = std::max<int64_t>(16, kScoreBlockBytes / std::max<int64_t>(1, row_bytes));
  for_each_row_chunk(q.size(2), [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block) {
      const int64_t last = std::min(end, first + block);
      out.narrow(2, first, last - first).copy_(attend_queries(first, last));
    }
  });
  return out;
}

// Rows [begin, end) of a [.., Q, Tk] mask or bias (undefined stays undefined).
torch::Tensor query_rows_of(const torch::Tensor& t, int64_t begin, int64_t end) {
  return t.defined() ? t.narrow(-2, begin, end - begin) : t;
}

// A masked or biased layer's output through its explicit rows: the masked Tq x Tk matrix is the
// exact computation.
torch::Tensor attend_through_rows(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                                  const torch::Tensor& allowed, const torch::Tensor& additive) {
  const auto& q = features.q;
  return attend_by_query_chunks(q, v, [&](int64_t begin, int64_t end) {
    auto index = torch::arange(begin, end, torch::TensorOptions().dtype(torch::kLong).device(q.device()));
    return torch::matmul(
        spec.rows(spec, features, index, query_rows_of(allowed, begin, end), query_rows_of(additive, begin, end)), v);
  });
}

// ---- softmax ----------------------------------------------------------------------------------

KernelFeatures softmax_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k,
                                const KernelParameters&, const TokenLayout&) {
  KernelFeatures features;
  features.q = q;
  features.score_scale = softmax_scale_of(q);
  features.k = k;
  return features;
}

torch::Tensor softmax_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                           const torch::Tensor& allowed, const torch::Tensor& additive) {
  auto scores = query_scores(features, query_index) * features.score_scale;
  if (additive.defined()) scores = scores + additive;
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
  return scores.softmax(-1);
}

// Softmax attention of a block of scores [G, Q, Tk] and values [G, Tk, d] without autograd: the
// scores are overwritten with exp(s - max) in place, multiplied with the values, and the product's
// rows divided by the row sums: a pass over Q x d outputs instead of allocating and writing Q x Tk
// probabilities (LibTorch's softmax). `log_normalizer` [G, Q], when defined, gets each row's
// log-sum-exp, from which a capture redraws any row.
torch::Tensor attend_exponentials(torch::Tensor& scores, const torch::Tensor& v3, const torch::Tensor& log_normalizer) {
  const auto maxima = scores.amax(-1, /*keepdim=*/true);
  scores.sub_(maxima).exp_();
  const auto sums = scores.sum(-1, /*keepdim=*/true);
  if (log_normalizer.defined()) log_normalizer.copy_((maxima + sums.log()).squeeze(-1));
  return torch::bmm(scores, v3).div_(sums);
}

// Softmax attention of small groups ([B, h, Q, d] with B >= the cores, e.g. Swin's windows)
// without autograd on the CPU: whole groups per core, one full Q x Tk GEMM per group and head
// (splitting query rows instead doubles the GEMM calls and halves each), and a softmax of max,
// exp and sum in place: LibTorch's softmax kernel is slow on rows of 49 (2.3 against 1.4 ns per
// score measured here). `additive` is undefined or [G, h or 1, Q, Tk] with G dividing B.
torch::Tensor attend_softmax_by_groups(const KernelFeatures& features, const torch::Tensor& v,
                                       const torch::Tensor& additive) {
  const auto& q = features.q;
  const auto& k = features.k;
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2), value_dim = v.size(3);
  const int64_t groups = additive.defined() ? additive.size(0) : 1;
  // [B, h, Q, d] as a view of [B, Q, h, d]: the chunks write each head's output in token order,
  // so the callers' out.transpose(1, 2).reshape(B, Q, h * d) is a view, not a copy on one core.
  auto out = torch::empty({batch, queries, heads, value_dim}, v.options()).permute({0, 2, 1, 3});
  torch::Tensor normalizer;  // [B * h, Q] when a capture asks for it (KernelFeatures::row_log_normalizer)
  if (features.row_log_normalizer && !additive.defined())
    *features.row_log_normalizer = normalizer = torch::empty({batch * heads, queries}, q.options());
  fill_by_row_chunks(out, 0, [&](int64_t first, int64_t last) {
    const int64_t count = last - first;
    auto q3 = q.narrow(0, first, count).reshape({count * heads, queries, q.size(3)});
    auto k3 = k.narrow(0, first, count).reshape({count * heads, keys, k.size(3)});
    auto v3 = v.narrow(0, first, count).reshape({count * heads, keys, value_dim});
    // Zeros, not empty: LibTorch 1.13's CPU baddbmm_ can scale the old contents by beta = 0.
    auto scores = torch::zeros({count * heads, queries, keys}, q.options())
                      .baddbmm_(q3, k3.transpose(1, 2), /*beta=*/0.0, /*alpha=*/features.score_scale);
    if (additive.defined()) {
      // Group g takes the bias of g mod G; a chunk may span the groups of several images.
      auto per_group = scores.view({count, heads, queries, keys});
      for (int64_t g = first; g < last;) {
        const int64_t image_end = std::min(last, (g / groups + 1) * groups);
        per_group.narrow(0, g - first, image_end - g).add_(additive.narrow(0, g % groups, image_end - g));
        g = image_end;
      }
    }
    const auto rows_normalizer = normalizer.defined() ? normalizer.narrow(0, first * heads, count * heads) : normalizer;
    return attend_exponentials(scores, v3, rows_normalizer).view({count, heads, queries, value_dim});
  });
  return out;
}

torch::Tensor softmax_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                             const torch::Tensor& allowed, const torch::Tensor& additive) {
  if (allowed.defined()) return attend_through_rows(spec, features, v, allowed, additive);
  const auto& q = features.q;
  const auto& k = features.k;
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2), value_dim = v.size(3);
  // A bias [G, h or 1, Q, Tk] whose G divides the batch (Swin's windows) is added broadcast, as
  // a view of the scores [B / G, G, h, Q, Tk]; tiling it first would copy it per chunk.
  const bool grouped_bias =
      additive.defined() && additive.dim() == 4 && additive.size(0) > 0 && batch % additive.size(0) == 0;
  if (cpu_inference(q) && batch >= int64_t(configured_threads()) && (!additive.defined() || grouped_bias))
    return attend_softmax_by_groups(features, v, additive);
  const bool autograd = c10::GradMode::is_enabled();
  // Without autograd the scale is applied to q once (T x d, as timm does), so that a block's scores
  // come from one bmm into fresh memory; k is transposed once, so that no block's GEMM reads it
  // strided. With autograd (Grad-CAM) the scale rides inside the GEMM (alpha).
  auto q3 = (autograd ? q : q * features.score_scale).reshape({batch * heads, queries, q.size(3)});
  auto k3t = k.reshape({batch * heads, keys, k.size(3)}).transpose(1, 2);
  if (!autograd) k3t = k3t.contiguous();
  auto v3 = v.reshape({batch * heads, keys, value_dim});
  torch::Tensor normalizer;  // [B * h, Q]: written block by block when a capture asks for it
  if (features.row_log_normalizer)
    *features.row_log_normalizer = normalizer = torch::empty({batch * heads, queries}, q.options());
  torch::Tensor bias3;
  if (additive.defined() && !grouped_bias)
    bias3 = additive.expand({batch, heads, queries, keys}).reshape({batch * heads, queries, keys});
  return attend_by_query_chunks(q, v, [=, &features](int64_t begin, int64_t end) {
    torch::Tensor scores;
    if (autograd) {
      // Zeros, not empty: LibTorch 1.13's CPU baddbmm_ can scale the old contents by beta = 0,
      // and 0 * NaN left in reused memory made whole Swin forwards NaN.
      scores = torch::zeros({batch * heads, end - begin, keys}, q.options())
                   .baddbmm_(q3.narrow(1, begin, end - begin), k3t, /*beta=*/0.0, /*alpha=*/features.score_scale);
    } else {
      scores = torch::bmm(q3.narrow(1, begin, end - begin), k3t);
    }
    if (bias3.defined()) scores.add_(bias3.narrow(1, begin, end - begin));
    if (grouped_bias) {
      const int64_t groups = additive.size(0);
      scores.view({batch / groups, groups, heads, end - begin, keys})
          .add_(additive.narrow(2, begin, end - begin).unsqueeze(0));
    }
    const auto rows_normalizer = normalizer.defined() ? normalizer.narrow(1, begin, end - begin) : normalizer;
    // On the CPU the in-place exponentials save the probabilities' memory pass; on a GPU LibTorch's
    // fused softmax is one kernel where they are four (max, exp, sum, divide), each over the scores.
    if (!autograd && scores.device().is_cpu())
      return attend_exponentials(scores, v3, rows_normalizer).view({batch, heads, end - begin, value_dim});
    auto probabilities = scores.softmax(-1);
    if (rows_normalizer.defined()) {
      // lse_i = max_j s_ij - log max_j p_ij (the largest score has the largest probability): two
      // comparison passes instead of another exponential over the block.
      rows_normalizer.copy_(std::get<0>(scores.max(-1)) - std::get<0>(probabilities.max(-1)).log());
    }
    return torch::bmm(probabilities, v3).view({batch, heads, end - begin, value_dim});
  });
}

// ---- Linear kernels: phi(q) . phi(k), normalised per row (ReLU, FLatten, L2ViT, CARE) ----------

torch::Tensor linear_kernel_rows(const KernelSpec& spec, const KernelFeatures& features,
                                 const torch::Tensor& query_index, const torch::Tensor& allowed, const torch::Tensor&) {
  auto scores = query_scores(features, query_index);
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), 0.0);
  return spec.linear.rows(scores, features, allowed);
}

torch::Tensor linear_kernel_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                                   const torch::Tensor& allowed, const torch::Tensor& additive) {
  if (allowed.defined()) return attend_through_rows(spec, features, v, allowed, additive);
  // Over all keys: K^T V first, O(N d^2).
  const auto& k = features.k;
  auto key_sum = k.sum(2).unsqueeze(-1);            // [B, h, d, 1]
  auto kv = torch::matmul(k.transpose(-1, -2), v);  // [B, h, d, d]
  return spec.linear.output(features, kv, key_sum);
}

// Scores S = Q K^T and each row scaled by a number that depends only on its row sum, exactly as
// the kernel's rows normalise them; the scaling folds into the left factor.
std::optional<MatrixFactors> linear_kernel_factors(const KernelSpec& spec, const KernelFeatures& features,
                                                   int64_t batch, int64_t head) {
  auto q = features.q[batch][head].to(torch::kCPU, torch::kDouble);  // [T, d]
  auto k = features.k[batch][head].to(torch::kCPU, torch::kDouble);
  auto row_sum = torch::matmul(q, k.sum(0)).unsqueeze(1);  // [T, 1]
  MatrixFactors factors;
  factors.left = q * spec.linear.row_scale(row_sum, double(k.size(0)), features, head);
  factors.right = k;
  return factors;
}

// ReLU linear attention: w_ij = s_ij / (sum_j s_ij + 1e-6).
torch::Tensor relu_linear_rows(const torch::Tensor& scores, const KernelFeatures&, const torch::Tensor&) {
  auto row_sum = scores.sum(-1, /*keepdim=*/true);
  return scores / (row_sum + 1e-6);
}
torch::Tensor relu_linear_output(const KernelFeatures& features, const torch::Tensor& kv,
                                 const torch::Tensor& key_sum) {
  return torch::matmul(features.q, kv) / (torch::matmul(features.q, key_sum) + 1e-6);
}
torch::Tensor relu_linear_row_scale(const torch::Tensor& row_sum, double, const KernelFeatures&, int64_t) {
  return (row_sum + 1e-6).reciprocal();
}

// FLatten's and CARE's: z = 1 / (q . mean(k) + 1e-6), weights q.k / N z, averaging over the keys
// the query may see.
torch::Tensor mean_normalised_rows(const torch::Tensor& scores, const KernelFeatures&, const torch::Tensor& allowed) {
  auto row_sum = scores.sum(-1, /*keepdim=*/true);
  auto visible = allowed.defined() ? allowed.sum(-1, /*keepdim=*/true).to(scores.scalar_type())
                                   : torch::full({1}, double(scores.size(-1)), scores.options());
  return (scores / visible) / (row_sum / visible + 1e-6);
}
torch::Tensor mean_normalised_output(const KernelFeatures& features, const torch::Tensor& kv,
                                     const torch::Tensor& key_sum) {
  const double tokens = double(features.k.size(2));
  auto z = (torch::matmul(features.q, key_sum / tokens) + 1e-6).reciprocal();
  return torch::matmul(features.q, kv / tokens) * z;
}
torch::Tensor mean_normalised_row_scale(const torch::Tensor& row_sum, double keys, const KernelFeatures&, int64_t) {
  return (row_sum / keys + 1e-6).reciprocal() / keys;
}

// L2ViT's: w_ij = s_ij * temperature / max(sum_j s_ij, 100) (rows need not sum to 1).
torch::Tensor clamped_rows(const torch::Tensor& scores, const KernelFeatures& features, const torch::Tensor&) {
  auto row_sum = scores.sum(-1, /*keepdim=*/true);
  return scores * features.temperature / row_sum.clamp_min(100.0);
}
torch::Tensor clamped_output(const KernelFeatures& features, const torch::Tensor& kv, const torch::Tensor& key_sum) {
  return torch::matmul(features.q, kv * features.temperature) / torch::matmul(features.q, key_sum).clamp_min(100.0);
}
torch::Tensor clamped_row_scale(const torch::Tensor& row_sum, double, const KernelFeatures& features, int64_t head) {
  auto temperature = features.temperature.to(torch::kCPU, torch::kDouble);
  const double scale =
      temperature.numel() == 1 ? temperature.item<double>() : temperature.view({-1})[head].item<double>();
  return scale / row_sum.clamp_min(100.0);
}

KernelFeatures relu_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters&, const TokenLayout&) {
  KernelFeatures features;
  features.q = torch::relu(q);
  features.k = torch::relu(k);
  return features;
}

KernelFeatures elu_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k, const KernelParameters&,
                            const TokenLayout&) {
  KernelFeatures features;
  features.q = torch::elu(q) + 1.0;
  features.k = torch::elu(k) + 1.0;
  return features;
}

KernelFeatures enhanced_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                                 const KernelParameters& parameters, const TokenLayout& layout) {
  KernelFeatures features = relu_features(resolved, q, k, parameters, layout);
  features.temperature = resolved.learned_temperature ? parameters.temperature.view({1, q.size(1), 1, 1})
                                                      : torch::full({1}, softmax_scale_of(q), q.options());
  return features;
}

void describe_enhanced(const ResolvedAttention& resolved, std::ostream& out) {
  if (!resolved.learned_temperature) out << " temperature=d^-0.5";
}

// ---- FLatten's focused kernel -----------------------------------------------------------------

KernelFeatures focused_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                                const KernelParameters& parameters, const TokenLayout& layout) {
  const int64_t heads = q.size(1);
  add_learned_encoding(resolved, parameters, layout, k);
  auto divisor = resolved.learned_scale ? split_heads(torch::softplus(parameters.scale), int(heads))
                                        : torch::full({1}, std::log(2.0), q.options());
  KernelFeatures features;
  features.q_before_focus = (torch::relu(q) + 1e-6) / divisor;
  features.k_before_focus = (torch::relu(k) + 1e-6) / divisor;
  features.q = focus(features.q_before_focus, resolved.p, resolved.norm);
  features.k = focus(features.k_before_focus, resolved.p, resolved.norm);
  return features;
}

void describe_focused(const ResolvedAttention& resolved, std::ostream& out) {
  out << " p=" << resolved.p << " norm=" << to_string(resolved.norm) << " dwc=" << (resolved.dwc ? "on" : "off");
  if (!resolved.learned_scale) out << " scale=neutral";
}

// ---- AnchorFormer's anchors -------------------------------------------------------------------

KernelFeatures anchor_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters& parameters, const TokenLayout& layout) {
  const int64_t head_dim = q.size(3);
  const double softmax_scale = softmax_scale_of(q);
  torch::Tensor anchors;  // [*, m, d]
  const int64_t learned = resolved.learned_anchors ? parameters.anchors.size(0) : 0;
  if (resolved.learned_anchors) {
    anchors = parameters.anchors;
  } else {
    auto pooling = anchor_pooling_matrix(layout.grid_h, layout.grid_w, resolved.anchors).to(q.device(), q.dtype());
    anchors = torch::matmul(pooling, k.index({Slice(), Slice(), Slice(layout.prefix_tokens())}));
  }
  auto assignment = (torch::matmul(q, anchors.transpose(-1, -2)) * softmax_scale).softmax(-1);
  if (resolved.learned_anchors && resolved.anchors < learned) {
    // Keep the anchors carrying the most assignment mass, in their original order.
    auto kept = std::get<1>(assignment.sum(2).topk(resolved.anchors, -1));
    kept = std::get<0>(kept.sort(-1));  // [B, h, m']
    auto expanded = anchors.expand({q.size(0), q.size(1), learned, head_dim});
    anchors = expanded.gather(2, kept.unsqueeze(-1).expand({-1, -1, -1, head_dim}));
    assignment = (torch::matmul(q, anchors.transpose(-1, -2)) * softmax_scale).softmax(-1);
  }
  KernelFeatures features;
  features.q = q;
  features.k = k;
  features.anchor_assignment = assignment;
  if (k.size(2) != q.size(2))  // reduced keys (PVT): they join the anchors by their own assignment
    features.key_anchor_assignment = (torch::matmul(k, anchors.transpose(-1, -2)) * softmax_scale).softmax(-1);
  return features;
}

// 1 / x with 1/0 -> 0, as AnchorFormer's `degree` does for anchors nobody is assigned to.
torch::Tensor safe_reciprocal(const torch::Tensor& x) {
  auto inverse = x.reciprocal();
  return torch::where(torch::isinf(inverse), torch::zeros_like(inverse), inverse);
}

// The keys' assignment: their own with reduced keys (PVT), else the queries'.
const torch::Tensor& key_assignment(const KernelFeatures& features) {
  return features.key_anchor_assignment.defined() ? features.key_anchor_assignment : features.anchor_assignment;
}

// Rows of A Delta^-1 A_k^T; anchors are global, so `allowed` and `additive` do not apply.
torch::Tensor anchor_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                          const torch::Tensor&, const torch::Tensor&) {
  const auto& keys = key_assignment(features);
  auto inverse_degree = safe_reciprocal(keys.sum(2));  // [B, h, m]
  auto query_assignment = features.anchor_assignment.index_select(2, query_index);
  return torch::matmul(query_assignment * inverse_degree.unsqueeze(2), keys.transpose(-1, -2));
}

// Right to left, O(N m d): A (Delta^-1 (A^T V)).
torch::Tensor anchor_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                            const torch::Tensor&, const torch::Tensor&) {
  const auto& keys = key_assignment(features);
  auto inverse_degree = safe_reciprocal(keys.sum(2)).unsqueeze(-1);  // [B, h, m, 1]
  auto anchor_values = torch::matmul(keys.transpose(-1, -2), v) * inverse_degree;
  return torch::matmul(features.anchor_assignment, anchor_values);
}

// (A Delta^-1) A_k^T: r = m.
std::optional<MatrixFactors> anchor_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                            int64_t head) {
  auto assignment = features.anchor_assignment[batch][head].to(torch::kCPU, torch::kDouble);  // [T, m]
  auto keys = features.key_anchor_assignment.defined()
                  ? features.key_anchor_assignment[batch][head].to(torch::kCPU, torch::kDouble)
                  : assignment;
  auto degree = keys.sum(0);
  auto inverse_degree = torch::where(degree > 0, degree.reciprocal(), torch::zeros_like(degree));
  MatrixFactors factors;
  factors.left = assignment * inverse_degree;
  factors.right = keys;
  return factors;
}

void describe_anchor(const ResolvedAttention& resolved, std::ostream& out) {
  out << " anchors=" << resolved.anchors << (resolved.learned_anchors ? " (learned)" : " (pooled from K)");
  if (resolved.anchors_asked > 0)
    out << " (" << resolved.anchors_asked << " asked: at most the "
        << (resolved.learned_anchors ? "learned anchors" : "patches") << ")";
}

}  // namespace

// ---- Work counts (bench) -----------------------------------------------------------------------

// Every query against its keys, then the weights against the values: 2 T keys C.
double pairwise_work(const AttentionSettings&, double tokens, double keys, double dim, double) {
  return 2.0 * tokens * keys * dim;
}
// K^T V then Q (K^T V) per head: 2 T d C, whatever the window.
double linear_work(const AttentionSettings&, double tokens, double, double dim, double head_dim) {
  return 2.0 * tokens * dim * head_dim;
}
// PolaFormer's features are 2d wide, and both polarities multiply half of the values: twice linear's.
double pola_work(const AttentionSettings& settings, double tokens, double keys, double dim, double head_dim) {
  return 2.0 * linear_work(settings, tokens, keys, dim, head_dim);
}
// Through m anchors: assignments and the anchors' values, each 2 T m C.
double anchor_work(const AttentionSettings& settings, double tokens, double, double dim, double) {
  return 4.0 * tokens * (settings.anchors > 0 ? settings.anchors : kDefaultPooledAnchors) * dim;
}
// Agents over keys and queries over agents, each with its values.
double agent_work(const AttentionSettings& settings, double tokens, double, double dim, double) {
  return 4.0 * tokens * (settings.agents > 0 ? settings.agents : kDefaultAgents) * dim;
}

// ---- The table --------------------------------------------------------------------------------

const std::vector<KernelSpec>& kernel_table() {
  static const LinearNormalisation relu_sum{relu_linear_rows, relu_linear_output, relu_linear_row_scale};
  static const LinearNormalisation mean_normalised{mean_normalised_rows, mean_normalised_output,
                                                   mean_normalised_row_scale};
  static const LinearNormalisation clamped{clamped_rows, clamped_output, clamped_row_scale};
  static const std::vector<KernelSpec> table = {
      // name, learned parameters read, global only, takes additive, features, rows, attend, factors, describe,
      // second matrix and its rows, linear normalisation, knobs read (windows: every kernel that is not
      // global only), work count, drops negative q.k products
      {Kernel::Softmax,
       "softmax",
       0,
       false,
       true,
       softmax_features,
       softmax_rows,
       softmax_attend,
       nullptr,
       nullptr,
       nullptr,
       nullptr,
       {},
       {},
       pairwise_work,
       false},
      {Kernel::Linear,
       "linear",
       0,
       false,
       false,
       relu_features,
       linear_kernel_rows,
       linear_kernel_attend,
       linear_kernel_factors,
       nullptr,
       nullptr,
       nullptr,
       relu_sum,
       {},
       linear_work,
       true},
      {Kernel::Focused,
       "focused",
       kReadsScale | kReadsPositionalEncoding | kReadsDwc,
       false,
       false,
       focused_features,
       linear_kernel_rows,
       linear_kernel_attend,
       linear_kernel_factors,
       describe_focused,
       nullptr,
       nullptr,
       mean_normalised,
       {"p", "norm", "dwc"},
       linear_work,
       true},
      {Kernel::Enhanced,
       "enhanced",
       kReadsTemperature,
       false,
       false,
       enhanced_features,
       linear_kernel_rows,
       linear_kernel_attend,
       linear_kernel_factors,
       describe_enhanced,
       nullptr,
       nullptr,
       clamped,
       {},
       linear_work,
       true},
      {Kernel::Anchor,
       "anchor",
       kReadsAnchors,
       true,
       false,
       anchor_features,
       anchor_rows,
       anchor_attend,
       anchor_factors,
       describe_anchor,
       nullptr,
       nullptr,
       {},
       {"anchors"},
       anchor_work,
       false},
      // CARE's linear branch: ELU + 1 features normalised as FLatten's, without f_p.
      {Kernel::EluLinear,
       "elu_linear",
       0,
       false,
       false,
       elu_features,
       linear_kernel_rows,
       linear_kernel_attend,
       linear_kernel_factors,
       nullptr,
       nullptr,
       nullptr,
       mean_normalised,
       {},
       linear_work,
       false},
      // Agent Attention: two softmaxes through agent tokens pooled from the queries (rank <= A).
      {Kernel::Agent,
       "agent",
       kReadsAgentBias | kReadsDwc,
       true,
       false,
       successor_kernels::agent_features,
       successor_kernels::agent_rows,
       successor_kernels::agent_attend,
       successor_kernels::agent_factors,
       successor_kernels::describe_agent,
       nullptr,
       nullptr,
       {},
       {"agents", "dwc"},
       agent_work,
       false},
      // InLine: injective linear attention, no kernel function, rows shifted to sum to one.
      {Kernel::InLine,
       "inline",
       kReadsDwc,
       true,
       false,
       successor_kernels::inline_features,
       successor_kernels::inline_rows,
       successor_kernels::inline_attend,
       successor_kernels::inline_factors,
       nullptr,
       nullptr,
       nullptr,
       {},
       {"dwc"},
       linear_work,
       false},
      // MLLA: ELU + 1 features, RoPE on the numerator's q and k, FLatten's normaliser without it.
      {Kernel::Mlla,
       "mlla",
       0,
       true,
       false,
       successor_kernels::mlla_features,
       successor_kernels::mlla_rows,
       successor_kernels::mlla_attend,
       successor_kernels::mlla_factors,
       successor_kernels::describe_mlla,
       nullptr,
       nullptr,
       {},
       {},
       linear_work,
       false},
      // PolaFormer: same- and opposite-sign parts of q.k, each with half of the value channels.
      {Kernel::Pola,
       "pola",
       kReadsScale | kReadsPower | kReadsPositionalEncoding | kReadsDwc,
       true,
       false,
       successor_kernels::pola_features,
       successor_kernels::pola_rows,
       successor_kernels::pola_attend,
       successor_kernels::pola_factors,
       successor_kernels::describe_pola,
       "opposite-sign",
       successor_kernels::pola_opposite_rows,
       {},
       {"pola-alpha", "dwc"},
       pola_work,
       false},
  };
  return table;
}

// The variants a user swaps in, beside the kernels they resolve to (resolve_for_layer below): a
// new kernel is its row above, its variant row here and its case there.
const std::vector<EnumEntry<Variant>>& EnumTable<Variant>::entries() {
  static const std::vector<EnumEntry<Variant>> table = {
      {Variant::Native, "native", nullptr, "the checkpoint's own attention"},
      {Variant::Softmax, "softmax", nullptr, "ViT/DeiT dot-product attention"},
      {Variant::Linear, "linear", nullptr, "ReLU kernel linear attention"},
      {Variant::Focused, "focused", nullptr,
       "FLatten: f_p on ReLU features, with the checkpoint's depthwise conv on V"},
      {Variant::Enhanced, "enhanced", nullptr, "L2ViT linear global attention: ReLU, temperature, clamped denominator"},
      {Variant::Window, "window", nullptr, "softmax within w x w windows of the patch grid"},
      {Variant::Anchor, "anchor", nullptr, "AnchorFormer: attention through m anchors (learned, or pooled from K)"},
      {Variant::Agent, "agent", nullptr,
       "Agent Attention: agent tokens pooled from the queries, agents over keys then queries over agents"},
      {Variant::InLine, "inline", nullptr, "InLine: injective linear attention, q.k shifted by its row mean"},
      {Variant::Mlla, "mlla", nullptr, "MLLA: ELU + 1 linear attention with 2-D RoPE on the numerator"},
      {Variant::Pola, "pola", nullptr,
       "PolaFormer: same- and opposite-sign q.k parts with a learned power, each on half the value channels"},
  };
  return table;
}

namespace {

// A knob on one field of AttentionSettings: its row with set, text, copy and equal from the field.
template <typename T>
AttentionKnob knob_on(T AttentionSettings::*field, AttentionKnob row, std::function<T(const std::string&)> parse,
                      std::function<std::string(const T&)> format) {
  row.set = [field, parse](AttentionSettings& settings, const std::string& text) { settings.*field = parse(text); };
  row.text = [field, format](const AttentionSettings& settings) { return format(settings.*field); };
  row.summary = [field](const AttentionSettings& settings) { return nlohmann::json(settings.*field); };
  row.copy = [field](const AttentionSettings& from, AttentionSettings& to) { to.*field = from.*field; };
  row.equal = [field](const AttentionSettings& a, const AttentionSettings& b) { return a.*field == b.*field; };
  return row;
}

// A count of patches: 0 means what `zero_means` says.
AttentionKnob count_knob(int AttentionSettings::*field, AttentionKnob row) {
  const std::string name = row.name;
  row = knob_on<int>(
      field, std::move(row),
      [name](const std::string& text) {
        const int value = parse_int_option(name, text);
        if (value < 0) throw std::invalid_argument("--" + name + " must be >= 0");
        return value;
      },
      [](const int& value) { return std::to_string(value); });
  row.number = [field](const AttentionSettings& settings) { return double(settings.*field); };
  row.set_number = [field](AttentionSettings& settings, double value) { settings.*field = int(value); };
  return row;
}

std::vector<AttentionKnob> make_knobs() {
  std::vector<AttentionKnob> knobs;

  AttentionKnob p{"p", "P", "FLatten focusing factor, in (0, " + format_double(kMaxFocusingFactor) + "] (default 3)",
                  "p="};
  p.control_label = "p (focused)";
  p.scope = KnobScope::Panel;
  p.slider_min = 1.0;
  p.slider_max = 10.0;
  p = knob_on<double>(
      &AttentionSettings::p, p,
      [](const std::string& text) {
        const double value = parse_double_option("p", text);
        if (!(value > 0) || value > kMaxFocusingFactor)
          throw std::invalid_argument("--p must be in (0, " + format_double(kMaxFocusingFactor) + "], got " +
                                      format_double(value) +
                                      ": above it f_p keeps each vector's largest channel alone and rows go to zero");
        return value;
      },
      [](const double& value) { return format_double(value); });
  p.number = [](const AttentionSettings& settings) { return settings.p; };
  p.set_number = [](AttentionSettings& settings, double value) { settings.p = value; };
  knobs.push_back(p);

  AttentionKnob window{
      "window", "W",
      "window size in patches (0: global; the window variant defaults to " + std::to_string(kDefaultWindow) + ")",
      "w="};
  window.control = KnobControl::GridSlider;
  window.control_label = "window";
  window.zero_means = "global";
  knobs.push_back(count_knob(&AttentionSettings::window, window));

  AttentionKnob anchors{
      "anchors", "M",
      "anchor count (0: all learned anchors, or " + std::to_string(kDefaultPooledAnchors) + " pooled from K)", "m="};
  anchors.control = KnobControl::PatchSlider;
  anchors.control_label = "anchors";
  anchors.zero_means = "default";
  anchors.zero_note = "the learned ones, or " + std::to_string(kDefaultPooledAnchors) + " pooled from K";
  knobs.push_back(count_knob(&AttentionSettings::anchors, anchors));

  AttentionKnob agents{"agents", "N",
                       "agent tokens of the agent kernel, a square (0: the learned count, or " +
                           std::to_string(kDefaultAgents) + " pooled from the queries)",
                       "agents="};
  agents.control = KnobControl::PatchSlider;
  agents.control_label = "agents";
  agents.zero_means = "default";
  agents.zero_note = "the learned count, or " + std::to_string(kDefaultAgents) + " pooled from the queries";
  agents = count_knob(&AttentionSettings::agents, agents);
  agents.set = [](AttentionSettings& settings, const std::string& text) {
    const int value = parse_int_option("agents", text);
    if (value < 0) throw std::invalid_argument("--agents must be >= 0");
    if (value > 0)
      if (const std::string problem = successor_kernels::agent_count_problem(value, value); !problem.empty())
        throw std::invalid_argument("--agents: " + problem);
    settings.agents = value;
  };
  knobs.push_back(agents);

  // Not "alpha": the overlay's --alpha (value|constant) had that name first.
  AttentionKnob alpha{"pola-alpha", "A",
                      "PolaFormer's power range: p = 1 + A sigmoid(power), in [0, " + format_double(kMaxPolaAlpha) +
                          "] (default " + format_double(kDefaultPolaAlpha) + ", its configs')",
                      "alpha="};
  alpha.control_label = "alpha (pola)";
  alpha.scope = KnobScope::Panel;
  alpha.slider_min = 0.0;
  alpha.slider_max = kMaxPolaAlpha;
  alpha.only_where_read = true;
  alpha = knob_on<double>(
      &AttentionSettings::alpha, alpha,
      [](const std::string& text) {
        const double value = parse_double_option("pola-alpha", text);
        if (const std::string problem = successor_kernels::pola_alpha_problem(value); !problem.empty())
          throw std::invalid_argument("--pola-alpha: " + problem);
        return value;
      },
      [](const double& value) { return format_double(value); });
  alpha.number = [](const AttentionSettings& settings) { return settings.alpha; };
  alpha.set_number = [](AttentionSettings& settings, double value) { settings.alpha = value; };
  knobs.push_back(alpha);

  AttentionKnob dwc{"dwc", "on|off",
                    "the module's local term on V, where the checkpoint has it (FLatten's and Agent's depthwise "
                    "conv, InLine's residual)",
                    "dwc="};
  dwc.scope = KnobScope::Panel;
  dwc.control = KnobControl::Switch;
  dwc.control_label = "depthwise conv (DWC)";
  dwc.only_where_read = true;
  dwc.needs = kReadsDwc;
  dwc.choices = {"off", "on"};
  dwc = knob_on<bool>(
      &AttentionSettings::dwc, dwc,
      [](const std::string& text) {
        if (text != "on" && text != "off")
          throw std::invalid_argument("--dwc expects on or off, got '" + excerpt(text) + "'");
        return text == "on";
      },
      [](const bool& value) { return std::string(value ? "on" : "off"); });
  dwc.number = [](const AttentionSettings& settings) { return settings.dwc ? 1.0 : 0.0; };
  dwc.set_number = [](AttentionSettings& settings, double value) { settings.dwc = value != 0.0; };
  knobs.push_back(dwc);

  AttentionKnob norm{"norm", focus_norm_choices(), focus_norm_help(), "norm="};
  norm.control = KnobControl::Choice;
  norm.control_label = "f_p norms";
  for (const auto& entry : enum_entries<FocusNorm>()) norm.choices.push_back(entry.name);
  norm = knob_on<FocusNorm>(
      &AttentionSettings::norm, norm, [](const std::string& text) { return parse_enum<FocusNorm>("norm", text); },
      [](const FocusNorm& value) { return enum_name(value); });
  norm.summary = [](const AttentionSettings& settings) { return nlohmann::json(enum_name(settings.norm)); };
  norm.number = [](const AttentionSettings& settings) { return double(settings.norm); };
  norm.set_number = [](AttentionSettings& settings, double value) { settings.norm = FocusNorm(int(value)); };
  knobs.push_back(norm);

  // Head ablation (models/head_ablation.h): whatever the kernel, on ViT-shaped models.
  AttentionKnob ablate{"ablate", "L.H,..",
                       "heads whose output z is replaced in every forward (layer.head from 0, e.g. 3.1,5.0; none: "
                       "none); ViT-shaped models only",
                       "ablate="};
  ablate.control = KnobControl::Text;
  ablate.control_label = "ablated heads";
  ablate.every_kernel = true;
  ablate.set = [](AttentionSettings& settings, const std::string& text) {
    settings.ablation.heads = parse_head_list(text);
  };
  ablate.text = [](const AttentionSettings& settings) { return head_list_text(settings.ablation.heads); };
  ablate.summary = [](const AttentionSettings& settings) {
    return nlohmann::json(head_list_text(settings.ablation.heads));
  };
  ablate.copy = [](const AttentionSettings& from, AttentionSettings& to) { to.ablation.heads = from.ablation.heads; };
  ablate.equal = [](const AttentionSettings& a, const AttentionSettings& b) {
    return a.ablation.heads == b.ablation.heads;
  };
  knobs.push_back(ablate);

  AttentionKnob ablation{"ablation", enum_choices_bar<AblationKind>(),
                         "what an ablated head's z becomes: zero, or its mean per token over --ablation-images",
                         "ablation="};
  ablation.control = KnobControl::Choice;
  ablation.control_label = "ablation";
  ablation.every_kernel = true;
  for (const auto& entry : enum_entries<AblationKind>()) ablation.choices.push_back(entry.name);
  ablation.set = [](AttentionSettings& settings, const std::string& text) {
    settings.ablation.kind = parse_enum<AblationKind>("ablation", text);
  };
  ablation.text = [](const AttentionSettings& settings) { return enum_name(settings.ablation.kind); };
  ablation.summary = [](const AttentionSettings& settings) {
    return nlohmann::json(enum_name(settings.ablation.kind));
  };
  ablation.copy = [](const AttentionSettings& from, AttentionSettings& to) { to.ablation.kind = from.ablation.kind; };
  ablation.equal = [](const AttentionSettings& a, const AttentionSettings& b) {
    return a.ablation.kind == b.ablation.kind;
  };
  ablation.number = [](const AttentionSettings& settings) { return double(settings.ablation.kind); };
  ablation.set_number = [](AttentionSettings& settings, double value) {
    settings.ablation.kind = AblationKind(int(value));
  };
  knobs.push_back(ablation);

  AttentionKnob images{"ablation-images", "DIR",
                       "the folder of images mean ablation averages each head's z over (through the unablated model)",
                       "ablation-images="};
  images.control = KnobControl::Text;
  images.control_label = "ablation images";
  images.every_kernel = true;
  images.set = [](AttentionSettings& settings, const std::string& text) { settings.ablation.images = text; };
  images.text = [](const AttentionSettings& settings) { return settings.ablation.images; };
  images.summary = [](const AttentionSettings& settings) { return nlohmann::json(settings.ablation.images); };
  images.copy = [](const AttentionSettings& from, AttentionSettings& to) { to.ablation.images = from.ablation.images; };
  images.equal = [](const AttentionSettings& a, const AttentionSettings& b) {
    return a.ablation.images == b.ablation.images;
  };
  knobs.push_back(images);
  for (AttentionKnob& knob : sae_knobs()) knobs.push_back(std::move(knob));
  return knobs;
}

}  // namespace

const std::vector<AttentionKnob>& attention_knobs() {
  static const std::vector<AttentionKnob> knobs = make_knobs();
  return knobs;
}

bool kernel_reads_knob(const KernelSpec& spec, const AttentionKnob& knob) {
  // Windows restrict any kernel that is not global by construction.
  if (knob.control == KnobControl::GridSlider) return !spec.global_only;
  if (knob.every_kernel) return true;
  return std::find(spec.knobs.begin(), spec.knobs.end(), knob.name) != spec.knobs.end();
}

const KernelSpec& kernel_spec(Kernel kernel) {
  for (const KernelSpec& spec : kernel_table())
    if (spec.kernel == kernel) return spec;
  throw std::logic_error("kernel " + std::to_string(int(kernel)) + " has no row in the kernel table");
}

std::string to_string(Kernel kernel) { return kernel_spec(kernel).name; }

// ---- What reads the table ---------------------------------------------------------------------

std::string ResolvedAttention::describe() const {
  std::ostringstream out;
  const KernelSpec& spec = kernel_spec(kernel);
  out << spec.name;
  if (spec.describe) spec.describe(*this, out);
  if (window > 0) out << " window=" << window;
  if (recorded) out << " (recorded by the TorchScript model)";
  if (!native) out << " [swapped]";
  return out.str();
}

KernelFeatures KernelFeatures::transformed(const std::function<torch::Tensor(const torch::Tensor&)>& f) const {
  auto apply = [&](const torch::Tensor& t) { return t.defined() ? f(t) : t; };
  KernelFeatures out;
  out.score_scale = score_scale;
  for (auto field :
       {&KernelFeatures::q, &KernelFeatures::k, &KernelFeatures::anchor_assignment,
        &KernelFeatures::key_anchor_assignment, &KernelFeatures::temperature, &KernelFeatures::agent_attention,
        &KernelFeatures::query_agent_attention, &KernelFeatures::q_before_focus, &KernelFeatures::k_before_focus,
        &KernelFeatures::query_row_factor, &KernelFeatures::q_opposite})
    out.*field = apply(this->*field);
  return out;
}

KernelParameters KernelParameters::detached() const {
  auto detach = [](const torch::Tensor& t) { return t.defined() ? t.detach() : t; };
  KernelParameters out = *this;
  for (auto field : {&KernelParameters::scale, &KernelParameters::positional_encoding, &KernelParameters::temperature,
                     &KernelParameters::anchors, &KernelParameters::agent_key_bias, &KernelParameters::query_agent_bias,
                     &KernelParameters::power})
    out.*field = detach(this->*field);
  return out;
}

KernelFeatures KernelFeatures::detached() const {
  return transformed([](const torch::Tensor& t) { return t.detach(); });
}

void add_learned_encoding(const ResolvedAttention& resolved, const KernelParameters& parameters,
                          const TokenLayout& layout, torch::Tensor& k) {
  if (!resolved.learned_positional_encoding) return;
  auto encoding = split_heads(parameters.positional_encoding, int(k.size(1)));
  const int64_t tokens = encoding.size(2);
  if (tokens == k.size(2)) {
    k = k + encoding;
  } else if (tokens == layout.patch_tokens()) {
    const int64_t prefix = layout.prefix_tokens();
    k = torch::cat(
        {k.index({Slice(), Slice(), Slice(0, prefix)}), k.index({Slice(), Slice(), Slice(prefix)}) + encoding}, 2);
  } else {
    // Said as grids, which --size sets, not as token counts the user never chose.
    const int64_t prefix = layout.prefix_tokens(), trained_patches = tokens - (tokens > prefix ? prefix : 0);
    const auto side = int64_t(std::llround(std::sqrt(double(trained_patches))));
    const std::string trained = side * side == trained_patches
                                    ? std::to_string(side) + "x" + std::to_string(side) + " grid"
                                    : std::to_string(tokens) + "-token input";
    throw std::invalid_argument(
        std::string(kernel_spec(resolved.kernel).name) + " attention's learned positional_encoding was trained for a " +
        trained + "; this input gives a " + std::to_string(layout.grid_h) + "x" + std::to_string(layout.grid_w) +
        " grid: give the model its trained input size (--size), or swap the kernel "
        "(--variant softmax or linear) to run without the encoding");
  }
}

KernelFeatures kernel_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters& parameters, const TokenLayout& layout) {
  return kernel_spec(resolved.kernel).features(resolved, q, k, parameters, layout);
}

torch::Tensor equivalent_rows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& query_index,
                              const torch::Tensor& allowed, const torch::Tensor& additive) {
  const KernelSpec& spec = kernel_spec(kernel);
  return spec.rows(spec, features, query_index, allowed, additive);
}

torch::Tensor attend(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                     const torch::Tensor& allowed, const torch::Tensor& additive) {
  const KernelSpec& spec = kernel_spec(kernel);
  return spec.attend(spec, features, v, allowed, additive);
}

std::optional<MatrixFactors> equivalent_factors(Kernel kernel, const KernelFeatures& features, int64_t batch,
                                                int64_t head) {
  const KernelSpec& spec = kernel_spec(kernel);
  if (!spec.factors) return std::nullopt;
  return spec.factors(spec, features, batch, head);
}

Kernel swapped_kernel(Variant variant, Kernel native) {
  switch (variant) {
    case Variant::Native:
      return native;
    case Variant::Softmax:
    case Variant::Window:  // the caller sets the window (a windowed layer is windowed already)
      return Kernel::Softmax;
    case Variant::Linear:
      return Kernel::Linear;
    case Variant::Focused:
      return Kernel::Focused;
    case Variant::Enhanced:
      return Kernel::Enhanced;
    case Variant::Anchor:
      return Kernel::Anchor;
    case Variant::Agent:
      return Kernel::Agent;
    case Variant::InLine:
      return Kernel::InLine;
    case Variant::Mlla:
      return Kernel::Mlla;
    case Variant::Pola:
      return Kernel::Pola;
  }
  throw std::logic_error("variant " + std::to_string(int(variant)) + " has no kernel");
}

ResolvedAttention resolve_for_layer(const AttentionSettings& settings, Kernel native,
                                    const KernelParameters& parameters, bool has_dwc, int patch_tokens) {
  ResolvedAttention resolved;
  resolved.p = settings.p;
  resolved.norm = settings.norm;
  resolved.kernel = swapped_kernel(settings.variant, native);
  resolved.native = resolved.kernel == native;
  if (resolved.kernel == Kernel::Anchor) {
    // 0 asks for every learned anchor, or AnchorFormer's default count pooled from K.
    resolved.learned_anchors = parameters.anchors.defined();
    const int available = resolved.learned_anchors ? int(parameters.anchors.size(0)) : patch_tokens;
    const int requested =
        settings.anchors > 0 ? settings.anchors : (resolved.learned_anchors ? available : kDefaultPooledAnchors);
    resolved.anchors = std::max(1, std::min(requested, available));
    if (settings.anchors > resolved.anchors) resolved.anchors_asked = settings.anchors;
  }
  if (resolved.kernel == Kernel::Agent) {
    // 0 asks for the count the module was trained with, or the authors' 7 x 7 for a swap; the
    // learned position biases apply at their own count only.
    resolved.agents = settings.agents > 0             ? settings.agents
                      : parameters.learned_agents > 0 ? parameters.learned_agents
                                                      : std::min(kDefaultAgents, patch_tokens);
    if (const std::string problem = successor_kernels::agent_count_problem(resolved.agents, patch_tokens);
        !problem.empty())
      throw std::invalid_argument("--agents: " + problem);
    resolved.learned_agent_bias = parameters.learned_agents == resolved.agents;
  }
  // A module's local term on V (FLatten's DWC, Agent's depthwise conv, InLine's predicted 3 x 3
  // residual) belongs with the kernel it was trained with.
  resolved.dwc = resolved.kernel == native && kernel_spec(native).reads & kReadsDwc && settings.dwc && has_dwc;
  // Learned parameters of another kernel's module are not this kernel's (FLatten's scale is not
  // PolaFormer's): only the kernel a module was trained with reads them.
  resolved.learned_scale = parameters.scale.defined() &&
                           (resolved.kernel == Kernel::Focused || (resolved.kernel == Kernel::Pola && resolved.native));
  resolved.alpha = settings.alpha;
  resolved.learned_power = resolved.kernel == Kernel::Pola && resolved.native && parameters.power.defined();
  resolved.learned_positional_encoding =
      (resolved.kernel == Kernel::Focused || (resolved.kernel == Kernel::Pola && resolved.native)) &&
      parameters.positional_encoding.defined();
  resolved.learned_temperature = resolved.kernel == Kernel::Enhanced && parameters.temperature.defined();
  return resolved;
}

}  // namespace attnscope
