#include "analysis/focusing.h"

#include <torch/torch.h>

#include <cmath>

#include "models/attention_kernels.h"

namespace attnscope {

torch::Tensor focus_rows(const torch::Tensor& vectors, double p) {
  if (!(p > 0)) throw std::invalid_argument("f_p needs p > 0, got " + std::to_string(p));
  auto x = torch::relu(vectors.detach().to(torch::kDouble));
  // Scaled by the largest entry first, as in models/attention_kernels.cpp: no overflow at any p.
  auto powered = (x / x.amax({-1}, /*keepdim=*/true).clamp_min(1e-300)).pow(p);
  auto powered_norm = powered.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-300);
  return (powered / powered_norm * x.norm(2, {-1}, /*keepdim=*/true)).to(vectors.scalar_type());
}

torch::Tensor quarter_circle_vectors(int count) {
  if (count < 2) throw std::invalid_argument("quarter_circle_vectors needs at least 2 vectors");
  auto angle = torch::linspace(0.0, M_PI / 2, count, torch::kDouble);
  return torch::stack({angle.cos(), angle.sin()}, 1);
}

torch::Tensor octant_vectors(int count) {
  if (count < 1) throw std::invalid_argument("octant_vectors needs at least 1 vector");
  // Fibonacci lattice on the octant: z evenly spaced in (0, 1), azimuth by the golden angle folded into 90 degrees.
  const double golden = M_PI * (3.0 - std::sqrt(5.0));
  auto result = torch::empty({count, 3}, torch::kDouble);
  auto at = result.accessor<double, 2>();
  for (int i = 0; i < count; ++i) {
    const double z = (i + 0.5) / count;
    const double radius = std::sqrt(1.0 - z * z);
    const double azimuth = std::fmod(i * golden, M_PI / 2);
    at[i][0] = radius * std::cos(azimuth);
    at[i][1] = radius * std::sin(azimuth);
    at[i][2] = z;
  }
  return result;
}

torch::Tensor nearest_axis_cosine(const torch::Tensor& vectors) {
  auto x = vectors.detach().to(torch::kDouble);
  return std::get<0>(x.max(-1)) / x.norm(2, {-1}).clamp_min(1e-300);
}

ScoreExample focus_scores(const torch::Tensor& query, const torch::Tensor& keys, double p) {
  if (query.dim() != 1 || keys.dim() != 2 || keys.size(1) != query.size(0))
    throw std::invalid_argument("focus_scores: query [d] and keys [n, d] expected");
  ScoreExample example;
  example.query = query.to(torch::kDouble);
  example.keys = keys.to(torch::kDouble);
  auto normalised = [](const torch::Tensor& scores) { return scores / scores.sum(); };
  example.before = normalised(torch::matmul(torch::relu(example.keys), torch::relu(example.query)));
  example.after = normalised(torch::matmul(focus_rows(example.keys, p), focus_rows(example.query.unsqueeze(0), p)[0]));
  return example;
}

ScoreExample example_focus_scores(double p) {
  auto query = torch::tensor({0.45, 0.02, 0.97}, torch::kDouble);
  auto keys = torch::tensor({0.15, 0.79, 0.94,  //
                             0.35, 0.63, 0.36,  //
                             1.00, 0.51, 0.25,  //
                             0.37, 0.78, 0.32},
                            torch::kDouble)
                  .view({4, 3});
  return focus_scores(query, keys, p);
}

namespace {

// Mean entropy and top-k mass of the rows of S / rowsum(S) for non-negative scores S [Q, T].
std::pair<double, double> row_focus(const torch::Tensor& scores, int top_k) {
  auto rows = scores / scores.sum(-1, /*keepdim=*/true).clamp_min(1e-300);
  auto entropy = -(rows * rows.clamp_min(1e-300).log()).sum(-1);
  const int64_t k = std::min<int64_t>(top_k, rows.size(-1));
  auto top = std::get<0>(rows.topk(k, -1)).sum(-1);
  return {entropy.mean().item<double>(), top.mean().item<double>()};
}

torch::Tensor cosine_histogram(const torch::Tensor& queries, const torch::Tensor& keys, int bins) {
  auto unit_q = queries / queries.norm(2, {-1}, true).clamp_min(1e-300);
  auto unit_k = keys / keys.norm(2, {-1}, true).clamp_min(1e-300);
  auto cosine = torch::matmul(unit_q, unit_k.transpose(0, 1)).clamp(0.0, 1.0).reshape({-1});
  auto bin = (cosine * bins).to(torch::kLong).clamp_max(bins - 1);
  return torch::bincount(bin, {}, bins);
}

}  // namespace

FocusFeatures focus_features(const AttentionCapture& layer, int64_t batch) {
  if (!layer.q.defined() && !layer.features.q_before_focus.defined())
    throw std::invalid_argument("f_p needs the layer's q and k; this model reports only attention probabilities");
  FocusFeatures features;
  if (layer.features.q_before_focus.defined()) {
    features.q = layer.features.q_before_focus;
    features.k = layer.features.k_before_focus;
    features.source = "the focused kernel's own features (ReLU(x) + 1e-6) / softplus(scale), before f_p";
  } else {
    features.q = torch::relu(layer.q) + 1e-6;
    features.k = torch::relu(layer.k) + 1e-6;
    features.source = "ReLU(x) + 1e-6 of the captured q and k";
  }
  features.q = features.q.index({torch::indexing::Slice(batch, batch + 1)}).to(torch::kCPU, torch::kDouble);
  features.k = features.k.index({torch::indexing::Slice(batch, batch + 1)}).to(torch::kCPU, torch::kDouble);
  return features;
}

FocusStudy study_focusing(const AttentionCapture& whole, int64_t head, const FocusStudyOptions& options,
                          int64_t batch) {
  torch::NoGradGuard no_grad;
  if (head < 0 || head >= whole.heads) throw std::out_of_range("head " + std::to_string(head) + " does not exist");
  const AttentionCapture& layer = whole.for_head(head);  // CSwin: the branch that holds the head
  if (options.histogram_bins < 1) throw std::invalid_argument("study_focusing: histogram_bins must be >= 1");
  FocusStudy study;
  FocusFeatures features = focus_features(layer, batch);  // [1, h, T, d], all heads (all-channel norms need them)
  const torch::Tensor q = features.q, k = features.k;
  study.source = features.source;
  const FocusNorm norm = layer.attention.norm;
  auto head_of = [head](const torch::Tensor& t) { return t[0][head]; };  // [T, d]

  const auto q_before = head_of(q), k_before = head_of(k);
  const auto q_after = head_of(focus(q, options.p, norm)), k_after = head_of(focus(k, options.p, norm));
  study.histogram_before = cosine_histogram(q_before, k_before, options.histogram_bins);
  study.histogram_after = cosine_histogram(q_after, k_after, options.histogram_bins);

  const int64_t dim = q_before.size(1);
  auto vectors_before = torch::cat({q_before, k_before});
  auto vectors_after = torch::cat({q_after, k_after});
  auto axis = vectors_before.argmax(-1);
  study.axis_counts = torch::bincount(axis, {}, dim);
  auto counts = study.axis_counts.to(torch::kDouble).clamp_min(1.0);
  auto mean_by_axis = [&](const torch::Tensor& values) {
    return torch::zeros({dim}, torch::kDouble).index_add_(0, axis, values) / counts;
  };
  study.axis_cosine_before = mean_by_axis(nearest_axis_cosine(vectors_before));
  study.axis_cosine_after = mean_by_axis(nearest_axis_cosine(vectors_after));

  for (double p : options.curve_ps) {
    if (!(p > 0)) throw std::invalid_argument("study_focusing: every p must be > 0");
    auto scores = torch::matmul(head_of(focus(q, p, norm)), head_of(focus(k, p, norm)).transpose(0, 1));
    const auto [entropy, top_mass] = row_focus(scores, options.top_k);
    study.curve_ps.push_back(p);
    study.entropy.push_back(entropy);
    study.top_k_mass.push_back(top_mass);
  }
  return study;
}

}  // namespace attnscope
