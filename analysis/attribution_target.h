// What an attribution explains: a class logit, or on models without classes (CLIP's embedding,
// DINOv2's features) one output dimension or the output's L2 norm. Checked and resolved once for
// every method, with the same messages.
#pragma once

#include <torch/types.h>

#include <string>

#include "models/backbone.h"

namespace attnscope {

struct AttributionTarget {
  int index = 0;       // the class or output dimension; -1 with `norm`
  bool norm = false;   // the output's L2 norm (models without classes, --class -1)
  std::string chosen;  // "given", "top-1" or "output norm"
};

// Throws std::invalid_argument ("--class C: the model has K classes") for a class the model does
// not have; `requested` -1 means the top-1 class (or the norm without classes).
void check_target(const Backbone& model, int requested);

// The target for `requested` given the output row [K] of the unperturbed image.
AttributionTarget resolve_target(const Backbone& model, int requested, const torch::Tensor& output_row);

// The differentiated score per batch item: outputs [B, K] -> [B] (a logit, a dimension or the norm).
torch::Tensor target_scores(const torch::Tensor& outputs, const AttributionTarget& target);

}  // namespace attnscope
