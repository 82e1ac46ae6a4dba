#include "views/attribution_view.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/attribution.h"
#include "analysis/cam_methods.h"
#include "analysis/faithfulness.h"
#include "analysis/gradcam.h"
#include "core/torch_error.h"
#include "views/panel_maps.h"

namespace attnscope {

std::string attribution_key(const InferenceRequest& request, int layer) {
  return to_string(request.method) + "|" + to_string(request.target) + "|" + request.gradcam_layer + "|" +
         std::to_string(layer) + "|" + to_string(request.fusion) + "|" + std::to_string(request.discard) + "|" +
         std::to_string(request.steps) + "|" + to_string(request.replacement) + "|" + std::to_string(request.ig_steps) +
         "|" + to_string(request.ig_baseline);
}

AttributionView build_attribution_view(LoadedModel& model, const RgbImage& prepared_rgb,
                                       const AttentionSettings& settings, const std::vector<AttentionCapture>& captures,
                                       const InferenceRequest& request, int layer,
                                       const std::function<bool()>& cancelled) {
  const auto start = std::chrono::steady_clock::now();
  AttributionView view;
  view.method = request.method;
  const auto keep_going = [&](int, int) { return !(cancelled && cancelled()); };
  try {
    // Attention and rollout read the captured probabilities, which every model (TorchScript files too) gives.
    const bool from_captures =
        request.method == AttributionMethod::Attention || request.method == AttributionMethod::Rollout;
    Backbone& backbone = from_captures ? *model.backbone : model.native(method_title(request.method));
    const torch::Tensor input = image_to_tensor(prepared_rgb, model.normalization).to(model.device);
    AttributionRequest attribution;
    attribution.method = request.method;
    attribution.layer = request.gradcam_layer;
    attribution.attention_layer = layer;
    attribution.target =
        resolve_target_spec(request.target, {model, request.input_settings(), settings, request.max_pixels});
    attribution.fusion = request.fusion;
    attribution.discard = request.discard;
    attribution.ig_steps = request.ig_steps;
    attribution.ig_baseline = request.ig_baseline;
    attribution.progress = keep_going;
    const AttributionMap map =
        compute_attribution(backbone, input, settings, model.normalization, attribution, &captures);
    view.where = map.where;
    view.normalisation = map.normalisation;
    view.warning = map.warning;
    view.target_class = map.target_class;
    view.class_name = map.target_class >= 0                  ? output_name(model, map.target_class)
                      : map.target.kind != TargetKind::Class ? describe(map.target)
                                                             : "";
    // The attention views lie on the selected layer's grid; a CAM of another stage is resampled onto it.
    const TokenLayout& shown = captures.at(size_t(layer)).key_layout;
    torch::Tensor values = map.map;
    if (values.size(0) != shown.grid_h || values.size(1) != shown.grid_w) {
      values = upsample_map(values, shown.grid_h, shown.grid_w).clamp(0.0, 1.0);
      view.note = "resampled from the map's " + std::to_string(map.map.size(0)) + "x" +
                  std::to_string(map.map.size(1)) + " grid";
    }
    view.map = to_grid_map(values);
    try {
      FaithfulnessOptions options;
      options.steps = request.steps;
      options.replacement = request.replacement;
      options.target = map.target.kind == TargetKind::Class && map.target_class < 0 ? attribution.target : map.target;
      options.random_orders = 1;
      options.cancelled = cancelled;
      const FaithfulnessProbe probe(backbone, input, settings, model.normalization, options);
      view.deletion_auc = probe.deletion(map.map).auc;
      view.random_deletion_auc = probe.random_baseline(int(map.map.size(0)), int(map.map.size(1))).deletion.auc;
      view.probability = probe.probability();
      if (view.target_class < 0 && probe.target_class() >= 0) {
        view.target_class = probe.target_class();
        view.class_name = output_name(model, probe.target_class());
      }
    } catch (const std::invalid_argument& e) {
      view.note = std::string("no deletion AUC: ") + e.what();  // e.g. a model without classes
    }
  } catch (const Cancelled&) {
    throw;
  } catch (const c10::Error& e) {
    view.error = torch_error_text(e);
  } catch (const std::exception& e) {
    view.error = e.what();  // e.g. relevance on a TorchScript file: the panels say why
  }
  view.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return view;
}

void AttributionViews::describe(nlohmann::json& about) const {
  nlohmann::json rows = nlohmann::json::array();
  for (const AttributionView& view : panels)
    rows.push_back({{"method", to_string(view.method)},
                    {"class", view.target_class},
                    {"deletion_auc", view.deletion_auc},
                    {"random_deletion_auc", view.random_deletion_auc},
                    {"error", view.error}});
  if (!rows.empty()) about["attributions"] = rows;
}

std::string attribution_caption(const AttributionView& view) {
  if (!view.error.empty()) return to_string(view.method) + ": not available";
  std::string caption = to_string(view.method);
  if (view.deletion_auc >= 0) {
    char auc[64];
    std::snprintf(auc, sizeof auc, " \u00b7 AUC %.3f (random %.3f)", view.deletion_auc, view.random_deletion_auc);
    caption += auc;
  }
  return caption;
}

}  // namespace attnscope
