#include "analysis/kernel_diagnostics.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace attnscope {

namespace {

// The same layer with plain softmax on its own q and k (and its own windows, groups and additive
// bias, which the softmax takes): the rows each kernel is compared with.
AttentionCapture softmax_twin(const AttentionCapture& capture) {
  AttentionCapture twin = capture;
  twin.attention.kernel = Kernel::Softmax;
  twin.attention.dwc = false;
  twin.features = KernelFeatures{};
  twin.features.q = capture.q;
  twin.features.k = capture.k;
  twin.features.score_scale = 1.0 / std::sqrt(double(capture.q.size(3)));
  twin.talking_heads = {};
  twin.row_log_normalizer = torch::Tensor();
  for (auto& branch : twin.branches) branch = softmax_twin(branch);
  return twin;
}

// The same layer with every query multiplied by `scale`, the kernel evaluated again from the
// module's parameters; throws where that cannot be done from the capture alone.
AttentionCapture scaled_query_twin(const AttentionCapture& capture, double scale) {
  if (!capture.branches.empty()) {
    AttentionCapture twin = capture;
    for (auto& branch : twin.branches) branch = scaled_query_twin(branch, scale);
    return twin;
  }
  if (capture.query_slots.defined())
    throw std::invalid_argument("its queries were captured per window group: the kernel is not re-evaluated there");
  AttentionCapture twin = capture;
  twin.q = capture.q * scale;
  twin.row_log_normalizer = torch::Tensor();
  ResolvedAttention again = capture.attention;
  again.learned_positional_encoding = false;  // the captured k carries it already
  torch::Tensor k = capture.k;
  twin.features = kernel_features(again, twin.q, k, capture.parameters, capture.layout).detached();
  return twin;
}

// p = |w| / sum |w| per row of [Q, T] (a zero row stays zero).
torch::Tensor magnitudes_as_distribution(const torch::Tensor& rows) {
  auto magnitude = rows.abs();
  return magnitude / magnitude.sum(1, true).clamp_min(1e-300);
}

// sum_j p log(p / q) per row, 0 log 0 = 0, q floored at 1e-300 (an exponential underflowed to 0).
torch::Tensor kl_rows(const torch::Tensor& p, const torch::Tensor& q) {
  auto terms = p * (p.clamp_min(1e-300).log() - q.clamp_min(1e-300).log());
  return torch::where(p > 0, terms, torch::zeros_like(terms)).sum(1);
}

// The share of the row's magnitude on patch keys within the k x k patches around the query's place
// on the key grid; none for prefix queries. Mean over patch queries.
std::optional<double> local_mass(const AttentionCapture& capture, const torch::Tensor& rows,
                                 const std::vector<int64_t>& queries, int window) {
  const TokenLayout& layout = capture.layout;
  const TokenLayout& keys = capture.key_layout;
  const int radius = window / 2;
  double total = 0.0;
  int64_t counted = 0;
  auto magnitude = rows.abs();
  for (size_t i = 0; i < queries.size(); ++i) {
    const int token = int(queries[i]);
    if (!layout.is_patch(token)) continue;
    // The query's place on the key grid (PVT's reduced keys: the key patch that covers it).
    const int row = layout.row_of(token) * keys.grid_h / layout.grid_h;
    const int col = layout.col_of(token) * keys.grid_w / layout.grid_w;
    double near = 0.0;
    for (int r = std::max(0, row - radius); r <= std::min(keys.grid_h - 1, row + radius); ++r)
      for (int c = std::max(0, col - radius); c <= std::min(keys.grid_w - 1, col + radius); ++c)
        near += magnitude[int64_t(i)][keys.patch_token(r, c)].item<double>();
    const double all = magnitude[int64_t(i)].sum().item<double>();
    if (all > 0) total += near / all;
    ++counted;
  }
  if (counted == 0) return std::nullopt;
  return total / double(counted);
}

// ReLU kernels keep q_c k_c where both are positive: the share of sum_ij sum_c |q_ic k_jc| they drop,
// within each group of queries and keys (one group outside windows), image 0.
double dropped_product_share(const AttentionCapture& capture, int head, const std::vector<int64_t>& queries) {
  const int64_t groups = capture.groups();
  auto q = capture.q.narrow(0, 0, groups).select(1, head).to(torch::kDouble);  // [G, S, d]
  auto k = capture.k.narrow(0, 0, groups).select(1, head).to(torch::kDouble);
  if (groups == 1) q = q.index_select(1, torch::tensor(queries).to(q.device()));
  auto kept = (torch::relu(q).sum(1) * torch::relu(k).sum(1)).sum().item<double>();
  auto all = (q.abs().sum(1) * k.abs().sum(1)).sum().item<double>();
  return all > 0 ? 1.0 - kept / all : 0.0;
}

}  // namespace

std::vector<int64_t> sampled_queries(int64_t tokens, int max_queries) {
  std::vector<int64_t> queries;
  if (tokens <= max_queries) {
    for (int64_t token = 0; token < tokens; ++token) queries.push_back(token);
    return queries;
  }
  for (int i = 0; i < max_queries; ++i) queries.push_back(int64_t(i) * (tokens - 1) / (max_queries - 1));
  return queries;
}

KernelDiagnostics kernel_diagnostics(const AttentionCapture& capture, const KernelDiagnosticsSettings& settings) {
  if (capture.probabilities.defined() || (!capture.q.defined() && capture.branches.empty()))
    throw std::invalid_argument(
        "this layer's attention was recorded by the model file (TorchScript): it has no q and k to evaluate other "
        "kernels on; load its weights (.pth, .safetensors) instead");
  if (settings.local_window < 1 || settings.local_window % 2 == 0)
    throw std::invalid_argument("the local window must be odd and positive, got " +
                                std::to_string(settings.local_window));
  if (!(settings.query_scale > 0) || !std::isfinite(settings.query_scale) || settings.query_scale == 1.0)
    throw std::invalid_argument("the query scale must be positive, finite and not 1");
  torch::NoGradGuard no_grad;
  KernelDiagnostics result;
  result.attention = capture.attention.describe();
  result.kernel = to_string(capture.attention.kernel);
  result.tokens = capture.layout.total_tokens();
  const std::vector<int64_t> queries = sampled_queries(result.tokens, settings.max_queries);
  result.queries = int64_t(queries.size());
  const AttentionCapture reference = softmax_twin(capture);
  std::optional<AttentionCapture> scaled;
  try {
    scaled = scaled_query_twin(capture, settings.query_scale);
  } catch (const std::exception& e) {
    result.scale_note = e.what();
  }
  const bool drops = kernel_spec(capture.attention.kernel).drops_negative_products;
  for (int head = 0; head < capture.heads; ++head) {
    HeadKernelDiagnostics out;
    out.head = head;
    const torch::Tensor rows = capture.rows(0, head, queries).to(torch::kCPU, torch::kDouble);
    const torch::Tensor p = magnitudes_as_distribution(rows);
    out.entropy = (-kl_rows(p, torch::ones_like(p))).mean().item<double>();
    out.row_max = std::get<0>(rows.max(1)).mean().item<double>();
    const double magnitude = rows.abs().sum().item<double>();
    out.negative_mass = magnitude > 0 ? (-rows.clamp_max(0)).sum().item<double>() / magnitude : 0.0;
    out.local_mass = local_mass(capture, rows, queries, settings.local_window);
    const torch::Tensor softmax_rows = reference.rows(0, head, queries).to(torch::kCPU, torch::kDouble);
    out.kl_to_softmax = kl_rows(p, softmax_rows).mean().item<double>();
    const torch::Tensor middle = (p + softmax_rows) / 2;
    out.js_to_softmax = (0.5 * (kl_rows(p, middle) + kl_rows(softmax_rows, middle))).mean().item<double>();
    if (scaled)
      out.scale_shift = (0.5 * (scaled->rows(0, head, queries).to(torch::kCPU, torch::kDouble) - rows).abs().sum(1))
                            .mean()
                            .item<double>();
    // Different queries with one row: the rows' L1 distances against the queries' own.
    {
      int64_t head_in_capture = head;
      const AttentionCapture& owner = capture.for_head(head_in_capture);
      torch::Tensor q;
      if (!owner.query_slots.defined()) {
        q = owner.q[0][head_in_capture].index_select(0, torch::tensor(queries).to(owner.q.device()));
        q = q.to(torch::kCPU, torch::kDouble);
        const auto row_distance = torch::cdist(rows.unsqueeze(0), rows.unsqueeze(0), 1.0)[0];
        const auto row_scale = rows.abs().sum(1).clamp_min(1e-300);
        const auto same_row = row_distance <= 1e-5 * torch::max(row_scale.unsqueeze(0), row_scale.unsqueeze(1));
        const auto query_distance = torch::cdist(q.unsqueeze(0), q.unsqueeze(0))[0];
        const auto query_scale = q.norm(2, 1).clamp_min(1e-300);
        const auto different = query_distance > 1e-3 * torch::max(query_scale.unsqueeze(0), query_scale.unsqueeze(1));
        const auto upper = torch::ones({result.queries, result.queries}, torch::kBool).triu(1);
        out.collisions = (same_row & different & upper).sum().item<int64_t>();
        out.pairs = result.queries * (result.queries - 1) / 2;
      }
      if (drops) out.lost_negative_share = dropped_product_share(owner, int(head_in_capture), queries);
    }
    out.spectrum = head_spectrum(capture, head, settings.ranks);
    result.heads.push_back(std::move(out));
  }
  return result;
}

}  // namespace attnscope
