// The views of a workbench request from its panels' forward passes: the selected layer, head and
// query resolved on every panel (each may hold another model, with other grids), each panel's maps
// (views/panel_maps.h), and the analysis view through its registry entry.
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#include "core/excerpt.h"
#include "core/torch_error.h"
#include "models/model_loader.h"
#include "views/panel_maps.h"
#include "views/request_runner.h"

namespace attnscope {

namespace {

// The panel's layer: the requested one, or its model's last when the model has fewer (with a note).
int panel_layer(int requested, int depth, std::string& note) {
  if (requested < 0) return resolve_layer_index(std::max(requested, -depth), depth);
  if (requested < depth) return requested;
  note += "layer " + std::to_string(requested) + ": this model has " + std::to_string(depth) +
          " attention layers, showing its last; ";
  return depth - 1;
}

// Panel 1's layer, heads, grids and query: what the analysis view and the controls read.
void select_layer(const InferenceRequest& request, const std::vector<AttentionCapture>& layers,
                  InferenceOutcome& outcome) {
  outcome.depth = int(layers.size());
  outcome.layer = resolve_layer_index(request.layer, outcome.depth);
  const AttentionCapture& selected = layers[size_t(outcome.layer)];
  outcome.heads = selected.heads;
  outcome.placement = selected.placement;
  outcome.layout = selected.layout;
  outcome.key_layout = selected.key_layout;
  if (selected.heads == 0)  // the layer slider stays usable: depth and layer are set
    throw std::invalid_argument("layer " + std::to_string(outcome.layer) + " (" + selected.placement.name + ", " +
                                selected.placement.access +
                                ") computes no attention: it counts as a layer but mixes tokens by convolutions only; "
                                "choose another layer");
  try {
    const ResolvedQuery query = resolve_query(request.query, selected.layout);
    outcome.query_token = query.token;
    outcome.query_note = query.note;
  } catch (const std::invalid_argument& e) {
    // A query of another layer's grid (e.g. after switching stages): the layer's default instead.
    const ResolvedQuery fallback = resolve_query(QuerySpec{}, selected.layout);
    outcome.query_token = fallback.token;
    outcome.query_note = std::string(e.what()) + "; showing " + selected.layout.token_name(fallback.token);
  }
  if (request.windows)
    outcome.query_window =
        query_window_cells(selected, outcome.query_token, std::clamp(request.head, 0, outcome.heads - 1));
  if (request.lcm == LcmView::After)
    outcome.lcm_note = selected.has_lcm()
                           ? "after the LCM: C_conv A (its convolutions linearised, channel mean)"
                           : "this layer has no LCM (only L2ViT's global blocks do): the attention itself";
}

// One panel's maps of its own layer for the request's selection.
PanelMaps panel_maps(const InferenceRequest& request, const PanelForward& forward, size_t index,
                     const std::function<bool()>& cancelled, InferenceOutcome& outcome) {
  PanelMaps info;
  info.error = forward.error;
  if (!forward.result) return info;
  const LoadedModel& model = *forward.model;
  const std::vector<AttentionCapture>& layers = forward.result->forward.layers;
  info.depth = int(layers.size());
  info.layer = index == 0 ? outcome.layer : panel_layer(request.layer, info.depth, info.note);
  const AttentionCapture& capture = layers[size_t(info.layer)];
  if (index == 0) {
    info.query_token = outcome.query_token;
  } else if (request.query.is_patch() && outcome.layout.is_patch(outcome.query_token)) {
    // A patch of panel 1's grid: the patch over the same place in this panel's image.
    info.query_token = follow_query(outcome.query_token, outcome.layout, capture.layout);
  } else {
    try {
      info.query_token = resolve_query(request.query, capture.layout).token;
    } catch (const std::invalid_argument& e) {
      info.query_token = resolve_query(QuerySpec{}, capture.layout).token;
      info.note += std::string(e.what()) + "; ";
    }
  }
  PanelSelection selection;
  selection.query_token = info.query_token;
  selection.incoming = request.direction == MapDirection::In;
  selection.after_lcm = request.lcm == LcmView::After && capture.has_lcm();
  // A window that does not tile the grid leaves narrower windows at the right and bottom edges:
  // computed so, and said, where the window slider's value alone would suggest w x w everywhere.
  const int window = capture.attention.window;
  const TokenLayout& grid = capture.layout;
  if (window > 0 && (window < grid.grid_h || window < grid.grid_w) &&
      (grid.grid_h % window != 0 || grid.grid_w % window != 0))
    info.note += "window " + std::to_string(window) + " does not tile the " + std::to_string(grid.grid_h) + "x" +
                 std::to_string(grid.grid_w) + " grid: the last windows are " +
                 std::to_string(grid.grid_h % window == 0 ? window : grid.grid_h % window) + " rows by " +
                 std::to_string(grid.grid_w % window == 0 ? window : grid.grid_w % window) + " columns; ";
  if (request.head >= capture.heads)
    info.note +=
        "head " + std::to_string(request.head) + ": this model has " + std::to_string(capture.heads) + " heads; ";
  PanelMaps maps = build_panel_maps(capture, selection, cancelled);
  maps.model_family = model.family();
  maps.output_kind = model.output_kind();
  maps.dwc_available = has_dwc_weights(model);
  maps.preprocessing = forward.preprocessing;
  maps.top = forward.result->top;
  maps.forward_ms = forward.result->milliseconds;
  maps.input_rgb = forward.result->input_rgb;
  maps.depth = info.depth;
  maps.layer = info.layer;
  maps.heads = capture.heads;
  maps.placement = capture.placement;
  maps.layout = capture.layout;
  maps.key_layout = capture.key_layout;
  maps.query_token = info.query_token;
  maps.swapped = !capture.attention.native;
  maps.kernel = capture.attention.kernel;
  maps.note = info.note;
  return maps;
}

}  // namespace

void build_views(const InferenceRequest& request, const std::vector<PanelForward>& forwards, RunCache& cache,
                 const std::function<bool()>& cancelled, InferenceOutcome& outcome,
                 const std::function<void(int, int)>& progress) {
  select_layer(request, forwards.front().result->forward.layers, outcome);
  const AnalysisEntry* analysis = find_analysis(request.analysis);
  {
    c10::InferenceMode inference_mode;  // not around the analysis view: Grad-CAM needs autograd
    for (size_t index = 0; index < forwards.size(); ++index) {
      PanelMaps maps = panel_maps(request, forwards[index], index, cancelled, outcome);
      maps.settings = forwards[index].settings;
      maps.model_path = request.panels[index].model_path;
      if (forwards[index].model) maps.provenance = forwards[index].model->source.describe();
      outcome.panels.push_back(std::move(maps));
    }
  }
  if (!analysis || !analysis->compute || request.analysis_elsewhere) return;
  std::vector<PanelForwardView> panels;
  for (const PanelForward& forward : forwards)
    panels.push_back(
        {forward.result ? forward.model.get() : nullptr, forward.result, forward.settings, forward.input_key});
  analysis->compute(AnalysisViewInput{request, panels, cancelled, cache.analyses, progress}, outcome);
}

void run_request(const InferenceRequest& request, RunCache& cache, const std::function<bool()>& cancelled,
                 InferenceOutcome& outcome, const std::function<void(int, int)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  try {
    if (request.model.empty() || request.panels.empty()) throw std::runtime_error("no model is open");
    const std::vector<PanelForward> forwards = forward_panels(request, cache, cancelled, outcome.forward_reused);
    const LoadedModel& model = *forwards.front().model;
    outcome.model_family = model.family();
    for (const ArchAssumption& assumed : model.report.assumed) outcome.assumed.push_back(assumed.describe());
    outcome.output_kind = model.output_kind();
    outcome.computes_attention = !model.is_scripted();
    outcome.window = model.backbone->window_support();
    outcome.device = model.device.str();
    outcome.input_rgb = forwards.front().result->input_rgb;
    build_views(request, forwards, cache, cancelled, outcome, progress);
  } catch (const Cancelled&) {
    throw;
  } catch (const c10::Error& e) {
    outcome.error = torch_error_text(e);
  } catch (const std::bad_alloc&) {
    outcome.error = "out of memory";
  } catch (const std::exception& e) {
    outcome.error = one_line(e.what());
  }
  if (!outcome.error.empty()) outcome.panels.clear();
  outcome.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace attnscope
