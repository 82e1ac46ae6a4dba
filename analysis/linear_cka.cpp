#include "analysis/linear_cka.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

std::vector<torch::Tensor> block_outputs(Backbone& model, const torch::Tensor& image,
                                         const AttentionSettings& settings) {
  const int blocks = model.attention_layers();
  std::map<std::string, int> block_of;  // canonical hook point name -> block index
  for (int block = 0; block < blocks; ++block)
    block_of[model.resolve_hook_point("blocks." + std::to_string(block))] = block;
  std::vector<torch::Tensor> outputs(static_cast<size_t>(blocks));
  c10::InferenceMode inference_mode;
  ForwardOptions options;
  options.capture = false;
  options.hook = [&](const HookPoint& point, torch::Tensor& value) {
    const auto found = block_of.find(point.name);
    if (found == block_of.end()) return;
    outputs[size_t(found->second)] = value[0].reshape({-1}).to(torch::kCPU, torch::kFloat).clone();
  };
  model.forward(image, settings, options);
  for (int block = 0; block < blocks; ++block)
    if (!outputs[size_t(block)].defined())
      throw std::logic_error("the forward pass never reached block " + std::to_string(block));
  return outputs;
}

torch::Tensor gram_linear(const torch::Tensor& features) {
  const torch::Tensor x = features.to(torch::kDouble);
  return torch::matmul(x, x.t());
}

namespace {

// The demo's center_gram (biased): subtract the column means, and the row means, adding back the
// grand mean, i.e. H K H with H = I - 11^T / n.
torch::Tensor centred_gram(const torch::Tensor& gram) {
  torch::Tensor means = gram.mean(0);
  means = means - means.mean() / 2;
  return gram - means.unsqueeze(1) - means.unsqueeze(0);
}

torch::Tensor without_diagonal(const torch::Tensor& gram) { return gram - torch::diag(torch::diag(gram)); }

// Refuses a block whose features are the same for every image: its centred Gram matrix is zero
// and CKA 0/0. The features are float32, so variation below their resolution (2^-24 of the Gram's
// size) is rounding of the float64 centring, not a difference between the images.
void require_variation(const std::vector<torch::Tensor>& grams, const char* model, int images) {
  for (size_t block = 0; block < grams.size(); ++block) {
    const double spread = centred_gram(grams[block]).norm().item<double>();
    const double size = grams[block].norm().item<double>();
    if (!(spread > std::ldexp(size, -24)))
      throw std::invalid_argument(
          "CKA is undefined: block " + std::to_string(block) + " of " + model + " gives the same features for all " +
          std::to_string(images) +
          " images (CKA compares how features vary across images; these do not vary): give a folder of different "
          "images");
  }
}

}  // namespace

double linear_cka(const torch::Tensor& gram_x, const torch::Tensor& gram_y) {
  const torch::Tensor x = centred_gram(gram_x.to(torch::kDouble)), y = centred_gram(gram_y.to(torch::kDouble));
  return ((x * y).sum() / (x.norm() * y.norm())).item<double>();
}

double unbiased_hsic(const torch::Tensor& gram_x, const torch::Tensor& gram_y) {
  const double n = double(gram_x.size(0));
  if (n < 4) throw std::invalid_argument("the unbiased HSIC needs at least 4 examples");
  const torch::Tensor x = without_diagonal(gram_x.to(torch::kDouble)), y = without_diagonal(gram_y.to(torch::kDouble));
  const double trace = (x * y).sum().item<double>();
  const double sums = x.sum().item<double>() * y.sum().item<double>() / ((n - 1) * (n - 2));
  const double rows = 2.0 / (n - 2) * torch::dot(x.sum(0), y.sum(0)).item<double>();
  return (trace + sums - rows) / (n * (n - 3));
}

const std::vector<EnumEntry<CkaEstimator>>& EnumTable<CkaEstimator>::entries() {
  static const std::vector<EnumEntry<CkaEstimator>> table = {{CkaEstimator::Full, "full"},
                                                             {CkaEstimator::Minibatch, "minibatch"}};
  return table;
}

std::string to_string(CkaEstimator estimator) { return enum_name(estimator); }

CkaEstimator parse_cka_estimator(const std::string& name) { return parse_enum<CkaEstimator>("cka-estimator", name); }

CkaAccumulator::CkaAccumulator(CkaEstimator estimator, int batch, double memory_limit)
    : estimator_(estimator), batch_(batch), memory_limit_(memory_limit) {
  if (estimator == CkaEstimator::Minibatch && batch < 4)
    throw std::invalid_argument("--cka-batch must be at least 4 (the unbiased estimator needs 4 examples)");
}

void CkaAccumulator::add(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  auto append = [&](std::vector<std::vector<torch::Tensor>>& pending, const std::vector<torch::Tensor>& blocks,
                    const char* model) {
    if (pending.empty()) pending.resize(blocks.size());
    if (pending.size() != blocks.size())
      throw std::invalid_argument(std::string("model ") + model + " gave " + std::to_string(blocks.size()) +
                                  " blocks on this image, " + std::to_string(pending.size()) + " before");
    for (size_t block = 0; block < blocks.size(); ++block) {
      auto& examples = pending[block];
      if (!examples.empty() && examples.front().numel() != blocks[block].numel())
        throw std::invalid_argument(std::string("block ") + std::to_string(block) + " of model " + model + " has " +
                                    std::to_string(blocks[block].numel()) + " features on this image, " +
                                    std::to_string(examples.front().numel()) +
                                    " on the first: CKA compares the same features (give the images one size)");
      examples.push_back(blocks[block]);
      bytes_ += double(blocks[block].numel()) * 4.0;
    }
  };
  append(pending_a_, a, "A");
  append(pending_b_, b, "B");
  ++images_;
  if (estimator_ == CkaEstimator::Full && bytes_ > memory_limit_)
    throw std::invalid_argument(
        "the full CKA estimator keeps every image's block outputs: " + std::to_string(int(bytes_ / 1e6)) +
        " MB after " + std::to_string(images_) + " images is over its limit; use --cka-estimator minibatch");
  if (estimator_ == CkaEstimator::Minibatch && int(pending_a_.front().size()) == batch_) flush_batch();
}

void CkaAccumulator::flush_batch() {
  auto grams = [](const std::vector<std::vector<torch::Tensor>>& pending) {
    std::vector<torch::Tensor> result;
    for (const auto& examples : pending) result.push_back(gram_linear(torch::stack(examples)));
    return result;
  };
  const std::vector<torch::Tensor> grams_a = grams(pending_a_), grams_b = grams(pending_b_);
  const int64_t layers_a = int64_t(grams_a.size()), layers_b = int64_t(grams_b.size());
  torch::Tensor cross = torch::empty({layers_a, layers_b}, torch::kDouble);
  torch::Tensor self_a = torch::empty({layers_a}, torch::kDouble), self_b = torch::empty({layers_b}, torch::kDouble);
  for (int64_t i = 0; i < layers_a; ++i) {
    self_a[i] = unbiased_hsic(grams_a[size_t(i)], grams_a[size_t(i)]);
    for (int64_t j = 0; j < layers_b; ++j) cross[i][j] = unbiased_hsic(grams_a[size_t(i)], grams_b[size_t(j)]);
  }
  for (int64_t j = 0; j < layers_b; ++j) self_b[j] = unbiased_hsic(grams_b[size_t(j)], grams_b[size_t(j)]);
  // Out of place: a copy of this accumulator (a paused run's) keeps its own sums.
  cross_ = cross_.defined() ? cross_ + cross : cross;
  self_a_ = self_a_.defined() ? self_a_ + self_a : self_a;
  self_b_ = self_b_.defined() ? self_b_ + self_b : self_b;
  for (auto& examples : pending_a_) examples.clear();
  for (auto& examples : pending_b_) examples.clear();
}

torch::Tensor CkaAccumulator::result() {
  if (estimator_ == CkaEstimator::Full) {
    // Two centred examples are x and -x: every pair of blocks that varies at all gives CKA 1.
    if (images_ < 3)
      throw std::invalid_argument("CKA needs at least 3 images, got " + std::to_string(images_) +
                                  (images_ == 2 ? " (over 2 images every pair of blocks gives 1)" : ""));
    std::vector<torch::Tensor> grams_a, grams_b;
    for (const auto& examples : pending_a_) grams_a.push_back(gram_linear(torch::stack(examples)));
    for (const auto& examples : pending_b_) grams_b.push_back(gram_linear(torch::stack(examples)));
    require_variation(grams_a, "the first model (--model)", images_);
    require_variation(grams_b, "the second model (--compare-model)", images_);
    torch::Tensor cka = torch::empty({int64_t(grams_a.size()), int64_t(grams_b.size())}, torch::kDouble);
    for (size_t i = 0; i < grams_a.size(); ++i)
      for (size_t j = 0; j < grams_b.size(); ++j) cka[int64_t(i)][int64_t(j)] = linear_cka(grams_a[i], grams_b[j]);
    return cka;
  }
  const int remaining = pending_a_.empty() ? 0 : int(pending_a_.front().size());
  if (remaining >= 4) {
    flush_batch();
  } else if (remaining > 0) {
    left_out_ = remaining;
    for (auto& examples : pending_a_) examples.clear();
    for (auto& examples : pending_b_) examples.clear();
  }
  if (!cross_.defined())
    throw std::invalid_argument("the minibatch CKA needs at least 4 images, got " + std::to_string(images_));
  const torch::Tensor cka = cross_ / torch::sqrt(self_a_.unsqueeze(1) * self_b_.unsqueeze(0));
  if (!torch::isfinite(cka).all().item<bool>())
    throw std::invalid_argument(
        "CKA is undefined: some block gives the same features for every image of a batch "
        "(CKA compares how features vary across images; these do not vary): give a folder "
        "of different images");
  return cka;
}

}  // namespace attnscope
