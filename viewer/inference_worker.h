// The workbench's one background inference thread. The GUI overwrites a single pending request
// (the latest wins, so a dragged slider or a live video never queues up work), a run that is no
// longer wanted stops between transformer blocks, and finished results, immutable, reach the GUI
// through a queue it drains once per frame. A run goes request -> model -> forward -> views; the
// views (viewer/result_views.h) read only the captures every model family fills. No GL or ImGui
// here: uploads happen on the main thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>

#include "analysis/focus_projection.h"
#include "analysis/head_fusion.h"
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
  bool operator==(const PanelRequest& other) const;
};

struct InferenceRequest {
  std::string model_path;                  // panel 1's checkpoint, which the analysis view reads
  std::string arch;                        // ArchOverrides text, for panels on `model_path`
  std::string device;                      // "auto", "cpu", "cuda"
  std::string image_path;                  // read by the worker when `frame` is null
  std::shared_ptr<const cv::Mat> frame;    // a live frame (RGB) instead of a file
  uint64_t frame_number = 0;               // identifies `frame`
  int64_t max_pixels = kDefaultMaxPixels;  // --max-pixels for image_path
  InputSettings input;
  std::vector<PanelRequest> panels;  // one forward pass per panel, each on its own model

  // What the views read from the forward passes (changing only these re-uses them).
  int layer = -1;             // the attention layer the views show (-1: the last)
  int head = 0;               // the matrix view's head, the f_p head
  std::string query = "cls";  // cls, dist, regN or ROW,COL in the layer's query grid
  std::string direction = "out";
  bool windows = false;        // the query's window cells for the outline
  std::string lcm = "before";  // L2ViT global layers: the map before or after the LCM's mixing
  std::string box;             // the metrics view's box of patches, empty: none
  // The analysis view's extra work, for panel 1: "spectrum" (the matrix and every head's singular
  // values), "gradcam" (one forward and backward), "fp" (f_p on the head's features), "rollout"
  // (attention rollout through the captured layers, no extra forward pass), "metrics".
  std::string analysis = "none";
  int target_class = -1;
  std::string gradcam_layer;
  HeadFusion fusion = HeadFusion::Mean;
  double discard = 0.0;
  // "attribution": every panel's map by `method` (at `gradcam_layer` or the selected layer, for
  // `target_class`) with its deletion AUC over `steps` steps to the `replacement`.
  std::string method;
  int steps = 20;
  std::string replacement = "blur";
  int ig_steps = 50;
  std::string ig_baseline = "zero";
  std::string fp_vectors = "keys", fp_projection = "channels";  // the f_p view's 2-D projection

  // Whether `other` needs the same forward passes (only what the views read may differ).
  bool same_forward(const InferenceRequest& other) const;
  bool operator==(const InferenceRequest& other) const;
};

// A scalar map over a grid of patches, row-major.
struct GridMap {
  int grid_h = 0, grid_w = 0;
  std::vector<float> values;
  float at(int row, int col) const { return values[size_t(row) * size_t(grid_w) + size_t(col)]; }
};

struct HeadSpectrum {
  std::vector<float> singular_values;  // descending
  double tolerance = 0.0;              // the numerical rank counts values above it
  int numerical_rank = 0;
  double effective_rank = 0.0;
};

// The focus metrics of one head's map (the metrics view).
struct HeadFocusMetrics {
  int head = 0;
  double entropy = 0, top_k_mass = 0, gini = 0;
  std::optional<double> box_mass;  // without a box: none
};
constexpr int kFocusTopK = 10;

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
  std::string method, where, normalisation;
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

struct RolloutView {
  GridMap map;  // the query's rolled-out attention over the patches
  float vmin = 0, vmax = 0;
  std::string query_name;
  int layers = 0;     // how many layers were multiplied
  std::string note;   // which layers, when not every layer could take part
  std::string error;  // why there is no rollout for this layer (the map is then empty)
  HeadFusion fusion = HeadFusion::Mean;
  double discard = 0.0;
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
  std::string model_family, output_kind;  // output_kind: logits, embedding or features
  std::string error;                      // this panel's model could not run (the others still show)
  std::string description;                // the attention the layer ran, in words
  std::string kernel;                     // the kernel the layer ran: softmax, linear, focused, enhanced, anchor
  bool swapped = false;                   // the layer ran a kernel its model was not trained with
  bool dwc_available = false;             // the model has FLatten DWC weights (the DWC switch does something)
  std::vector<Prediction> top;
  double forward_ms = 0.0;
  std::string preprocessing;  // how the image became this model's input, in words
  int depth = 0, layer = 0, heads = 0;
  LayerPlacement placement;
  TokenLayout layout, key_layout;
  int query_token = 0;
  std::string note;   // fallbacks taken for this panel (another layer, head or query than asked)
  cv::Mat input_rgb;  // the image exactly as this panel's model saw it
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
  std::vector<HeadFocusMetrics> metrics;  // analysis "metrics": per head
  // analysis "spectrum": the selected head's Tq x Tk matrix and every head's spectrum.
  int matrix_rows = 0, matrix_cols = 0;
  std::vector<float> matrix;
  std::vector<HeadSpectrum> spectra;
};

struct InferenceOutcome {
  uint64_t request_id = 0;
  InferenceRequest request;
  std::string error;  // set when the run failed; nothing else is then meaningful
  // Panel 1's model, layer and query (the analysis view reads them); each panel has its own too.
  std::string model_family;
  std::string output_kind;         // logits, embedding or features (the last two have no classes)
  bool computes_attention = true;  // false: the model only reports probabilities (TorchScript)
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
  std::string window_meaning;        // what the window option does on this model; empty: nothing
  std::string window_absent_reason;  // why, when window_meaning is empty
  // The LCM option on the selected layer: what the maps show, or why the option does not apply.
  std::string lcm_note;
  std::string box_error;  // why the box cannot be used on this grid
  cv::Mat input_rgb;      // the image exactly as the model saw it
  std::vector<PanelMaps> panels;
  std::optional<GradCamView> gradcam;         // when asked for
  std::optional<FocusView> focus;             // when asked for
  std::optional<RolloutView> rollout;         // when asked for
  std::vector<AttributionView> attributions;  // analysis "attribution": one per panel
  double total_ms = 0.0;                      // from picking the request up to the result being ready
  bool forward_reused = false;
};

// A figure export (figures/export.h) run by the worker with the model it holds.
struct ExportOutcome {
  std::string figure_path;  // set on success
  std::string error;
};

class InferenceWorker {
 public:
  // `wake` is called from the worker thread whenever a result is ready (e.g. glfwPostEmptyEvent).
  explicit InferenceWorker(std::function<void()> wake);
  ~InferenceWorker();
  InferenceWorker(const InferenceWorker&) = delete;
  InferenceWorker& operator=(const InferenceWorker&) = delete;

  // Replaces the pending request; a run in progress for an older request is cancelled. Returns its id.
  uint64_t submit(InferenceRequest request);
  // Queues a figure export of `state` (its model, image and figure settings) into `out_dir`; it runs
  // before the next inference request. Its outcome comes back through take_exports().
  void submit_export(AppState state, std::string out_dir);
  std::vector<ExportOutcome> take_exports();
  // Results finished since the last call, oldest first.
  std::vector<std::shared_ptr<const InferenceOutcome>> take_finished();
  // Whether a finished result waits to be taken (without taking it).
  bool has_finished() const;
  // True while a request is pending or running.
  bool busy() const;

 private:
  struct Cache;
  struct PanelForward;
  void loop();
  std::shared_ptr<const InferenceOutcome> run(uint64_t id, const InferenceRequest& request);
  ExportOutcome run_export(const AppState& state, const std::string& out_dir);
  // The stages of a run, each re-using what the last run left when its inputs did not change.
  std::shared_ptr<LoadedModel> model_for(const InferenceRequest& request, const std::string& path);
  const cv::Mat& source_image(const InferenceRequest& request);
  const cv::Mat& prepared_input(const InferenceRequest& request, const std::string& model_key, LoadedModel& model);
  std::vector<PanelForward> forward_panels(uint64_t id, const InferenceRequest& request, bool& reused_all);
  void build_views(uint64_t id, const InferenceRequest& request, const std::vector<PanelForward>& forwards,
                   InferenceOutcome& outcome);

  std::function<void()> wake_;
  mutable std::mutex mutex_;
  std::condition_variable wanted_;
  std::optional<InferenceRequest> pending_;
  std::optional<std::pair<AppState, std::string>> pending_export_;
  std::vector<ExportOutcome> exports_;
  uint64_t next_id_ = 0;
  std::atomic<uint64_t> latest_id_{0};
  bool running_ = false;
  bool stopping_ = false;
  std::vector<std::shared_ptr<const InferenceOutcome>> finished_;

  // Worker-thread caches: the loaded models, the decoded image, each model's input and the last
  // forward passes.
  std::unique_ptr<Cache> cache_;
  std::thread thread_;
};

}  // namespace attnscope
