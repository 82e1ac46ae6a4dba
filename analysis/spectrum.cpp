#include "analysis/spectrum.h"

#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <limits>

#include "models/attention.h"

namespace attnscope {

namespace {

using torch::indexing::Slice;

// Rank, tolerance and effective rank from descending singular values of an M x N matrix.
Spectrum summarise_singular_values(const torch::Tensor& values, int64_t rows, int64_t columns) {
  Spectrum spectrum;
  spectrum.singular_values = values.to(torch::kCPU, torch::kFloat);
  if (values.numel() == 0) return spectrum;
  const double largest = values[0].item<double>();
  spectrum.tolerance = largest * double(std::max(rows, columns)) * double(FLT_EPSILON);
  spectrum.numerical_rank = int((values > spectrum.tolerance).sum().item<int64_t>());
  auto total = values.to(torch::kDouble).sum().item<double>();
  if (total > 0) {
    auto p = values.to(torch::kDouble) / total;
    auto positive = p.masked_select(p > 0);
    spectrum.effective_rank = std::exp(-(positive * positive.log()).sum().item<double>());
  }
  return spectrum;
}

}  // namespace

Spectrum matrix_spectrum(torch::Tensor matrix, const SvdProgress& progress) {
  torch::NoGradGuard no_grad;
  const int64_t rows = matrix.size(0), columns = matrix.size(1);
  const bool large = std::min(rows, columns) > kCheapSpectrumTokens && matrix.device().is_cpu();
  const torch::Tensor values =
      large ? exact_singular_values(std::move(matrix), progress)
            : torch::linalg_svdvals(matrix.detach().to(torch::kFloat), c10::nullopt).to(torch::kCPU);
  return summarise_singular_values(values, rows, columns);
}

LeadingSpectrum leading_spectrum(const torch::Tensor& matrix, int64_t count, int power_iterations, uint64_t seed) {
  torch::NoGradGuard no_grad;
  if (matrix.dim() != 2) throw std::invalid_argument("leading_spectrum: the matrix must be 2-D");
  const torch::Tensor a = matrix.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t rows = a.size(0), cols = a.size(1), smallest = std::min(rows, cols);
  count = std::clamp<int64_t>(count, 1, smallest);
  // Oversampling makes the k-th value as good as the first few (Halko et al. section 4.2).
  const int64_t width = std::min(smallest, count + std::max<int64_t>(10, count / 2));
  auto times = [&](const torch::Tensor& x) { return a.matmul(x.to(torch::kFloat)).to(torch::kDouble); };
  auto transposed_times = [&](const torch::Tensor& x) {
    return a.transpose(0, 1).matmul(x.to(torch::kFloat)).to(torch::kDouble);
  };
  auto orthonormal = [](const torch::Tensor& x) { return std::get<0>(torch::linalg_qr(x, "reduced")); };
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  torch::Tensor basis =
      orthonormal(times(at::randn({cols, width}, generator, torch::TensorOptions().dtype(torch::kDouble))));
  for (int i = 0; i < power_iterations; ++i) basis = orthonormal(times(orthonormal(transposed_times(basis))));
  const torch::Tensor projected = transposed_times(basis).transpose(0, 1);  // Q^T A: [width, cols]
  const torch::Tensor values = torch::linalg_svdvals(projected, c10::nullopt);
  const double total = a.to(torch::kDouble).pow(2).sum().item<double>();
  const double captured = projected.pow(2).sum().item<double>();
  LeadingSpectrum out;
  out.power_iterations = power_iterations;
  out.residual = std::sqrt(std::max(0.0, total - captured));
  out.singular_values = values.slice(0, 0, count).contiguous();
  out.upper_bounds = (out.singular_values.pow(2) + out.residual * out.residual).sqrt();
  const double largest = out.upper_bounds[0].item<double>();
  out.tolerance = largest * double(std::max(rows, cols)) * double(std::numeric_limits<float>::epsilon());
  out.rank_at_least = int((out.singular_values > out.tolerance).sum().item<int64_t>());
  const int64_t tail_above =
      out.tolerance > 0 ? int64_t(std::floor(out.residual * out.residual / (out.tolerance * out.tolerance))) : smallest;
  out.rank_at_most = std::min(
      smallest, (out.upper_bounds > out.tolerance).sum().item<int64_t>() + std::min(smallest - count, tail_above));

  // The tail: smallest - count values, each at most the k-th upper bound, their squares summing to
  // at most what the leading values leave of ||A||_F^2.
  const std::vector<double> head(out.singular_values.data_ptr<double>(),
                                 out.singular_values.data_ptr<double>() + count);
  const double ceiling = out.upper_bounds[count - 1].item<double>();
  const double tail_energy = std::max(0.0, total - out.singular_values.pow(2).sum().item<double>());
  const int64_t tail_count = smallest - count;
  const double tail_sum_max =
      tail_count == 0 ? 0.0 : std::min(double(tail_count) * ceiling, std::sqrt(double(tail_count) * tail_energy));
  double head_sum = 0.0;
  for (double s : head) head_sum += s;
  auto entropy = [&](double tail_sum, bool spread) {
    const double sum = head_sum + tail_sum;
    if (sum <= 0) return 0.0;
    double h = 0.0;
    for (double s : head)
      if (s > 0) h -= (s / sum) * std::log(s / sum);
    if (tail_sum > 0) {
      // Spread: tail_count equal values; packed: values of `ceiling` (and the remainder).
      const double each = spread ? tail_sum / double(tail_count) : std::min(ceiling, tail_sum);
      if (each > 0) h -= (tail_sum / sum) * std::log(each / sum);
    }
    return h;
  };
  double low = entropy(0.0, false), high = low;
  for (int step = 1; step <= 256; ++step) {
    const double tail_sum = tail_sum_max * step / 256.0;
    low = std::min(low, entropy(tail_sum, false));
    high = std::max(high, entropy(tail_sum, true));
  }
  out.effective_rank_low = std::exp(low);
  out.effective_rank_high = std::exp(high);
  return out;
}

Spectrum factored_spectrum(const torch::Tensor& left, const torch::Tensor& right) {
  torch::NoGradGuard no_grad;
  if (left.dim() != 2 || right.dim() != 2 || left.size(1) != right.size(1))
    throw std::invalid_argument("factored_spectrum: factors must be [M, r] and [N, r]");
  auto left_r = std::get<1>(torch::linalg_qr(left.detach().to(torch::kCPU, torch::kDouble), "reduced"));
  auto right_r = std::get<1>(torch::linalg_qr(right.detach().to(torch::kCPU, torch::kDouble), "reduced"));
  // L R^T = Q_L (R_L R_R^T) Q_R^T with orthonormal Q's: the core carries every singular value.
  auto core = torch::matmul(left_r, right_r.transpose(0, 1));
  auto values = torch::linalg_svdvals(core, c10::nullopt);
  return summarise_singular_values(values, left.size(0), right.size(0));
}

std::optional<MatrixFactors> equivalent_matrix_factors(const AttentionCapture& whole, int64_t head, bool include_dwc,
                                                       int64_t batch) {
  torch::NoGradGuard no_grad;
  const AttentionCapture& layer = whole.for_head(head);
  const ResolvedAttention& attention = layer.attention;
  // A window restriction and per-window groups (Swin) have no thin factors; nor has softmax.
  if (attention.window > 0 || layer.query_slots.defined()) return std::nullopt;
  if (include_dwc && attention.dwc) return std::nullopt;
  if (head < 0 || head >= layer.heads) throw std::out_of_range("head " + std::to_string(head) + " does not exist");
  return equivalent_factors(attention.kernel, layer.features, batch, head);
}

namespace {

// A layer of groups (Swin's windows) is block-diagonal once rows and columns are sorted by group:
// its singular values are those of the blocks, each a window's queries against its keys.
Spectrum grouped_spectrum(const AttentionCapture& layer, int64_t head, bool include_dwc, int64_t batch) {
  const auto queries = layer.query_slots.to(torch::kCPU), keys = layer.key_slots.to(torch::kCPU);
  std::vector<torch::Tensor> values;
  for (int64_t group = 0; group < queries.size(0); ++group) {
    const auto members = queries[group].masked_select(queries[group].ge(0));
    const auto group_keys = keys[group].masked_select(keys[group].ge(0));
    if (members.numel() == 0 || group_keys.numel() == 0) continue;
    const std::vector<int64_t> rows(members.data_ptr<int64_t>(), members.data_ptr<int64_t>() + members.numel());
    torch::Tensor block = layer.rows(batch, head, rows);
    if (include_dwc && layer.attention.dwc) block = block + layer.dwc_band(rows).to(block.device(), block.dtype());
    block = block.index_select(1, group_keys.to(block.device()));
    values.push_back(torch::linalg_svdvals(block.to(torch::kFloat), c10::nullopt).to(torch::kCPU));
  }
  auto all = std::get<0>(torch::cat(values).sort(0, /*descending=*/true));
  return summarise_singular_values(all, layer.layout.total_tokens(), layer.key_layout.total_tokens());
}

}  // namespace

bool exact_spectrum_is_cheap(const AttentionCapture& whole, int64_t head, bool include_dwc) {
  const AttentionCapture& layer = whole.for_head(head);
  if (layer.query_slots.defined() && layer.groups() > 1) return true;
  if (std::min(layer.layout.total_tokens(), layer.key_layout.total_tokens()) <= kCheapSpectrumTokens) return true;
  return equivalent_matrix_factors(whole, head, include_dwc).has_value();
}

AttentionSpectrum attention_spectrum(const AttentionCapture& whole, int64_t head, bool include_dwc, int64_t batch,
                                     const SvdProgress& progress) {
  torch::NoGradGuard no_grad;
  const AttentionCapture& layer = whole.for_head(head);
  const auto start = std::chrono::steady_clock::now();
  AttentionSpectrum result;
  result.dwc = include_dwc && layer.attention.dwc;
  if (auto factors = equivalent_matrix_factors(layer, head, include_dwc, batch)) {
    result.spectrum = factored_spectrum(factors->left, factors->right);
    result.method = "factors";
    result.rank_bound = int(factors->left.size(1));
  } else if (layer.query_slots.defined() && layer.groups() > 1) {
    result.spectrum = grouped_spectrum(layer, head, include_dwc, batch);
    result.method = "window blocks";
    result.rank_bound = std::min(layer.layout.total_tokens(), layer.key_layout.total_tokens());
  } else {
    torch::Tensor matrix = include_dwc ? layer.equivalent_matrix(batch, head) : layer.matrix(batch, head);
    result.rank_bound = int(std::min(matrix.size(0), matrix.size(1)));
    // On the GPU the matrix stays there (cuSOLVER); on the CPU it is reduced panel by panel in place.
    result.spectrum = matrix_spectrum(std::move(matrix), progress);
    result.method = "full SVD";
  }
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double row_entropy(const torch::Tensor& row) {
  torch::NoGradGuard no_grad;
  auto p = row.detach().to(torch::kCPU, torch::kDouble).clamp_min(0.0);
  const double total = p.sum().item<double>();
  if (total <= 0) return 0.0;
  p = p / total;
  auto positive = p.masked_select(p > 0);
  return -(positive * positive.log()).sum().item<double>();
}

}  // namespace attnscope
