#include "analysis/token_norms.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "analysis/feature_pca.h"
#include "analysis/patch_similarity.h"

namespace attnscope {

std::vector<torch::Tensor> token_norms(const std::vector<TokenRows>& blocks) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const TokenRows& block : blocks) norms.push_back(block.rows.norm(2, 1).contiguous());
  return norms;
}

double otsu_norm_threshold(const torch::Tensor& norms) {
  return std::exp(otsu_threshold(norms.to(torch::kDouble).clamp_min(1e-30).log()));
}

HighNormThreshold high_norm_threshold(const torch::Tensor& norms) {
  HighNormThreshold threshold;
  threshold.otsu = otsu_norm_threshold(norms);
  threshold.median_floor = kHighNormMedianRatio * norms.to(torch::kDouble).median().item<double>();
  threshold.norm = std::max(threshold.otsu, threshold.median_floor);
  return threshold;
}

std::vector<NormOutlier> norm_outliers(const std::vector<torch::Tensor>& norms, const std::vector<TokenLayout>& layouts,
                                       double threshold) {
  std::vector<NormOutlier> outliers;
  for (size_t layer = 0; layer < norms.size(); ++layer) {
    const TokenLayout& layout = layouts[layer];
    const torch::Tensor values = norms[layer].to(torch::kFloat).contiguous();
    const float* data = values.data_ptr<float>();
    for (int token = layout.prefix_tokens(); token < layout.total_tokens(); ++token)
      if (double(data[token]) > threshold)
        outliers.push_back({int(layer), token, layout.row_of(token), layout.col_of(token), data[token]});
  }
  return outliers;
}

std::vector<double> class_attention_mass(const std::vector<AttentionCapture>& layers, const TokenLayout& layout,
                                         const std::vector<int>& tokens) {
  if (!layout.has_class_token) return {};
  std::vector<int64_t> keys(tokens.begin(), tokens.end());
  std::vector<double> mass;
  for (const AttentionCapture& layer : layers) {
    if (!layer.layout.has_class_token || layer.key_layout.total_tokens() != layout.total_tokens()) return {};
    double sum = 0.0;
    for (int head = 0; head < layer.heads; ++head) {
      const torch::Tensor row = layer.row(0, head, 0).to(torch::kCPU, torch::kDouble);
      if (!keys.empty()) sum += row.index_select(0, torch::tensor(keys)).sum().item<double>();
    }
    mass.push_back(sum / std::max(layer.heads, 1));
  }
  return mass;
}

std::vector<double> neighbour_similarity(const TokenRows& block, const std::vector<int>& tokens) {
  const TokenLayout& layout = block.layout;
  std::vector<double> means;
  for (int token : tokens) {
    const int row = layout.row_of(token), col = layout.col_of(token);
    std::vector<int64_t> neighbours;
    const int steps[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};
    for (const auto& step : steps) {
      const int r = row + step[0], c = col + step[1];
      if (r >= 0 && r < layout.grid_h && c >= 0 && c < layout.grid_w) neighbours.push_back(layout.patch_token(r, c));
    }
    if (neighbours.empty()) {
      means.push_back(std::nan(""));  // a 1x1 grid
      continue;
    }
    const torch::Tensor similarity =
        cosine_similarity_to(block.rows[token], block.rows.index_select(0, torch::tensor(neighbours)));
    means.push_back(similarity.to(torch::kDouble).mean().item<double>());
  }
  return means;
}

}  // namespace attnscope
