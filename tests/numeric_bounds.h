// Comparisons of computed tensors against independent references, and the error bounds that follow
// from a computation's conditioning (float32 rounding amplified by what the computation divides by
// or sums over), so that a test holds whichever BLAS kernels the machine picks.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace attnscope {

inline double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// The first-order worst-case error of y = f(x_1, ..., x_k) when every element of input i may be off
// by up to radius[i] (broadcastable to x_i): for each element of y, sum_i |dy/dx_i| . radius_i.
// f runs in float64 at `point`, so the bound describes the computation's conditioning there (large
// where it divides by a near-zero sum), not the rounding of the machine the test runs on.
inline torch::Tensor first_order_error(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                       const std::vector<torch::Tensor>& point,
                                       const std::vector<torch::Tensor>& radius) {
  torch::AutoGradMode autograd(true);
  std::vector<torch::Tensor> inputs;
  for (const auto& x : point) inputs.push_back(x.detach().to(torch::kDouble).clone().requires_grad_(true));
  const torch::Tensor y = f(inputs);
  const torch::Tensor flat = y.reshape({-1});
  torch::Tensor bound = torch::zeros({flat.numel()}, torch::kDouble);
  for (int64_t k = 0; k < flat.numel(); ++k) {
    const auto gradients = torch::autograd::grad({flat[k]}, inputs, {}, /*retain_graph=*/true,
                                                 /*create_graph=*/false, /*allow_unused=*/true);
    double total = 0.0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (gradients[i].defined()) total += (gradients[i].abs() * radius[i].to(torch::kDouble)).sum().item<double>();
    bound[k] = total;
  }
  return bound.reshape(y.sizes());
}

// The numerical ranks (singular values above `tolerance`) a matrix may have when each of its singular
// values may be off by up to `radius`: by Weyl's inequality a perturbation E moves every singular
// value by at most ||E||_2. The count is exact where no value lies within `radius` of the tolerance;
// a value that close may fall either side on another machine's kernels.
struct RankRange {
  int low = 0, high = 0;
};
inline RankRange possible_ranks(const torch::Tensor& singular_values, double tolerance, double radius) {
  const torch::Tensor values = singular_values.to(torch::kDouble);
  return {int((values > tolerance + radius).sum().item<int64_t>()),
          int((values > tolerance - radius).sum().item<int64_t>())};
}

// How far two float32 SVDs of nearly the same M x N matrix may put its singular values: their
// measured distance (which Weyl bounds by the matrices' difference) plus each side's own rounding
// (LAPACK's SVD is backward stable: the values of A + E with ||E|| <= max(M, N) u ||A||).
inline double singular_value_radius(const torch::Tensor& ours, const torch::Tensor& reference, int64_t rows,
                                    int64_t cols) {
  const int64_t count = std::min(ours.numel(), reference.numel());
  const double largest = reference.to(torch::kDouble).abs().max().item<double>();
  return max_abs_difference(ours.slice(0, 0, count), reference.slice(0, 0, count)) +
         2.0 * double(std::max(rows, cols)) * std::ldexp(1.0, -24) * largest;
}

}  // namespace attnscope
