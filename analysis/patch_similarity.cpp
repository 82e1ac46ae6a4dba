#include "analysis/patch_similarity.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace attnscope {

namespace {

constexpr double kCosineEps = 1e-8;  // torch.nn.CosineSimilarity's default

// Rows divided by their norms, each norm at least eps: how torch's cosine_similarity normalises.
torch::Tensor unit_rows(const torch::Tensor& rows) { return rows / rows.norm(2, -1, true).clamp_min(kCosineEps); }

void check_descriptors(const torch::Tensor& first, const torch::Tensor& second) {
  if (first.dim() != 2 || second.dim() != 2 || first.size(1) != second.size(1))
    throw std::invalid_argument("descriptors of different widths cannot be compared: [" +
                                std::to_string(first.size(-1)) + "] and [" + std::to_string(second.size(-1)) + "]");
}

}  // namespace

torch::Tensor cosine_similarity_to(const torch::Tensor& query, const torch::Tensor& rows) {
  const torch::Tensor one = query.reshape({1, -1});
  check_descriptors(one, rows);
  torch::NoGradGuard no_grad;
  const auto as_float = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat); };
  return (unit_rows(as_float(rows)) * unit_rows(as_float(one))).sum(-1).contiguous();
}

torch::Tensor cosine_similarity_matrix(const torch::Tensor& first, const torch::Tensor& second) {
  check_descriptors(first, second);
  torch::NoGradGuard no_grad;
  const auto as_double = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kDouble); };
  return torch::matmul(unit_rows(as_double(first)), unit_rows(as_double(second)).t());
}

std::vector<BestBuddy> best_buddies(const torch::Tensor& first, const torch::Tensor& second) {
  const torch::Tensor similarity = cosine_similarity_matrix(first, second);
  const torch::Tensor nearest_in_second = similarity.argmax(1).contiguous();  // for each row of first
  const torch::Tensor nearest_in_first = similarity.argmax(0).contiguous();   // for each row of second
  const int64_t* forward = nearest_in_second.data_ptr<int64_t>();
  const int64_t* backward = nearest_in_first.data_ptr<int64_t>();
  const auto values = similarity.accessor<double, 2>();
  std::vector<BestBuddy> pairs;
  for (int64_t i = 0; i < first.size(0); ++i)
    if (backward[forward[i]] == i) pairs.push_back({int(i), int(forward[i]), values[i][forward[i]]});
  return pairs;
}

std::string second_image_cost_note(int second_width, int second_height, int64_t first_pixels, double first_seconds) {
  const double ratio = double(second_width) * second_height / std::max<double>(1.0, double(first_pixels));
  const double at_least = first_seconds * ratio;
  if (at_least < 5.0) return "";
  std::ostringstream line;
  line << std::fixed << std::setprecision(0) << "--image2 is " << second_width << "x" << second_height << " px, "
       << std::setprecision(1) << ratio << "x the pixels of the first image (whose forward took "
       << std::setprecision(2) << first_seconds << " s): its forward takes at least " << std::setprecision(0)
       << std::ceil(at_least) << " s, more where attention's work (the square of that ratio) dominates";
  return line.str();
}

}  // namespace attnscope
