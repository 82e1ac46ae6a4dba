// The one function for the map a view draws of a captured layer: the workbench's panels, `run`'s
// overlay and files, and every figure call it, so what is exported is what is on screen.
#pragma once

#include <torch/types.h>

#include "models/attention.h"

namespace attnscope {

// What of a layer a map shows.
struct MapSelection {
  int head = 0;            // -1: the mean over heads
  int query_token = 0;     // in the layer's query grid
  bool incoming = false;   // the query's column over the query grid ("in") instead of its row over the key grid
  bool after_lcm = false;  // L2ViT's global layers: C_conv A, after the LCM's mixing (ignored without an LCM)
};

// The query's attention row over the key grid, or its column ("in": how much every patch looks at
// the key over the query's place in the image) over the query grid: [grid_h, grid_w], CPU float32,
// in attention weights. The mean over heads sums the heads in order, then divides.
torch::Tensor attention_map(const AttentionCapture& capture, const MapSelection& selection);

// The query's full row over all keys, prefix keys first ([Tk]), before or after the LCM.
torch::Tensor attention_row(const AttentionCapture& capture, int head, int query_token, bool after_lcm);

}  // namespace attnscope
