// The workbench's one background inference thread. The GUI overwrites a single pending request
// (the latest wins, so a dragged slider or a live video never queues up work), a run that is no
// longer wanted stops between transformer blocks, and finished results, immutable, reach the GUI
// through a queue it drains once per frame. No GL or ImGui here: uploads happen on the main thread.
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

#include "analysis/head_fusion.h"
#include "core/app_state.h"
#include "core/image.h"
#include "models/attention_settings.h"
#include "models/inference.h"
#include "models/token_layout.h"

namespace attnscope {

struct InferenceRequest {
  int64_t max_pixels = kDefaultMaxPixels;  // --max-pixels for image_path
  std::string model_path;
  std::string arch;                      // ArchOverrides text
  std::string device;                    // "auto", "cpu", "cuda"
  std::string image_path;                // read by the worker when `frame` is null
  std::shared_ptr<const cv::Mat> frame;  // a live frame (RGB) instead of a file
  uint64_t frame_number = 0;             // identifies `frame`
  ResizeMode resize = ResizeMode::Timm;
  std::string input_size = "native";
  std::vector<AttentionSettings> panels;  // one forward pass per panel
  int layer = -1;                         // the block whose matrices the views read
  // The analysis view's extra work, for panel 1: "spectrum" (singular values of every head),
  // "gradcam" (one forward and backward), "fp" (f_p on the selected head's features), "rollout"
  // (attention rollout through every captured layer, no extra forward pass).
  std::string analysis = "none";
  int head = 0;
  int target_class = -1;
  std::string gradcam_layer;
  std::string query;  // rollout: the token whose rolled-out row is shown ("cls" or "ROW,COL")
  HeadFusion fusion = HeadFusion::Mean;
  double discard = 0.0;

  // Whether `other` needs the same forward passes (only layer or spectra may differ).
  bool same_forward(const InferenceRequest& other) const;
  bool operator==(const InferenceRequest& other) const;
};

struct HeadSpectrum {
  std::vector<float> singular_values;  // descending
  int numerical_rank = 0;
  double effective_rank = 0.0;
};

struct GradCamView {
  std::vector<float> map;  // [grid_h * grid_w], scaled to [0, 1]
  int target_class = 0;
  std::string class_name;
  double score = 0.0;
  std::string layer, warning;
  double milliseconds = 0.0;
};

struct RolloutView {
  std::vector<float> map;  // [grid_h * grid_w] the query's rolled-out attention over the patches
  float vmin = 0, vmax = 0;
  int query_token = 0;
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
};

// What one panel's views read: every head's T x T matrix of the requested layer.
struct PanelMaps {
  AttentionSettings settings;
  std::string description;            // the attention the layer ran, in words
  std::vector<float> matrices;        // [heads, T, T]
  std::vector<HeadSpectrum> spectra;  // per head, when asked for
  std::vector<Prediction> top;
  double forward_ms = 0.0;
  int tokens = 0;

  const float* row(int head, int query) const { return matrices.data() + (size_t(head) * tokens + query) * tokens; }
  const float* matrix(int head) const { return matrices.data() + size_t(head) * tokens * tokens; }
};

struct InferenceOutcome {
  uint64_t request_id = 0;
  InferenceRequest request;
  std::string error;  // set when the run failed; nothing else is then meaningful
  std::string model_family;
  std::string output_kind;  // logits, embedding or features (the last two have no classes)
  std::string device;
  int depth = 0, heads = 0, layer = 0;
  TokenLayout layout;
  cv::Mat input_rgb;  // the image exactly as the model saw it
  std::vector<PanelMaps> panels;
  std::optional<GradCamView> gradcam;  // when asked for
  std::optional<FocusView> focus;      // when asked for
  std::optional<RolloutView> rollout;  // when asked for
  double total_ms = 0.0;               // from picking the request up to the result being ready
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
  void loop();
  std::shared_ptr<const InferenceOutcome> run(uint64_t id, const InferenceRequest& request);
  ExportOutcome run_export(const AppState& state, const std::string& out_dir);
  LoadedModel& model_for(const std::string& path, const std::string& arch, const std::string& device);

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

  // Worker-thread caches: the loaded model, the decoded image and the last forward passes.
  struct Cache;
  std::unique_ptr<Cache> cache_;
  std::thread thread_;
};

}  // namespace attnscope
