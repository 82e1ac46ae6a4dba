// The demo models attnscope ships: one small DeiT-shaped architecture per attention variant, all
// sized for the generated glyph task (96 px, patch 8: a 12 x 12 grid, head dim 32 < 145 tokens).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/vit.h"

namespace attnscope {

struct DemoRecipe {
  std::string name;         // file stem: softmax, linear, focused, flatten, l2vit, anchor
  std::string description;  // for the model card
  NativeAttention attention = NativeAttention::Softmax;
  int dwc_kernel = 0;
  bool local_concentration = false;
  int anchors = 0;
};

const std::vector<DemoRecipe>& demo_recipes();
const DemoRecipe& demo_recipe(const std::string& name);  // throws std::invalid_argument

// The architecture of a demo model (embed 96, depth 4, 3 heads, patch 8, 96 px, 10 classes).
VitArch demo_arch(const DemoRecipe& recipe);

// timm-style initialisation: truncated normal (std 0.02) weights, zero biases, unit norms.
void initialise_weights(VisionTransformerImpl& model);

// Every parameter and buffer by registered name (the checkpoint keys), as CPU float32 copies.
std::map<std::string, torch::Tensor> state_dict(torch::nn::Module& model);

// The metadata that makes a saved model self-describing (heads, native attention, class names).
std::map<std::string, std::string> model_metadata(const VitArch& arch, const std::vector<std::string>& class_names);

}  // namespace attnscope
