// The CAM family at any hook point of any backbone, as jacobgil/pytorch-grad-cam defines each
// method for a ViT with its usual reshape_transform (prefix tokens dropped, [C, gh, gw]): Grad-CAM,
// Grad-CAM++, XGrad-CAM, LayerCAM, HiResCAM (one forward and one backward), EigenCAM (no
// gradients) and Score-CAM (one forward pass per channel, batched). Every map is ReLU'd and scaled
// by scale_cam_image: (cam - min) / (max + 1e-7).
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "analysis/attribution_method.h"
#include "analysis/attribution_target.h"
#include "models/backbone.h"

namespace attnscope {

// The CAM family's methods are the attribution methods read at a hook point (reads_hook_point):
// GradCam, GradCamPlusPlus, XGradCam, LayerCam, EigenCam, HiResCam, ScoreCam.
using CamMethod = AttributionMethod;
CamMethod parse_cam_method(const std::string& name);  // throws std::invalid_argument for other names
bool uses_gradients(CamMethod method);                // false for EigenCAM and Score-CAM

struct CamOptions {
  CamMethod method = CamMethod::GradCam;
  std::string layer;         // a hook point spec (Backbone::resolve_hook_point); empty: the family's default
  AttributionTarget target;  // what is differentiated (resolve_target_spec); default: the top-1 class
  // Score-CAM: masked images per forward pass (pytorch-grad-cam's BATCH_SIZE; the scores do not
  // depend on it), and a report after each batch that may stop the run (returning false throws Cancelled).
  int score_batch = 16;
  std::function<bool(int done, int total)> progress;
};

struct CamResult {
  CamMethod method = CamMethod::GradCam;
  std::string layer;  // resolved
  AttributionTarget target;
  double score = 0.0;             // the target's value on the image
  torch::Tensor logits;           // [K], CPU
  torch::Tensor cam;              // [gh, gw] the method's map before ReLU and scaling, CPU float32
  torch::Tensor scaled;           // [gh, gw] ReLU, then (x - min) / (max + 1e-7)
  torch::Tensor weights;          // [C] channel weights for the weighted-sum methods; undefined otherwise
  TokenLayout layout;             // of the tensor at the layer
  double max_abs_gradient = 0.0;  // over the patch tokens' gradients (methods that read them)
  std::string warning;            // set when the gradients the method reads are zero on every patch
  int forward_passes = 1;
  double milliseconds = 0.0;
};

// image: [1, 3, H, W] prepared input. Throws std::invalid_argument for a bad layer or class.
CamResult class_activation_map(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                               const CamOptions& options);

// The map [N] of a method that reads gradients (Grad-CAM, Grad-CAM++, XGradCAM, LayerCAM, HiResCAM)
// from a layer's patch activations and their gradients [N, C], in their dtype; the weighted-sum
// methods also give their channel weights [C]. class_activation_map computes exactly this after its
// forward and backward pass (tests evaluate it in float64 to bound how errors in its inputs grow).
torch::Tensor gradient_cam(CamMethod method, const torch::Tensor& activations, const torch::Tensor& gradients,
                           torch::Tensor* weights = nullptr);

// The map as pytorch-grad-cam returns it at the image size: its per-layer scaled map resized with
// cv2.resize (bilinear, half-pixel centres), then scaled once more (aggregate_multi_layers).
torch::Tensor cam_at_image_size(const torch::Tensor& scaled, int height, int width);

// scale_cam_image on one map: (x - min) / (max(x - min) + 1e-7).
torch::Tensor scale_cam_image(const torch::Tensor& map);

}  // namespace attnscope
