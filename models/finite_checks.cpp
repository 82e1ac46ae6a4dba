#include "models/finite_checks.h"

#include <stdexcept>

namespace attnscope {

namespace {

bool all_finite(const torch::Tensor& values) {
  return !values.is_floating_point() || values.numel() == 0 || torch::isfinite(values).all().item<bool>();
}

}  // namespace

std::vector<std::string> non_finite_tensors(const std::map<std::string, torch::Tensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tensors)
    if (!all_finite(tensor)) names.push_back(name);
  return names;
}

std::string describe_non_finite(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string text =
      std::to_string(names.size()) + (names.size() == 1 ? " tensor holds" : " tensors hold") + " NaN or Inf: ";
  for (size_t i = 0; i < names.size() && i < 6; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 6) text += ", ...";
  return text;
}

void require_finite_output(Backbone* model, const torch::Tensor& input, const AttentionSettings& settings,
                           const torch::Tensor& output) {
  if (all_finite(output)) return;
  std::string where, weights;
  if (model && model->computes_attention()) {
    std::map<std::string, torch::Tensor> parameters;
    for (const auto& item : model->named_parameters()) parameters[item.key()] = item.value();
    for (const auto& item : model->named_buffers()) parameters[item.key()] = item.value();
    const std::string note = describe_non_finite(non_finite_tensors(parameters));
    weights = note.empty() ? "; the weights are finite: the activations overflow float32"
                           : "; the checkpoint's " + note + ": the file is damaged";
    // The output is already lost; one more pass, this time watching every block, names the culprit.
    std::string first;
    ForwardOptions options;
    options.capture = false;
    options.hook = [&first](const HookPoint& point, torch::Tensor& value) {
      if (first.empty() && !all_finite(value)) first = point.name;
    };
    model->forward(input, settings, options);
    where = first.empty() ? " (every block's output is finite: the head makes it)" : " from " + first + " on";
  }
  throw std::runtime_error("the model's output is not finite (NaN or Inf)" + where + weights +
                           "; nothing was drawn or written");
}

void require_finite(const torch::Tensor& values, const std::string& what) {
  if (!all_finite(values)) throw std::runtime_error(what + " is not finite (NaN or Inf): nothing was drawn or written");
}

}  // namespace attnscope
