// What the workbench's attention panels show, computed on the worker thread from forward passes:
// each panel's per-head maps of the selected query (analysis/attention_map.h, as `run` and the
// figures compute them), the matrix and its spectra, focus metrics. Reads only what every model
// family's captures hold, so a new family adds nothing here. No GL or ImGui.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/head_spectrum.h"
#include "analysis/singular_values.h"
#include "models/inference.h"
#include "views/analysis_registry.h"
#include "views/view_model.h"

namespace attnscope {

// What of a layer the panels read: the query (resolved in the layer's query grid), the direction
// and which map of L2ViT's global layers.
struct PanelSelection {
  int query_token = 0;
  bool incoming = false;   // the query's column ("in") instead of its row ("out")
  bool after_lcm = false;  // L2ViT global layers: C_conv A, the map after the LCM's spatial mixing
};

// The matrix view's side: up to this many tokens the matrix is shown entry for entry.
constexpr int kMatrixTexels = 1024;
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
// from the forward's row normalisers where it kept them (T x prefix dot products), from the thin
// factors of a kernel that has them (T x r), else from rows in blocks of queries; the head's whole
// matrix (120 MB at 5,481 tokens) is never formed.
torch::Tensor prefix_received(const AttentionCapture& capture, int head);

// One panel's maps of one captured layer. `cancelled` is checked between heads.
PanelMaps build_panel_maps(const AttentionCapture& capture, const PanelSelection& selection,
                           const std::function<bool()>& cancelled);

// One panel's matrix view (analysis "spectrum"): the selected head's Tq x Tk matrix, as it is up
// to kMatrixTexels tokens a side, else its means over blocks of `block` x `block` entries (rows x
// cols of them); `row` reads one query's exact row of it on demand. And every head's spectrum, as
// `ranks` asks (nothing O(T^3) at many tokens unless asked).
struct PanelMatrix {
  int head = 0;  // the head shown (the selected one, or the panel's last)
  int rows = 0, cols = 0, block = 1;
  std::vector<float> matrix;
  std::function<std::vector<float>(int query)> row;
  std::vector<HeadSpectrum> spectra;
  std::string spectra_note;  // heads left without a spectrum, and why
};

// Where a panel's matrix view keeps the overview and each head's spectrum between requests (a
// click on another query re-uses them): `cache` under `key` (the forward pass and the layer).
struct MatrixViewCache {
  AnalysisCache* cache = nullptr;
  std::string key;
};

// `capture`'s matrix view for `head`: the overview, then every head's spectrum as `ranks` asks,
// reporting the spectra's progress as a share of the layer's heads. `capture_owner` keeps the
// capture alive for the row reader.
PanelMatrix panel_matrix(const std::shared_ptr<const InferenceResult>& capture_owner, int layer, int head,
                         bool after_lcm, RankMode ranks, const MatrixViewCache& cache,
                         const std::function<bool()>& cancelled,
                         const std::function<void(double share)>& spectrum_progress);

// The grid the panels' maps lie on: the key grid for a row, the query grid for a column.
const TokenLayout& map_grid(const AttentionCapture& capture, bool incoming);

// The key-grid cells (row-major over the key grid) of the group `query_token` attends within in
// `head`: its (shifted) window, or CSwin's stripe of the head's branch; empty for global layers.
std::vector<int> query_window_cells(const AttentionCapture& capture, int query_token, int head);

// Whether a panel's DWC switch changes anything: FLatten's focused kernel on a model with DWC
// weights. The switch shows `settings.dwc && dwc_switch_applies(panel)`, which is exactly whether
// the layer computed the DWC term (so the switch and the panel's title "dwc=on|off" agree).
bool dwc_switch_applies(const PanelMaps& panel);

}  // namespace attnscope
