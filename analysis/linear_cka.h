// Linear CKA between every block of two models on the same images (Kornblith et al. 2019; Raghu et
// al. 2021 compare ViTs and CNNs this way): the biased full-batch estimator of google-research's
// representation_similarity demo, cka(gram_linear(X), gram_linear(Y)), and for folders whose
// features do not fit in memory the unbiased minibatch estimator of Nguyen et al. 2021.
#pragma once

#include "core/enum_names.h"

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "models/backbone.h"

namespace attnscope {

// Every attention block's residual output for one image [1, 3, H, W], each flattened over its
// tokens (class token included) and channels: one CPU float32 vector per block, in block order.
std::vector<torch::Tensor> block_outputs(Backbone& model, const torch::Tensor& image,
                                         const AttentionSettings& settings);

// X X^T of examples in rows [n, D], in float64.
torch::Tensor gram_linear(const torch::Tensor& features);
// The demo's cka(gram_x, gram_y): both Gram matrices centred (H K H), then
// <K, L>_F / (||K||_F ||L||_F).
double linear_cka(const torch::Tensor& gram_x, const torch::Tensor& gram_y);
// Song et al.'s unbiased HSIC estimator of two Gram matrices of the same n >= 4 examples (the
// diagonals are dropped): HSIC_1 as Nguyen et al. sum it over minibatches.
double unbiased_hsic(const torch::Tensor& gram_x, const torch::Tensor& gram_y);

enum class CkaEstimator { Full, Minibatch };
template <>
struct EnumTable<CkaEstimator> {
  static const std::vector<EnumEntry<CkaEstimator>>& entries();
};
std::string to_string(CkaEstimator estimator);  // what the outputs name it as
CkaEstimator parse_cka_estimator(const std::string& name);

// CKA of every block of model A against every block of model B, from one image at a time.
class CkaAccumulator {
 public:
  // Full: every example's features are kept until result(); `memory_limit` bytes of them at most.
  // Minibatch: the HSIC terms of each batch of `batch` images are summed; a last batch of fewer
  // than 4 images is left out (the estimator needs 4), and result() says how many were.
  CkaAccumulator(CkaEstimator estimator, int batch, double memory_limit = 4e9);

  // One image's block outputs from each model (block_outputs). Throws std::invalid_argument when a
  // block's size differs from the first image's, or the full estimator would exceed its memory.
  void add(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);
  // [LA, LB] float64. Throws std::invalid_argument with fewer than 3 images (or 4 for minibatches),
  // or when a block's features do not vary across the images (CKA is then 0/0).
  torch::Tensor result();

  CkaEstimator estimator() const { return estimator_; }
  int batch() const { return batch_; }
  int images() const { return images_; }
  int images_left_out() const { return left_out_; }

 private:
  void flush_batch();

  CkaEstimator estimator_;
  int batch_;
  double memory_limit_;
  int images_ = 0, left_out_ = 0;
  double bytes_ = 0;
  // Pending examples: per block, one flat vector per image (every image for the full estimator).
  std::vector<std::vector<torch::Tensor>> pending_a_, pending_b_;
  // Minibatch sums: HSIC(K_a, L_b) [LA, LB], HSIC(K_a, K_a) [LA], HSIC(L_b, L_b) [LB].
  torch::Tensor cross_, self_a_, self_b_;
};

}  // namespace attnscope
