// The demo models attnscope ships: one small DeiT-shaped architecture per attention variant, all
// sized for the generated glyph task (96 px, patch 8: a 12 x 12 grid, head dim 32 < 145 tokens),
// and hierarchical ones (a FLatten-Swin, a PolaFormer-Swin, an L2ViT and an MLLA) for the same task.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/l2vit.h"
#include "models/mlla.h"
#include "models/swin.h"
#include "models/vit.h"

namespace attnscope {

// The architectures demo models are built in; the names are the backbone families' (family()).
enum class DemoFamily { Vit, Swin, L2ViT, Mlla };
template <>
struct EnumTable<DemoFamily> {
  static const std::vector<EnumEntry<DemoFamily>>& entries();
};
inline std::string to_string(DemoFamily family) { return enum_name(family); }

struct DemoRecipe {
  std::string name;         // file stem: softmax, linear, focused, flatten, l2vit, anchor
  std::string description;  // for the model card
  NativeAttention attention = NativeAttention::Softmax;
  int dwc_kernel = 0;
  bool local_concentration = false;
  int anchors = 0;
  DemoFamily family = DemoFamily::Vit;
  int agents = 0;  // agent: agent tokens (a square), pooled from the 12 x 12 grid the biases are trained for
};

const std::vector<DemoRecipe>& demo_recipes();
const DemoRecipe& demo_recipe(const std::string& name);  // throws std::invalid_argument

// The architecture of a ViT demo model (embed 96, depth 4, 3 heads, patch 8, 96 px, 10 classes).
VitArch demo_arch(const DemoRecipe& recipe);
// The Swin demos: patch 8 (a 12 x 12 grid at 96 px), widths 64-128-256, 2 blocks per stage, heads
// 2-4-8, the recipe's linear kernel (FLatten's focused or PolaFormer's) global in stage 0 ("LSS"),
// softmax windows of 3 in stages 1-2.
SwinArch demo_swin_arch(const DemoRecipe& recipe);
// The L2ViT demo: the authors' conv stem (a 24 x 24 grid at 96 px), widths 32-64-128, heads 1-2-4,
// each stage a local window block (windows of 6) then a global enhanced linear block with its LCM.
L2ViTArch demo_l2vit_arch();
// The MLLA demo: the authors' conv stem (a 24 x 24 grid at 96 px), widths 32-64-128, heads 1-2-4
// (head dim 32), 2 MLLA blocks per stage, merges of ratio 4 as mlla.py's PatchMerging.
MllaArch demo_mlla_arch();

// A freshly initialised demo model of the recipe's family.
std::shared_ptr<Backbone> build_demo_model(const DemoRecipe& recipe);
// The model card's architecture line.
std::string demo_architecture_text(const DemoRecipe& recipe);
// What a saved demo model needs in its metadata to load as itself (plus the class names).
std::map<std::string, std::string> demo_metadata(const DemoRecipe& recipe, const std::vector<std::string>& class_names);

// timm-style initialisation: truncated normal (std 0.02) weights, zero biases, unit norms.
void initialise_weights(VisionTransformerImpl& model);
void initialise_weights(torch::nn::Module& model);

// Every parameter and buffer by registered name (the checkpoint keys), as CPU float32 copies.
std::map<std::string, torch::Tensor> state_dict(torch::nn::Module& model);

// The metadata that makes a saved model self-describing (heads, native attention, class names).
std::map<std::string, std::string> model_metadata(const VitArch& arch, const std::vector<std::string>& class_names);

}  // namespace attnscope
