// The attribution view's work on the worker thread: one panel's attribution map (any method of
// analysis/attribution.h, with that panel's attention variant) and its deletion AUC against a
// random order, for the panels to draw. No GL or ImGui.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "models/model_loader.h"
#include "views/view_model.h"

namespace attnscope {

// What a panel's map depends on besides the image and the panel's settings.
std::string attribution_key(const InferenceRequest& request, int layer);

// The map for `settings` (the panel's variant) at the request's method, class and layers, with its
// deletion curve's AUC. `captures`: the panel's forward pass (attention and rollout read it).
// A method that does not apply sets the view's error instead of throwing; Cancelled passes through.
AttributionView build_attribution_view(LoadedModel& model, const RgbImage& prepared_rgb,
                                       const AttentionSettings& settings, const std::vector<AttentionCapture>& captures,
                                       const InferenceRequest& request, int layer,
                                       const std::function<bool()>& cancelled);

// The attribution view's data: every panel's map by the request's method, drawn by the side-by-side
// views instead of attention, and their faithfulness readouts.
struct AttributionViews : AnalysisViewData {
  AttributionMethod method = AttributionMethod::GradCam;
  std::vector<AttributionView> panels;  // one per side-by-side panel
  std::vector<GridMap> maps;            // their maps (empty where the method does not apply)

  const std::vector<GridMap>* panel_maps() const override { return &maps; }
  std::string panel_map_label() const override { return to_string(method); }
  void describe(nlohmann::json& about) const override;
};

// A few words for a panel's label: "gradcam++ · AUC 0.120 (random 0.310)", the deletion AUC.
std::string attribution_caption(const AttributionView& view);

}  // namespace attnscope
