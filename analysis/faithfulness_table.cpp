#include "analysis/faithfulness_table.h"

#include <torch/torch.h>

namespace attnscope {

FaithfulnessTable faithfulness_table(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                     const Normalization& normalization, const FaithfulnessTableRequest& request) {
  if (request.methods.empty()) throw std::invalid_argument("--methods needs at least one method");
  const FaithfulnessProbe probe(model, image, settings, normalization, request.faithfulness);
  FaithfulnessTable table;
  table.target_class = probe.target_class();
  table.target = probe.target();
  table.probability = probe.probability();
  table.options = request.faithfulness;
  // One captured forward pass serves every attention-only method.
  std::vector<AttentionCapture> captures;
  {
    c10::InferenceMode inference;
    captures = model.forward(image, settings).layers;
  }
  for (size_t i = 0; i < request.methods.size(); ++i) {
    const AttributionMethod method = request.methods[i];
    if (request.progress) request.progress(to_string(method), i, request.methods.size());
    AttributionRequest attribution = request.attribution;
    attribution.method = method;
    attribution.target = table.target;  // the maps explain what the curves record
    MethodFaithfulness row;
    row.map = compute_attribution(model, image, settings, normalization, attribution, &captures);
    row.curves = probe.measure(row.map.map);
    table.methods.push_back(std::move(row));
  }
  if (request.progress) request.progress("random", request.methods.size(), request.methods.size());
  const TokenLayout& grid = table.methods.front().map.layout;
  table.random = probe.random_baseline(grid.grid_h, grid.grid_w);
  return table;
}

}  // namespace attnscope
