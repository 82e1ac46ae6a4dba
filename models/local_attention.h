// Attention over groups of tokens, as hierarchical backbones compute it: Swin's (shifted) windows
// with their relative position bias and -100 shift mask, and one global group of reduced keys
// (PVT). The window geometry, the slot tables that say which image token each group slot holds,
// and one attention step that runs any kernel on grouped q, k, v and fills the layer's capture.
#pragma once

#include <torch/torch.h>

#include "models/attention.h"

namespace attnscope {

// How one layer's grid splits into windows, as timm's Swin computes it: the window and shift are
// clamped per dimension against `resolution` (timm's floor resolution of the stage), the grid is
// rolled by -shift and padded at the bottom and right to whole windows.
struct WindowPlan {
  int grid_h = 0, grid_w = 0;      // the tokens the layer has
  int window_h = 0, window_w = 0;  // after clamping
  int shift_h = 0, shift_w = 0;
  int padded_h = 0, padded_w = 0;
  int windows() const { return (padded_h / window_h) * (padded_w / window_w); }
  int window_area() const { return window_h * window_w; }
  bool shifted() const { return shift_h > 0 || shift_w > 0; }
};

// timm's _calc_window_shift: a dimension whose resolution fits in the window takes the whole
// dimension and no shift; `shifted` is the block's parity (odd blocks shift by window / 2).
WindowPlan plan_windows(int grid_h, int grid_w, int resolution_h, int resolution_w, int window_h, int window_w,
                        bool shifted);

// [G, S] int64: the image token (row-major over the grid) each window slot holds, -1 for padding.
torch::Tensor window_slots(const WindowPlan& plan);

// Swin's shift mask [G, S, S]: 0 within a region, -100 between regions; undefined without a shift.
torch::Tensor shift_mask(const WindowPlan& plan);

// The same rearrangement as row indices, for index_select on rows [B * H * W, C]: `to_frame`
// [B * G * S] gives each window slot its image row (a padding slot some row of its image: the
// caller zeroes what must be zero), `from_frame` [B * H * W] each image token its slot, and
// `padding` [B * G * S] bool marks the padding slots (undefined when the windows tile the grid).
// One gather instead of roll, pad and permute copies: at 56 x 56 x 96, 0.04 against 1.3 ms.
struct WindowFrame {
  torch::Tensor to_frame, from_frame, padding;
};
WindowFrame window_frame(const WindowPlan& plan, int64_t batch, torch::Device device);

// [B, H, W, C] -> rolled, padded, partitioned [B * G, S, C]; and back (cropped, rolled back).
torch::Tensor to_windows(const torch::Tensor& x, const WindowPlan& plan);
torch::Tensor from_windows(const torch::Tensor& windows, const WindowPlan& plan, int64_t batch);

// Swin's relative_position_index [S, S] for a window (dr * (2 ww - 1) + dc, offsets shifted to >= 0).
torch::Tensor relative_position_index(int window_h, int window_w);

// A relative position bias table [(2 wh - 1)(2 ww - 1), heads] for another window, as timm's
// resize_rel_pos_bias_table does it (geometric-progression sample positions, linear interpolation,
// in float32); the table's own window is taken as square.
torch::Tensor resize_relative_position_table(const torch::Tensor& table, int window_h, int window_w);

// A positional encoding trained for a square grid [1, side * side, C] on another grid [1, h * w, C]:
// bicubic with antialias, as timm resizes pos_embed.
torch::Tensor resize_grid_encoding(const torch::Tensor& encoding, int to_h, int to_w);

// One attention step on grouped per-head projections q [B*G, h, Sq, d], k, v [B*G, h, Sk, d]:
// the resolved kernel's features (with `parameters`), `additive` (softmax only, broadcastable to
// [B*G, h, Sq, Sk]), `forbidden` (linear kernels give such pairs 0; [G or 1, Sq, Sk] bool), and
// FLatten's DWC on V over `group_grid` when `dwc_weight` is given. Returns [B*G, h, Sq, d] and
// fills `capture` (features, q, k, v, slots and masks; the caller sets layouts and placement).
struct GroupedAttention {
  ResolvedAttention resolved;
  KernelParameters parameters;
  TokenLayout group_grid;  // the layout of one group (a window), for pooled anchors and the DWC
  torch::Tensor additive, forbidden;
  torch::Tensor query_slots, key_slots;  // for the capture; undefined: one group of all tokens
  torch::Tensor dwc_weight, dwc_bias;
  torch::Tensor local_kernels;     // InLine: its 3 x 3 kernels predicted per group [N' * C, 1, 3, 3]
  torch::Tensor capture_additive;  // what the capture keeps, [G or 1, h or 1, Sq, Sk]
};
torch::Tensor attend_grouped(const GroupedAttention& step, const torch::Tensor& q, torch::Tensor k,
                             const torch::Tensor& v, AttentionCapture* capture);

}  // namespace attnscope
