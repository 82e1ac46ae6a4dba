#include "analysis/attribution_target.h"

#include <torch/torch.h>

namespace attnscope {

void check_target(const Backbone& model, int requested) {
  const int num_classes = model.num_classes();
  if (model.output_kind() == OutputKind::Logits && requested >= num_classes)
    throw std::invalid_argument("--class " + std::to_string(requested) + ": the model has " +
                                std::to_string(num_classes) + " classes (0.." + std::to_string(num_classes - 1) + ")");
}

AttributionTarget resolve_target(const Backbone& model, int requested, const torch::Tensor& output_row) {
  check_target(model, requested);
  const bool has_classes = model.output_kind() == OutputKind::Logits;
  if (requested >= output_row.size(0))
    throw std::invalid_argument("--class " + std::to_string(requested) + ": the " + to_string(model.output_kind()) +
                                " has " + std::to_string(output_row.size(0)) + " dimensions");
  AttributionTarget target;
  if (requested >= 0) {
    target.index = requested;
    target.chosen = "given";
  } else if (has_classes) {
    target.index = int(output_row.detach().argmax().item<int64_t>());
    target.chosen = "top-1";
  } else {
    target.index = -1;
    target.norm = true;
    target.chosen = "output norm";
  }
  return target;
}

torch::Tensor target_scores(const torch::Tensor& outputs, const AttributionTarget& target) {
  return target.norm ? outputs.norm(2, {1}) : outputs.select(1, target.index);
}

}  // namespace attnscope
