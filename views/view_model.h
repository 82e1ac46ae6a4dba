// The view-model of the workbench: what a request asks of the forward passes and the views, and
// what the worker hands back to draw (per panel maps, the analysis view's data). No GL or ImGui:
// the workbench draws these, `run` and the figures compute the same quantities with the same
// functions (views/panel_maps.h, views/analysis_registry.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/attribution_method.h"
#include "analysis/focus_projection.h"
#include "analysis/head_fusion.h"
#include "analysis/head_spectrum.h"
#include "core/grid_map.h"
#include "core/image.h"
#include "models/attention_settings.h"
#include "models/inference.h"
#include "models/token_layout.h"
#include "session/app_state.h"

namespace attnscope {

// One side-by-side panel's forward pass: its checkpoint and the attention it runs.
struct PanelRequest {
  std::string model_path;
  AttentionSettings settings;
};

// What the workbench asks of the worker: the session's input, view and analysis parts as they
// are (embedded, not copied field by field), the live frame, and one forward pass per panel.
struct InferenceRequest : InputSelection, ViewSelection, AnalysisSettings {
  std::shared_ptr<const RgbImage> frame;  // a live frame instead of the image file
  uint64_t frame_number = 0;              // identifies `frame`
  std::vector<PanelRequest> panels;       // one forward pass per panel, each on its own model
  // The analysis view is computed elsewhere (the workbench's folder job, beside the panels): this
  // run builds the panels' views only.
  bool analysis_elsewhere = false;

  // What the forward passes depend on; requests with the same one re-use them.
  std::string forward_key() const;
  // forward_key and what the views read: the view selection and the options the active analysis
  // reads (views/analysis_registry.h), so changing another analysis's option re-uses the result.
  std::string key() const;
};

// The base of an analysis view's data: what the analysis's `compute` leaves in the outcome
// (views/analysis_registry.h) and its figure or panel reads. Each analysis keeps its own type.
struct AnalysisViewData {
  virtual ~AnalysisViewData() = default;
  // Maps the side-by-side views draw instead of the attention maps, one per panel on its key grid
  // (an empty map: none for that panel), each already in [0, 1]; null: the views show attention.
  virtual const std::vector<GridMap>* panel_maps() const { return nullptr; }
  // What a hovered value of those maps is ("gradcam++").
  virtual std::string panel_map_label() const { return {}; }
  // What the screenshot's JSON reports of the view (headless tests read it): keys added to `about`.
  virtual void describe(nlohmann::json& about) const { (void)about; }
};

// An analysis view whose data is its math's own result type, so that its panel reads that type.
template <typename T>
struct AnalysisResult : AnalysisViewData {
  explicit AnalysisResult(T result) : value(std::move(result)) {}
  T value;
};

struct GradCamView {
  GridMap map;  // scaled to [0, 1], on the hooked layer's grid
  int target_class = 0;
  std::string class_name;
  double score = 0.0;
  std::string layer, warning;
  double milliseconds = 0.0;
};

// One panel's attribution map (analysis "attribution") with its faithfulness readout.
struct AttributionView {
  GridMap map;  // in [0, 1] by the method's normalisation, on the attention views' grid
  AttributionMethod method = AttributionMethod::GradCam;
  std::string where, normalisation;
  int target_class = -1;  // -1: not class-specific or the output's norm
  std::string class_name;
  double deletion_auc = -1.0;         // < 0: not measured (see `note`)
  double random_deletion_auc = -1.0;  // a random order of the same cells
  double probability = 0.0;           // of the class on the image
  std::string note;                   // why there is no AUC, or that the map was resampled
  std::string warning;
  std::string error;  // why the method does not apply here (the map is then empty)
  double milliseconds = 0.0;
};

struct FocusView {
  int head = 0;
  double p = 3.0;
  std::string source;
  std::vector<float> histogram_before, histogram_after;  // counts over cosine similarity bins [0, 1]
  std::vector<float> curve_ps, entropy, top_k_mass;      // per p
  std::vector<float> example_before, example_after;      // the Fig. 4 (b) scores at this p
  FocusProjection projection;                            // the head's vectors before and after f_p, in 2-D
};

// What one panel's views read, for the requested layer and query. Panels may hold different
// checkpoints, so each has its own layer, grids, query and input image.
struct PanelMaps {
  AttentionSettings settings;
  std::string model_path;
  std::string provenance;  // what the model path resolved to and the files read (ModelSource::describe)
  std::string model_family;
  OutputKind output_kind = OutputKind::Logits;
  std::string error;                // this panel's model could not run (the others still show)
  std::string description;          // the attention the layer ran, in words
  Kernel kernel = Kernel::Softmax;  // the kernel the layer ran
  bool swapped = false;             // the layer ran a kernel its model was not trained with
  bool dwc_available = false;       // the model has FLatten DWC weights (the DWC switch does something)
  std::vector<Prediction> top;
  double forward_ms = 0.0;
  std::string preprocessing;  // how the image became this model's input, in words
  int depth = 0, layer = 0, heads = 0;
  LayerPlacement placement;
  TokenLayout layout, key_layout;
  int query_token = 0;
  std::string note;    // fallbacks taken for this panel (another layer, head or query than asked)
  RgbImage input_rgb;  // the image exactly as this panel's model saw it
  // Per head: the query's row over the key grid (direction out) or its column over the query grid
  // (in); and their mean.
  std::vector<GridMap> head_maps;
  GridMap mean_map;
  // Per head: the entropy of the map over its keys as a fraction of a uniform map's (1 = uniform).
  std::vector<double> uniformity;
  double mean_uniformity = 1.0;
  // Per prefix token (class, distillation, registers): the attention patch queries give it, mean
  // over heads and per head [head][token]; empty when keys have no prefix tokens.
  std::vector<float> prefix_received;
  std::vector<std::vector<float>> prefix_received_per_head;
};

struct InferenceOutcome {
  uint64_t request_id = 0;
  // The run whose analysis view this is: request_id, or the folder job's run it came from (the
  // views redraw when either changes).
  uint64_t view_id = 0;
  InferenceRequest request;
  std::string error;  // set when the run failed; nothing else is then meaningful
  // Panel 1's model, layer and query (the analysis view reads them); each panel has its own too.
  std::string model_family;
  std::vector<std::string> assumed;             // what loading took that no file or option gave (ArchAssumption)
  OutputKind output_kind = OutputKind::Logits;  // only logits have classes
  bool computes_attention = true;               // false: the model only reports probabilities (TorchScript)
  std::string device;
  int depth = 0;  // attention layers
  // The selected layer: where it sits, its heads, query and key grids, and the query resolved in it.
  int layer = 0, heads = 0;
  LayerPlacement placement;
  TokenLayout layout, key_layout;
  int query_token = 0;
  std::string query_note;  // set when the query fell back (e.g. no class token)
  // The key-grid cells (row-major) of the query's own window or group, empty for global layers.
  std::vector<int> query_window;
  WindowSupport window;  // what the window option does on this model
  // The LCM option on the selected layer: what the maps show, or why the option does not apply.
  std::string lcm_note;
  RgbImage input_rgb;  // the image exactly as the model saw it
  std::vector<PanelMaps> panels;
  // The open analysis view's data (views/analysis_*.cpp): what its figure or panel is drawn from,
  // on screen and in an export alike.
  std::shared_ptr<const AnalysisViewData> analysis_view;
  // The panels of a request whose analysis view is a long job (a folder's statistics) still being
  // computed: published first, so that a model change or a slider is never held up by the job.
  bool analysis_running = false;
  double total_ms = 0.0;  // from picking the request up to the result being ready
  bool forward_reused = false;
};

// The open analysis view's data as its analysis left it (AnalysisResult<T>, or its own type
// derived from AnalysisViewData), or null when the outcome holds another analysis's.
template <typename T>
const T* analysis_view_as(const InferenceOutcome& outcome) {
  return dynamic_cast<const T*>(outcome.analysis_view.get());
}
template <typename T>
const T* analysis_result(const InferenceOutcome& outcome) {
  const auto* held = analysis_view_as<AnalysisResult<T>>(outcome);
  return held ? &held->value : nullptr;
}

// A figure export (figures/export.h) run by the worker with the model it holds.
struct ExportOutcome {
  std::string figure_path;  // set on success
  std::string error;
};

}  // namespace attnscope
