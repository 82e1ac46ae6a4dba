// Switches a module's parameters out of autograd for a scope: attributions differentiate the output
// with respect to activations, inputs or attention, never weights, so no weight gradient is formed.
#pragma once

#include <torch/nn/module.h>

#include <vector>

namespace attnscope {

// Switches every parameter's requires_grad off for a scope and restores what it was.
class FrozenParameters {
 public:
  explicit FrozenParameters(torch::nn::Module& module) : parameters_(module.parameters()) {
    for (auto& parameter : parameters_) {
      was_required_.push_back(parameter.requires_grad());
      parameter.set_requires_grad(false);
    }
  }
  ~FrozenParameters() {
    for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].set_requires_grad(was_required_[i]);
  }
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<bool> was_required_;
};

}  // namespace attnscope
