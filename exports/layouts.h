// The figures of models researchers make, built from forward passes as plain Figures: comparison
// grids of attention overlays (variants x layers, variants x heads), a matrix beside its singular
// spectrum, Grad-CAM beside attention and rollout, the f_p demonstration, the workbench's panels and
// the faithfulness table. One table of layouts; the renderer they draw with is figures/.
#pragma once

#include <string>
#include <vector>

#include "analysis/faithfulness_table.h"
#include "figures/bundle.h"
#include "figures/figure.h"
#include "figures/render.h"
#include "models/model_cache.h"
#include "models/model_loader.h"
#include "session/app_state.h"

namespace attnscope {

// Everything a figure export needs, read from an AppState (so CLI flags, session files and the
// GUI give the same figure): the state's view selection (layer, head, query, view, direction,
// LCM), analysis settings (Grad-CAM's layer and class, rollout's fusion, f_p's vectors) and
// display settings (colour map, scale, opacity) as they are. Throws std::invalid_argument on an
// unknown layout or a bad list.
struct FigureRequest : FigureOutput, ViewSelection, AnalysisSettings, DisplaySettings {
  std::vector<VariantChoice> variants;    // rows of every layout
  std::vector<int> layers;                // grid-layers columns; empty: every block
  std::vector<int> heads;                 // grid-heads columns; empty: every head
  InputSettings input;                    // how rows that name their own checkpoint prepare the image
  FaithfulnessTableRequest faithfulness;  // the faithfulness layout's methods and curves

  static FigureRequest from_state(const AppState& state);
};

struct RowModels;

// One layout of the layout table (exports/layouts.cpp): its name (--layout), what it shows, and how it
// is built (by build_figure).
struct FigureLayoutInfo {
  const char* name;
  const char* description;
  Figure (*build)(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                  const std::string& title, const RowModels* rows);
  bool faithfulness = false;  // reads --methods and the curves' options (FigureRequest::faithfulness)
};
const std::vector<FigureLayoutInfo>& figure_layouts();
// The layout named `name`; throws std::invalid_argument listing the layouts.
const FigureLayoutInfo& figure_layout(const std::string& name);

// Where rows that name their own checkpoint (a panel spec's model=) find it: loaded through
// `cache`, with `image_rgb` (the image before any model's preparation) prepared for each.
struct RowModels {
  ModelCache* cache = nullptr;
  RgbImage image_rgb;
  std::string arch, device;  // --arch applies to the export's own model only
};

// Runs the model once per variant on `prepared_rgb` (the model's input image, see
// prepare_model_input) and builds the request's figure. Panels' data_name values are unique and
// file-name safe. Throws std::invalid_argument for a layer, head or query the model does not have,
// and for a row naming another checkpoint without `rows`.
Figure build_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                    const std::string& title, const RowModels* rows = nullptr);

}  // namespace attnscope
