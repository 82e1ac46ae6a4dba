// The high-norm tokens of "Vision Transformers Need Registers" (Darcet et al. 2024): the L2 norm of
// every token of every block's output, the patch tokens far above the rest (Otsu's split of the log
// norms where it is above sqrt(10) x the median, or a given threshold), how much the class token attends to them, and
// whether they still resemble their neighbours (outliers that lost their local information do not).
#pragma once

#include <torch/types.h>

#include <vector>

#include "analysis/token_features.h"

namespace attnscope {

// [T] float32 per block: the L2 norm of each of its output tokens, in the model's token order.
std::vector<torch::Tensor> token_norms(const std::vector<TokenRows>& blocks);

// exp of Otsu's threshold (scikit-image's threshold_otsu) on the log norms: where a heavy upper tail
// of a few tokens parts from the bulk.
double otsu_norm_threshold(const torch::Tensor& norms);

// Darcet et al.'s high-norm tokens are about ten times the median norm. Otsu always splits in two,
// also a model without such tokens; a split counts only above sqrt(10) x the median, the geometric
// midpoint between a typical token and a high-norm one, so that none are reported when there are none.
constexpr double kHighNormMedianRatio = 3.1622776601683795;  // sqrt(10)

// The outlier threshold of `norms` (the last block's patch norms): the larger of Otsu's threshold
// and kHighNormMedianRatio x the median (the lower middle value for an even count, as torch.median).
struct HighNormThreshold {
  double norm = 0, otsu = 0, median_floor = 0;
  bool by_otsu() const { return otsu >= median_floor; }
};
HighNormThreshold high_norm_threshold(const torch::Tensor& norms);

struct NormOutlier {
  int layer = 0, token = 0;
  int row = -1, col = -1;  // on the block's grid
  float norm = 0.0f;
};

// The patch tokens of every block whose norm exceeds `threshold`, block by block, in token order.
std::vector<NormOutlier> norm_outliers(const std::vector<torch::Tensor>& norms, const std::vector<TokenLayout>& layouts,
                                       double threshold);

// Per attention layer: the class token's attention, averaged over heads, summed over `tokens`
// (indices of the layer's key tokens). Empty when the layers have no class token or their keys are
// other tokens than `layout`'s.
std::vector<double> class_attention_mass(const std::vector<AttentionCapture>& layers, const TokenLayout& layout,
                                         const std::vector<int>& tokens);

// Per token of `tokens` (patch tokens of `block`): the mean cosine similarity of its row with those
// of its up to 4 grid neighbours (above, below, left, right).
std::vector<double> neighbour_similarity(const TokenRows& block, const std::vector<int>& tokens);

}  // namespace attnscope
