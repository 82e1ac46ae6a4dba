// The figures researchers make, built from the engine's data as plain Figures: comparison grids of
// attention overlays (variants x layers, variants x heads), a matrix beside its singular spectrum,
// Grad-CAM beside attention and rollout, and the f_p demonstration.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "figures/figure.h"
#include "figures/render.h"
#include "models/model_cache.h"
#include "models/model_loader.h"
#include "session/app_state.h"

namespace attnscope {

// Everything a figure export needs, read from an AppState (so CLI flags, session files and the
// GUI give the same figure). Throws std::invalid_argument on an unknown layout or a bad list.
struct FigureRequest {
  std::string layout;
  FigureFormat format = FigureFormat::Png;
  FigureStyle style;
  bool overwrite = false;
  std::vector<VariantChoice> variants;     // rows of every layout
  std::vector<int> layers;                 // grid-layers columns; empty: every block
  std::vector<int> heads;                  // grid-heads columns; empty: every head
  int layer = -1;                          // the block of grid-heads and matrix-spectrum (-1: last)
  int head = 0;                            // the head of grid-layers and matrix-spectrum
  std::string query = "cls";               // the query token whose row the overlays show
  std::string view = "head";               // grid-layers, panels: head, mean (of heads) or heads (panels)
  std::string direction = "out";           // panels: the query's row (out) or column (in)
  std::string fp_vectors = "keys";         // fp-vectors: keys or queries
  std::string fp_projection = "channels";  // fp-vectors: channels (the two largest) or pca
  double width_pt = 0;                     // the figure's width in points (0: from the panel size)
  Colormap colormap = Colormap::Viridis;
  ScaleSpec scale;  // attention maps' colour scale (Grad-CAM and rollout keep their [0, 1])
  float opacity = 0.6f;
  OverlayAlpha alpha = OverlayAlpha::Value;
  InputSettings input;  // how rows that name their own checkpoint prepare the image
  // gradcam-attention: Grad-CAM's layer and class, rollout's head fusion and discard ratio.
  std::string gradcam_layer = "blocks.-1.norm1";
  int target_class = -1;
  HeadFusion fusion = HeadFusion::Mean;
  double discard = 0.0;

  static FigureRequest from_state(const AppState& state);
};

struct FigureLayoutInfo {
  const char* name;
  const char* description;
};
const std::vector<FigureLayoutInfo>& figure_layouts();

// Where rows that name their own checkpoint (a panel spec's model=) find it: loaded through
// `cache`, with `image_rgb` (the image before any model's preparation) prepared for each.
struct RowModels {
  ModelCache* cache = nullptr;
  cv::Mat image_rgb;
  std::string arch, device;  // --arch applies to the export's own model only
};

// Runs the model once per variant on `prepared_rgb` (the model's input image, see
// prepare_model_input) and builds the request's figure. Panels' data_name values are unique and
// file-name safe. Throws std::invalid_argument for a layer, head or query the model does not have,
// and for a row naming another checkpoint without `rows`.
Figure build_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                    const std::string& title, const RowModels* rows = nullptr);

}  // namespace attnscope
