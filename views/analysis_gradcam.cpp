// Grad-CAM for vision transformers (analysis/gradcam.h): the class's gradient-weighted activations
// at a hook point (default: norm1 of the last block), reshaped to the patch grid. `analyze` writes
// the map at the grid and the image size; the workbench shows it over panel 1's image.
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/gradcam.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

int analyze_gradcam(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  auto input = image_to_tensor(loaded.prepared, loaded.model.normalization).to(loaded.model.device);
  GradCamOptions options;
  options.layer = state.gradcam_layer;
  options.target = session_target(context, loaded);
  const GradCamResult result = grad_cam(loaded.model.native("Grad-CAM"), input, state.attention, options);
  const auto upsampled = upsample_map(result.scaled, loaded.prepared.rows, loaded.prepared.cols);
  context.files->add_npy("gradcam_raw.npy", result.cam);
  context.files->add_npy("gradcam.npy", result.scaled);
  context.files->add_npy("gradcam_upsampled.npy", upsampled);
  context.files->add_npy("logits.npy", result.logits);
  // In the session's colour map (viridis unless --colormap says otherwise; jet is still there).
  context.files->add_png("gradcam_overlay.png",
                         overlay_in_colours(context, loaded.prepared, upsampled, unit_scale(context, "max = 1")));

  json summary = common_summary(context, "gradcam", result.layout, loaded);
  summary["layer"] = result.layer;
  summary["target"] = target_json(result.target, loaded.model);
  summary["score"] = result.score;
  if (result.target.kind == TargetKind::Class || result.target.kind == TargetKind::Norm)
    summary["class"] = {{"index", result.target_class},
                        {"name", output_name(loaded.model, result.target_class)},
                        {"logit", result.score},
                        {"chosen", result.target.chosen}};
  summary["max_abs_gradient"] = result.max_abs_gradient;
  summary["milliseconds"] = result.milliseconds;
  summary["normalisation"] = "scaled = (cam - min) / (max + 1e-7), cam = ReLU(sum_c w_c A_c) (pytorch-grad-cam)";
  if (!result.warning.empty()) summary["warning"] = result.warning;
  write_summary(context, "analyze-gradcam", summary);
  if (!result.warning.empty()) context.warnings.push_back(result.warning);
  context.print()
      << "attnscope analyze gradcam: " << result.layer << ", target "
      << (result.target.kind == TargetKind::Class ? output_name(loaded.model, result.target_class)
                                                  : describe(result.target))
      << " (score " << result.score << "), " << result.milliseconds << " ms\nwrote " << context.out.string()
      << "/{summary.json, gradcam.npy, gradcam_raw.npy, gradcam_upsampled.npy, logits.npy, gradcam_overlay.png}\n";
  return 0;
}

GradCamView build_gradcam_view(LoadedModel& model, const RgbImage& prepared_rgb, const AttentionSettings& settings,
                               const InferenceRequest& request) {
  GradCamOptions options;
  options.layer = request.gradcam_layer;
  options.target = resolve_target_spec(request.target, {model, request.input_settings(), settings, request.max_pixels});
  const GradCamResult result = grad_cam(
      model.native("Grad-CAM"), image_to_tensor(prepared_rgb, model.normalization).to(model.device), settings, options);
  GradCamView view;
  view.map = to_grid_map(result.scaled);
  view.target_class = result.target_class;
  view.class_name =
      result.target.kind == TargetKind::Class ? output_name(model, result.target_class) : describe(result.target);
  view.score = result.score;
  view.layer = result.layer;
  view.warning = result.warning;
  view.milliseconds = result.milliseconds;
  return view;
}

// Its own forward and backward (with autograd), reused while only the selections change.
void compute_gradcam_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const PanelForwardView& first = input.panels.front();
  const std::string key = "gradcam|" + first.input_key + "|" + settings_key(first.settings) + "|" +
                          to_string(input.request.target) + "|" + input.request.gradcam_layer;
  auto view = input.cache.get<GradCamView>(key);
  if (!view) {
    view = std::make_shared<const GradCamView>(
        build_gradcam_view(*first.model, first.result->input_rgb, first.settings, input.request));
    input.cache.put(key, view);
  }
  outcome.analysis_view = std::make_shared<const AnalysisResult<GradCamView>>(*view);
}

Figure gradcam_figure(const InferenceOutcome& outcome, const AppState& state) {
  Figure figure(1, 1);
  const GradCamView* shown = analysis_result<GradCamView>(outcome);
  if (!shown) return figure;
  const GradCamView& view = *shown;
  HeatmapPanel heatmap;
  heatmap.values = view.map;
  heatmap.background = outcome.input_rgb;
  heatmap.opacity = float(state.opacity);
  heatmap.alpha = state.alpha;
  char title[200];
  std::snprintf(title, sizeof title, "Grad-CAM of %s (score %.3f) at %s", view.class_name.c_str(), view.score,
                view.layer.c_str());
  figure.at(0, 0) = {title, "gradcam", heatmap};
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.label = "Grad-CAM, max = 1";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry gradcam_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-gradcam", "summary.json", 1},
                           "analyze --analysis gradcam --out OUT",
                           R"md(`attnscope analyze --analysis gradcam`.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer` | always | the hooked module, e.g. `blocks.3.norm1` |
| block `target` | always | |
| `score` | always | the target's score on the image |
| `class.index` | a class or norm target | the target class (-1: the norm) |
| `class.name` | a class or norm target | its name |
| `class.logit` | a class or norm target | its score |
| `class.chosen` | a class or norm target | `given` (`--class`), `top-1`, or `output norm` for a model without classes |
| `max_abs_gradient` | always | the largest gradient at the layer (0: the map is empty) |
| `milliseconds` | always | time of the forward and backward pass |
| `normalisation` | always | how `gradcam.npy` is scaled |
| `warning` | when the gradients vanish | the same warning printed on stderr |)md"});
  entry.name = "gradcam";
  entry.label = "Grad-CAM";
  entry.help = "Grad-CAM at --gradcam-layer for --target (--class)";
  entry.reads = {"class", "target", "gradcam-layer"};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_gradcam(context); };
  entry.compute = compute_gradcam_view;
  entry.figure = gradcam_figure;
  return entry;
}

}  // namespace attnscope
