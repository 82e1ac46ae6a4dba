// What the workbench's attention panels show, computed on the worker thread from forward passes:
// each panel's per-head maps of the selected query (analysis/attention_map.h, as `run` and the
// figures compute them), the matrix and its spectra, focus metrics. Reads only what every model
// family's captures hold, so a new family adds nothing here. No GL or ImGui.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "models/inference.h"
#include "views/view_model.h"

namespace attnscope {

// What of a layer the panels read: the query (resolved in the layer's query grid), the direction,
// the matrix head, and which extras the analysis view asks for.
struct PanelSelection {
  int query_token = 0;
  bool incoming = false;  // the query's column ("in") instead of its row ("out")
  int matrix_head = 0;
  bool spectrum = false;   // the matrix of `matrix_head` and every head's spectrum
  bool metrics = false;    // focus metrics per head
  bool after_lcm = false;  // L2ViT global layers: C_conv A, the map after the LCM's spatial mixing
  torch::Tensor box;       // metrics: coverage [grid] of the user's box, undefined: none
};

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
