#include "models/attention_kernels_successors.h"

#include <torch/torch.h>

#include <cmath>
#include <ostream>

namespace attnscope::successor_kernels {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

double score_scale(const torch::Tensor& q) { return 1.0 / std::sqrt(double(q.size(3))); }

int square_side(int count) {
  int side = int(std::lround(std::sqrt(double(std::max(count, 0)))));
  return side * side == count ? side : 0;
}

}  // namespace

std::string agent_count_problem(int count, int patches) {
  if (count < 1 || square_side(count) == 0)
    return "agent count " + std::to_string(count) +
           " is not a square: the agents are the queries pooled to an s x s grid (4, 9, 16, 49, ...)";
  if (count > patches)
    return "agent count " + std::to_string(count) + " exceeds the " + std::to_string(patches) +
           " patches it pools from";
  return "";
}

KernelFeatures agent_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                              const KernelParameters& parameters, const TokenLayout& layout) {
  const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(3), prefix = layout.prefix_tokens();
  const int64_t side = square_side(resolved.agents);
  // agent_deit: AdaptiveAvgPool2d over q's patch tokens laid out [B, C, h, w].
  auto grid = q.index({Slice(), Slice(), Slice(prefix)})
                  .reshape({batch * heads, layout.grid_h, layout.grid_w, dim})
                  .permute({0, 3, 1, 2});
  auto agents = F::adaptive_avg_pool2d(grid, F::AdaptiveAvgPool2dFuncOptions({side, side}))
                    .reshape({batch, heads, dim, side * side})
                    .transpose(-1, -2);  // [B, h, A, d]
  const double scale = score_scale(q);
  auto agent_scores = torch::matmul(agents * scale, k.transpose(-2, -1));
  if (parameters.agent_key_bias.defined()) agent_scores = agent_scores + parameters.agent_key_bias;
  auto query_scores = torch::matmul(q * scale, agents.transpose(-2, -1));
  if (parameters.query_agent_bias.defined()) query_scores = query_scores + parameters.query_agent_bias;
  KernelFeatures features;
  features.q = q;
  features.k = k;
  features.score_scale = scale;
  features.agent_attention = torch::softmax(agent_scores, -1);
  features.query_agent_attention = torch::softmax(query_scores, -1);
  return features;
}

torch::Tensor agent_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                         const torch::Tensor&, const torch::Tensor&) {
  return torch::matmul(features.query_agent_attention.index_select(2, query_index), features.agent_attention);
}

torch::Tensor agent_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                           const torch::Tensor&, const torch::Tensor&) {
  // agent_v = agent_attn @ v; x = q_attn @ agent_v: O(T A d).
  return torch::matmul(features.query_agent_attention, torch::matmul(features.agent_attention, v));
}

std::optional<MatrixFactors> agent_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                           int64_t head) {
  MatrixFactors factors;
  factors.left = features.query_agent_attention[batch][head].to(torch::kCPU, torch::kDouble);             // [Tq, A]
  factors.right = features.agent_attention[batch][head].to(torch::kCPU, torch::kDouble).transpose(0, 1);  // [Tk, A]
  return factors;
}

void describe_agent(const ResolvedAttention& resolved, std::ostream& out) {
  out << " agents=" << resolved.agents
      << (resolved.learned_agent_bias ? " (learned position biases)" : " (no position biases)");
}

KernelFeatures inline_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters&, const TokenLayout&) {
  KernelFeatures features;
  features.q = q;
  features.k = k;
  features.score_scale = score_scale(q);
  return features;
}

torch::Tensor inline_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                          const torch::Tensor&, const torch::Tensor&) {
  const double n = double(features.k.size(2)), scale = features.score_scale;
  auto query = features.q.index_select(2, query_index);
  auto scores = torch::matmul(query, features.k.transpose(-2, -1));                    // [B, h, Q, n]
  auto mean_score = torch::matmul(query, features.k.mean(2, true).transpose(-2, -1));  // q . k_mean
  return (scores - mean_score) * (scale / n) + 1.0 / n;
}

torch::Tensor inline_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                            const torch::Tensor&, const torch::Tensor&) {
  // inline_deit.py, in its order of operations.
  const auto& q = features.q;
  const auto& k = features.k;
  const double n = double(k.size(2)), scale = features.score_scale, root = std::sqrt(scale / n);
  auto kv = torch::matmul(k.transpose(-2, -1) * root, v * root);
  return torch::matmul(q, kv) + (1 - torch::matmul(q, k.mean(2, true).transpose(-2, -1)) * scale) * v.mean(2, true);
}

std::optional<MatrixFactors> inline_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                            int64_t head) {
  // W = [Q, 1] [(s/n)(K - 1 k_mean), 1/n]^T: rank <= d + 1.
  auto q = features.q[batch][head].to(torch::kCPU, torch::kDouble);
  auto k = features.k[batch][head].to(torch::kCPU, torch::kDouble);
  const double n = double(k.size(0)), scale = features.score_scale;
  MatrixFactors factors;
  factors.left = torch::cat({q, torch::ones({q.size(0), 1}, q.options())}, 1);
  factors.right =
      torch::cat({(k - k.mean(0, true)) * (scale / n), torch::full({k.size(0), 1}, 1.0 / n, k.options())}, 1);
  return factors;
}

}  // namespace attnscope::successor_kernels
