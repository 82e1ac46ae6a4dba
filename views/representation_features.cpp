#include "views/representation_features.h"

#include <torch/torch.h>

#include "core/excerpt.h"
#include "models/inference.h"

namespace attnscope {

torch::Tensor model_input(const LoadedModel& model, const RgbImage& prepared) {
  return image_to_tensor(prepared, model.normalization).to(model.device);
}

RgbImage prepared_image(const std::string& path, const InputSelection& input, const LoadedModel& model) {
  return prepare_model_input(load_image_rgb(path, input.max_pixels), input.input_settings(), model);
}

TokenRows layer_descriptors(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings, int layer,
                            Facet facet) {
  ForwardOutput output;
  std::vector<TokenRows> blocks = read_token_rows(model, image, settings, {block_point(layer)}, &output);
  if (facet == Facet::Token) return std::move(blocks.front());
  return facet_rows(output.layers.at(size_t(layer)), facet);
}

std::shared_ptr<const TokenRows> panel_token_rows(const AnalysisViewInput& input, const PanelForwardView& panel,
                                                  const std::string& point) {
  Backbone& model = panel.model->native("token features");
  const std::string resolved = model.resolve_hook_point(point);
  const std::string key = "tokens|" + panel.input_key + "|" + settings_key(panel.settings) + "|" + resolved;
  if (auto kept = input.cache.get<TokenRows>(key)) return kept;
  std::vector<TokenRows> read = read_token_rows(model, model_input(*panel.model, panel.result->input_rgb),
                                                panel.settings, {resolved}, nullptr, input.cancelled);
  auto rows = std::make_shared<const TokenRows>(std::move(read.front()));
  input.cache.put(key, rows);
  return rows;
}

std::shared_ptr<const TokenRows> panel_descriptors(const AnalysisViewInput& input, const PanelForwardView& panel,
                                                   int layer, Facet facet) {
  if (facet == Facet::Token) return panel_token_rows(input, panel, block_point(layer));
  const std::string key = "facet|" + panel.input_key + "|" + settings_key(panel.settings) + "|" +
                          std::to_string(layer) + "|" + enum_name(facet);
  if (auto kept = input.cache.get<TokenRows>(key)) return kept;
  auto rows = std::make_shared<const TokenRows>(facet_rows(panel.result->forward.layers.at(size_t(layer)), facet));
  input.cache.put(key, rows);
  return rows;
}

GridMap patch_grid_values(const torch::Tensor& patch_values, const TokenLayout& layout, int channel) {
  const torch::Tensor values = channel >= 0 ? patch_values.select(1, channel) : patch_values;
  return to_grid_map(values.reshape({layout.grid_h, layout.grid_w}));
}

}  // namespace attnscope
