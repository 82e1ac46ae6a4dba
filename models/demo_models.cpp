#include "models/demo_models.h"

#include "core/excerpt.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace attnscope {

const std::vector<DemoRecipe>& demo_recipes() {
  static const std::vector<DemoRecipe> recipes = {
      {"softmax", "softmax attention (DeiT)", NativeAttention::Softmax, 0, false, 0},
      {"linear", "ReLU linear attention", NativeAttention::Linear, 0, false, 0},
      {"focused", "FLatten focused linear attention, p = 3, no depthwise conv", NativeAttention::Focused, 0, false, 0},
      {"flatten", "FLatten focused linear attention, p = 3, with its 5x5 depthwise conv on V", NativeAttention::Focused,
       5, false, 0},
      {"l2vit", "L2ViT enhanced linear attention with its local concentration module", NativeAttention::Enhanced, 0,
       true, 0},
      {"anchor", "AnchorFormer anchor attention, 30 learned anchors", NativeAttention::Anchor, 0, false, 30},
  };
  return recipes;
}

const DemoRecipe& demo_recipe(const std::string& name) {
  for (const auto& recipe : demo_recipes())
    if (recipe.name == name) return recipe;
  std::string known;
  for (const auto& recipe : demo_recipes()) known += (known.empty() ? "" : ", ") + recipe.name;
  throw std::invalid_argument("unknown demo variant '" + excerpt(name) + "' (expected " + known + ")");
}

VitArch demo_arch(const DemoRecipe& recipe) {
  VitArch arch = plain_vit_arch(/*embed_dim=*/96, /*depth=*/4, /*heads=*/3, /*patch_size=*/8, /*grid=*/12,
                                /*num_classes=*/10);
  for (auto& block : arch.blocks) {
    block.attention.native = recipe.attention;
    if (recipe.attention == NativeAttention::Focused) {
      block.attention.dwc_kernel = recipe.dwc_kernel;
      block.attention.has_scale = true;
      block.attention.positional_encoding_tokens = 1 + arch.pos_grid_h * arch.pos_grid_w;
    }
    block.attention.anchors = recipe.anchors;
    block.local_concentration = recipe.local_concentration;
  }
  return arch;
}

void initialise_weights(VisionTransformerImpl& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool is_norm = name.find("norm") != std::string::npos || name.find(".bn.") != std::string::npos;
    if (ends_with(".bias")) {
      p.zero_();
    } else if (is_norm && ends_with(".weight")) {
      p.fill_(1.0);
    } else if (ends_with("attn.scale") || ends_with("positional_encoding")) {
      p.zero_();  // FLatten initialises both to zero
    } else if (ends_with("attn.dist_anchor_B.weight")) {
      // Unit-scale anchors: at std 0.02 every token's assignment is uniform over the anchors, each
      // token receives the global mean of V, and 700 steps do not break out of it (measured).
      p.normal_(0.0, 1.0);
    } else if (ends_with("attn.temperature")) {
      p.fill_(1.0 / std::sqrt(double(model.arch().embed_dim / model.arch().heads)));
    } else {
      p.normal_(0.0, 0.02).clamp_(-0.04, 0.04);
    }
  }
}

std::map<std::string, torch::Tensor> state_dict(torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : model.named_parameters()) tensors[item.key()] = item.value().detach().to(torch::kCPU).clone();
  for (const auto& item : model.named_buffers()) tensors[item.key()] = item.value().detach().to(torch::kCPU).clone();
  return tensors;
}

std::map<std::string, std::string> model_metadata(const VitArch& arch, const std::vector<std::string>& class_names) {
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"num_heads", std::to_string(arch.heads)}};
  if (!arch.blocks.empty() && arch.blocks[0].attention.native == NativeAttention::Linear)
    metadata["attention"] = "linear";
  if (!class_names.empty()) metadata["class_names"] = nlohmann::json(class_names).dump();
  return metadata;
}

}  // namespace attnscope
