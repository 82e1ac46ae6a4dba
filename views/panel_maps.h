// What the workbench's attention panels show, computed on the worker thread from forward passes:
// each panel's per-head maps of the selected query (analysis/attention_map.h, as `run` and the
// figures compute them), the matrix and its spectra, focus metrics. Reads only what every model
// family's captures hold, so a new family adds nothing here. No GL or ImGui.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/singular_values.h"
#include "models/inference.h"
#include "views/analysis_registry.h"
#include "views/view_model.h"

namespace attnscope {

// What of a layer the panels read: the query (resolved in the layer's query grid), the direction,
// the matrix head, and which extras the analysis view asks for.
struct PanelSelection {
  int query_token = 0;
  bool incoming = false;  // the query's column ("in") instead of its row ("out")
  int matrix_head = 0;
  bool spectrum = false;            // the matrix of `matrix_head` and every head's spectrum
  bool metrics = false;             // focus metrics per head
  bool after_lcm = false;           // L2ViT global layers: C_conv A, the map after the LCM's spatial mixing
  torch::Tensor box;                // metrics: coverage [grid] of the user's box, undefined: none
  RankMode ranks = RankMode::Auto;  // spectrum: which spectra (head_spectrum)
  // spectrum: how far the heads' spectra are, as a share of all of the layer's heads in [0, 1].
  std::function<void(double share)> spectrum_progress;
  // spectrum: where the matrix overview and each head's spectrum are kept between requests (a
  // click on another query re-uses them), under `cache_key` (the forward, the layer); may be null.
  AnalysisCache* cache = nullptr;
  std::string cache_key;
};

// The matrix view's side: up to this many tokens the matrix is shown entry for entry.
constexpr int kMatrixTexels = 1024;
// The leading singular values computed per head where the exact spectrum is not cheap.
constexpr int64_t kLeadingValues = 32;

// One head's spectrum as `ranks` asks, the one function `run` and the workbench read: by the
// cheapest exact path (factors, window blocks, else a full SVD, which reports to `progress` and can
// be stopped), or, for `leading` and for `auto` where the exact path is a full SVD of more than
// kCheapSpectrumTokens, the kLeadingValues leading values with bounds (analysis/spectrum.h).
// `include_dwc` false: the matrix without FLatten's DWC term (analyze's second spectrum).
HeadSpectrum head_spectrum(const AttentionCapture& capture, int head, RankMode ranks, const SvdProgress& progress = {},
                           bool include_dwc = true);

// A leading spectrum's ranges as run's and analyze's summaries write them: rank_at_least,
// rank_at_most, effective_rank_low, effective_rank_high.
nlohmann::json rank_ranges_json(const HeadSpectrum& leading);

// Rows of the matrix the matrix view shows (CPU float32, [queries, Tk]): FLatten's equivalent
// matrix (with its DWC term, whose rank the DWC restores), or L2ViT's after the LCM when
// `after_lcm` and the layer has one.
torch::Tensor shown_matrix_rows(const AttentionCapture& capture, int head, bool after_lcm,
                                const std::vector<int64_t>& queries);

// The shown matrix as means over blocks of `block` x `block` entries (the last row and column of
// blocks hold what is left), block = ceil(max(Tq, Tk) / kMatrixTexels): the matrix itself up to
// that many tokens. Built from rows in chunks, so the whole matrix is never held.
struct MatrixOverview {
  torch::Tensor means;  // [ceil(Tq / block), ceil(Tk / block)]
  int block = 1;
};
MatrixOverview matrix_overview(const AttentionCapture& capture, int head, bool after_lcm,
                               const std::function<bool()>& cancelled = {});

// The mean attention the patch queries give each prefix key of one head ([prefix keys], CPU float32):
// from the forward's row normalisers where it kept them (T x prefix dot products), else from rows
// in blocks of queries; the head's whole matrix (120 MB at 5,481 tokens) is never formed.
torch::Tensor prefix_received(const AttentionCapture& capture, int head);

// One panel's maps of one captured layer. `cancelled` is checked between heads.
PanelMaps build_panel_maps(const AttentionCapture& capture, const PanelSelection& selection,
                           const std::function<bool()>& cancelled);

// The grid the panels' maps lie on: the key grid for a row, the query grid for a column.
const TokenLayout& map_grid(const AttentionCapture& capture, bool incoming);

GridMap to_grid_map(const torch::Tensor& grid);  // [h, w] -> GridMap
cv::Mat grid_map_mat(const GridMap& map);        // GridMap -> CV_32FC1 [h, w] (a copy)

// The key-grid cells (row-major over the key grid) of the group `query_token` attends within in
// `head`: its (shifted) window, or CSwin's stripe of the head's branch; empty for global layers.
std::vector<int> query_window_cells(const AttentionCapture& capture, int query_token, int head);

// Whether a panel's DWC switch changes anything: FLatten's focused kernel on a model with DWC
// weights. The switch shows `settings.dwc && dwc_switch_applies(panel)`, which is exactly whether
// the layer computed the DWC term (so the switch and the panel's title "dwc=on|off" agree).
bool dwc_switch_applies(const PanelMaps& panel);

}  // namespace attnscope
