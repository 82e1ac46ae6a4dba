// Grad-CAM for vision transformers, with jacobgil/pytorch-grad-cam's conventions for ViTs: token
// activations at one named point, the class logit's gradient averaged over the patch grid as
// channel weights, ReLU of the weighted channel sum, then min-max scaling to [0, 1].
#pragma once

#include <torch/types.h>

#include <string>

#include "analysis/attribution_target.h"
#include "models/backbone.h"

namespace attnscope {

// What one hook point held in one forward pass: its activation, the target's gradient there (when
// asked for), the output and the resolved target. Every CAM method starts from this.
struct LayerReading {
  HookPoint point;           // resolved name, token layout and tensor format at this input size
  torch::Tensor activation;  // as the hook saw it (e.g. [1, T, C] tokens), detached
  torch::Tensor gradient;    // dScore/dActivation, same shape; undefined without `with_gradient`
  torch::Tensor logits;      // [K] the output row, CPU float32
  AttributionTarget target;
  double score = 0.0;  // the target's value (logit, dimension or norm)
};

// One forward pass that keeps the activation at `layer` (a hook point spec, empty: the family's
// default) and, with `with_gradient`, one backward from the target to it. Only the part of the
// network after the layer is recorded for autograd and no parameter gradient is formed; without
// gradients the pass runs under InferenceMode. Throws std::invalid_argument for a bad layer or class.
LayerReading read_layer(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                        const std::string& layer, const AttributionTarget& target, bool with_gradient);

struct GradCamOptions {
  // A hook point of the model (Backbone::resolve_hook_point): "blocks.N.norm1", "blocks.N.norm2",
  // "blocks.N" (block output) or "norm", N counting attention blocks across stages and negative from
  // the end, or a family's own module name; empty: the family's default.
  std::string layer;
  // What is differentiated (resolve_target_spec); the default is the top-1 class, on a model
  // without classes (output_kind embedding or features) the output's L2 norm.
  AttributionTarget target;
};

struct GradCamResult {
  std::string layer;              // resolved, e.g. "blocks.11.norm1"
  int target_class = 0;           // -1: not a class (the norm, a prompt, another image)
  AttributionTarget target;       // resolved
  double score = 0.0;             // the class logit (pre-softmax), output dimension or norm differentiated
  torch::Tensor logits;           // [classes], CPU
  torch::Tensor cam;              // [grid_h, grid_w] ReLU(sum_c w_c A_c), raw values, CPU float32
  torch::Tensor scaled;           // [grid_h, grid_w] (cam - min) / (max + 1e-7): pytorch-grad-cam's scale_cam_image
  torch::Tensor weights;          // [C] channel weights w_c = mean over patches of dScore/dA_c
  TokenLayout layout;             // of the tensor at the layer, at this input size
  double max_abs_gradient = 0.0;  // over patch tokens
  std::string warning;            // set when every patch-token gradient at the layer is zero
  double milliseconds = 0.0;      // forward + backward + map
};

// One forward and one backward. Only the part of the network after the layer is recorded for
// autograd and no parameter gradient is formed (parameters' requires_grad is switched off for the
// call and restored), so the cost is about one inference plus the backward of the last blocks.
// image: [1, 3, H, W] prepared input. Throws std::invalid_argument for a bad layer or class.
GradCamResult grad_cam(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                       const GradCamOptions& options = {});

// The warning for a map whose patch gradients are all zero (the layer is past the last attention).
std::string zero_gradient_warning(const Backbone& model, const LayerReading& reading);

// An activation or gradient at a hook point as patch rows [N, C] in the layout's grid order (the
// prefix tokens dropped): pytorch-grad-cam's reshape_transform for every format.
torch::Tensor patch_rows(const torch::Tensor& value, const HookPoint& point, int64_t batch = 0);

// A grid map [gh, gw] resized to [height, width] bilinearly with half-pixel centres: what
// pytorch-grad-cam's cv2.resize(cam, (W, H)) does with its default INTER_LINEAR.
torch::Tensor upsample_map(const torch::Tensor& grid_map, int height, int width);

}  // namespace attnscope
