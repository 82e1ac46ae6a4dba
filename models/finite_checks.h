// NaN and Inf caught where they enter and before anything is drawn or written: a checkpoint's
// weights at load (a warning naming them), a forward pass's output (an error naming the first
// layer whose output is not finite), and any map or matrix a view or file is made from.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "models/backbone.h"

namespace attnscope {

// The names of the floating-point tensors that hold NaN or Inf, in name order.
std::vector<std::string> non_finite_tensors(const std::map<std::string, torch::Tensor>& tensors);

// "3 tensors hold NaN or Inf: a, b, c" (at most 6 named), or "" for none.
std::string describe_non_finite(const std::vector<std::string>& names);

// Throws std::runtime_error when `output` is not finite. For a model attnscope computes itself
// (not null, computes_attention()), the forward pass is run again with a hook to name the first
// hook point whose output is not finite, and the message names the parameters that hold NaN or Inf.
void require_finite_output(Backbone* model, const torch::Tensor& input, const AttentionSettings& settings,
                           const torch::Tensor& output);

// Throws std::runtime_error("<what> is not finite (NaN or Inf)...") when `values` are not.
void require_finite(const torch::Tensor& values, const std::string& what);

}  // namespace attnscope
