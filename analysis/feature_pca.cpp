#include "analysis/feature_pca.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

PcaBasis fit_pca(const torch::Tensor& rows, int components) {
  if (rows.dim() != 2 || rows.size(0) < 2)
    throw std::invalid_argument("a PCA needs at least 2 rows of features, got " + std::to_string(rows.size(0)));
  const int64_t count = rows.size(0), channels = rows.size(1);
  if (components < 1 || components > std::min(count, channels))
    throw std::invalid_argument("a PCA of " + std::to_string(count) + " rows of " + std::to_string(channels) +
                                " features has at most " + std::to_string(std::min(count, channels)) +
                                " components, not " + std::to_string(components));
  torch::NoGradGuard no_grad;
  const torch::Tensor features = rows.to(torch::kCPU, torch::kDouble);
  PcaBasis basis;
  basis.rows = count;
  basis.mean = features.mean(0);
  const torch::Tensor centred = features - basis.mean;
  // The eigenvectors of the smaller Gram matrix: the same axes as the SVD of the centred rows.
  const bool by_channels = channels <= count;
  const torch::Tensor gram = by_channels ? torch::matmul(centred.t(), centred) : torch::matmul(centred, centred.t());
  const auto [values, vectors] = torch::linalg_eigh(gram);  // ascending
  const torch::Tensor top = torch::arange(gram.size(0) - 1, gram.size(0) - 1 - components, -1);
  const torch::Tensor top_values = values.index_select(0, top).clamp_min(0.0);
  torch::Tensor axes = vectors.index_select(1, top).t();  // [k, C] or [k, N]
  if (!by_channels) {
    axes = torch::matmul(axes, centred);  // u_i^T Xc = sigma_i v_i^T
    axes = axes / axes.norm(2, 1, true).clamp_min(1e-300);
  }
  // sklearn's svd_flip (u_based_decision=False): each axis's largest entry positive.
  const torch::Tensor largest = axes.abs().argmax(1, true);
  axes = axes * (1.0 - 2.0 * axes.gather(1, largest).lt(0.0).to(torch::kDouble));
  basis.axes = axes.contiguous();
  const double total = centred.square().sum().item<double>();
  basis.explained = total > 0 ? top_values / total : torch::zeros_like(top_values);
  return basis;
}

torch::Tensor pca_scores(const PcaBasis& basis, const torch::Tensor& rows) {
  torch::NoGradGuard no_grad;
  return torch::matmul(rows.to(torch::kCPU, torch::kDouble) - basis.mean, basis.axes.t());
}

torch::Tensor min_max_columns(const torch::Tensor& scores, const torch::Tensor& low, const torch::Tensor& high) {
  torch::NoGradGuard no_grad;
  const torch::Tensor lo = low.defined() ? low : std::get<0>(scores.min(0));
  const torch::Tensor hi = high.defined() ? high : std::get<0>(scores.max(0));
  const torch::Tensor range = hi - lo;
  torch::Tensor scaled = (scores - lo) / torch::where(range > 0, range, torch::ones_like(range));
  scaled = torch::where(range > 0, scaled, torch::zeros_like(scaled));
  return scaled.clamp(0.0, 1.0);
}

double otsu_threshold(const torch::Tensor& values, int bins) {
  const torch::Tensor flat = values.detach().to(torch::kCPU, torch::kDouble).reshape({-1}).contiguous();
  if (flat.numel() == 0) throw std::invalid_argument("Otsu's threshold needs at least one value");
  if (!torch::isfinite(flat).all().item<bool>()) throw std::invalid_argument("Otsu's threshold of non-finite values");
  const double* data = flat.data_ptr<double>();
  const int64_t count = flat.numel();
  const double low = flat.min().item<double>(), high = flat.max().item<double>();
  if (low == high) return low;  // one value: scikit-image returns it
  // numpy.histogram's bins: edges low + i * step (the last one exactly `high`), a value on an inner
  // edge in the bin above it, the maximum in the last bin.
  const double step = (high - low) / bins;
  std::vector<double> edges(size_t(bins) + 1);
  for (int i = 0; i < bins; ++i) edges[size_t(i)] = low + i * step;
  edges[size_t(bins)] = high;
  const size_t bin_count = static_cast<size_t>(bins);
  std::vector<double> counts(bin_count, 0.0), centres(bin_count);
  for (int i = 0; i < bins; ++i) centres[size_t(i)] = (edges[size_t(i)] + edges[size_t(i) + 1]) / 2;
  for (int64_t i = 0; i < count; ++i) {
    int bin = std::min(int((data[i] - low) / (high - low) * bins), bins - 1);
    if (data[i] < edges[size_t(bin)]) --bin;
    if (bin < bins - 1 && data[i] >= edges[size_t(bin) + 1]) ++bin;
    counts[size_t(bin)] += 1;
  }
  // Between-class variance of every split after bin i: w1 w2 (m1 - m2)^2, as threshold_otsu forms it
  // (neither side is ever empty: the first bin holds the minimum, the last the maximum).
  std::vector<double> weight_below(bin_count), mean_below(bin_count), weight_above(bin_count), mean_above(bin_count);
  double weight = 0, moment = 0;
  for (int i = 0; i < bins; ++i) {
    weight += counts[size_t(i)];
    moment += counts[size_t(i)] * centres[size_t(i)];
    weight_below[size_t(i)] = weight;
    mean_below[size_t(i)] = moment / weight;
  }
  weight = moment = 0;
  for (int i = bins - 1; i >= 0; --i) {
    weight += counts[size_t(i)];
    moment += counts[size_t(i)] * centres[size_t(i)];
    weight_above[size_t(i)] = weight;
    mean_above[size_t(i)] = moment / weight;
  }
  int best = 0;
  double best_variance = -1;
  for (int i = 0; i + 1 < bins; ++i) {
    const double gap = mean_below[size_t(i)] - mean_above[size_t(i) + 1];
    const double variance = weight_below[size_t(i)] * weight_above[size_t(i) + 1] * gap * gap;
    if (variance > best_variance) {
      best_variance = variance;
      best = i;
    }
  }
  return centres[size_t(best)];
}

namespace {

// The first component as the foreground split reads it: min-max scaled, negated with `flip`.
torch::Tensor first_component_for_split(const FeaturePca& pca, bool flip) {
  const torch::Tensor first = pca.rgb.index({torch::indexing::Slice(), 0}).to(torch::kDouble);
  return flip ? 1.0 - first : first;
}

}  // namespace

FeaturePca feature_pca(const torch::Tensor& patches, const PcaOptions& options, const FeaturePca* frozen) {
  torch::NoGradGuard no_grad;
  FeaturePca pca;
  pca.basis = frozen ? frozen->basis : fit_pca(patches, 3);
  pca.scores = pca_scores(pca.basis, patches);
  pca.low = frozen ? frozen->low : std::get<0>(pca.scores.min(0));
  pca.high = frozen ? frozen->high : std::get<0>(pca.scores.max(0));
  pca.rgb = min_max_columns(pca.scores, pca.low, pca.high).to(torch::kFloat);
  if (!options.foreground) return pca;

  pca.foreground = true;
  const torch::Tensor first = first_component_for_split(pca, options.flip);
  pca.threshold = frozen ? frozen->threshold : options.otsu ? otsu_threshold(first) : options.threshold;
  pca.foreground_mask = first > pca.threshold;
  const torch::Tensor kept = pca.foreground_mask.nonzero().view({-1});
  const torch::Tensor kept_patches = patches.index_select(0, kept.to(patches.device()));
  if (!frozen && kept.numel() < 4)
    throw std::invalid_argument("the foreground (first component above " + std::to_string(pca.threshold) + ") has " +
                                std::to_string(kept.numel()) +
                                " patches: too few for its own PCA; lower the threshold or flip the side");
  pca.foreground_basis = frozen ? frozen->foreground_basis : fit_pca(kept_patches, 3);
  const torch::Tensor kept_scores = pca_scores(pca.foreground_basis, kept_patches);
  pca.foreground_low = frozen ? frozen->foreground_low : std::get<0>(kept_scores.min(0));
  pca.foreground_high = frozen ? frozen->foreground_high : std::get<0>(kept_scores.max(0));
  pca.foreground_scores = torch::zeros_like(pca.scores);
  pca.foreground_rgb = torch::zeros_like(pca.rgb);
  if (kept.numel() > 0) {
    pca.foreground_scores.index_copy_(0, kept, kept_scores);
    pca.foreground_rgb.index_copy_(
        0, kept, min_max_columns(kept_scores, pca.foreground_low, pca.foreground_high).to(torch::kFloat));
  }
  return pca;
}

PcaOptions parse_pca_foreground(const std::string& text, bool flip) {
  PcaOptions options;
  options.flip = flip;
  if (text.empty() || text == "off") return options;
  options.foreground = true;
  if (text == "otsu") {
    options.otsu = true;
    return options;
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value >= 0.0 && value <= 1.0))
    throw std::invalid_argument(
        "--pca-foreground expects a threshold in [0, 1] on the min-max scaled first component, otsu, or off; got '" +
        excerpt(text) + "'");
  options.threshold = value;
  return options;
}

}  // namespace attnscope
