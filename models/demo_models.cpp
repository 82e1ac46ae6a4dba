#include "models/demo_models.h"

#include "core/excerpt.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace attnscope {

const std::vector<EnumEntry<DemoFamily>>& EnumTable<DemoFamily>::entries() {
  static const std::vector<EnumEntry<DemoFamily>> table = {
      {DemoFamily::Vit, "vit"}, {DemoFamily::Swin, "swin"}, {DemoFamily::L2ViT, "l2vit"}, {DemoFamily::Mlla, "mlla"}};
  return table;
}

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
      {"agent",
       "Agent Attention (agent_deit's module): 36 agent tokens (6x6, a quarter of the patches as agent_deit_tiny's 49 "
       "of 196) pooled from the queries, its position biases and 3x3 "
       "depthwise conv",
       NativeAttention::Agent, 0, false, 0, DemoFamily::Vit, 36},
      {"inline", "InLine injective linear attention (inline_deit's module) with its predicted 3x3 residual",
       NativeAttention::InLine},
      {"flatten_swin",
       "FLatten-Swin: focused linear attention (p = 3, 5x5 DWC) in stage 0, Swin's shifted softmax windows in stages "
       "1-2",
       NativeAttention::Focused, 5, false, 0, DemoFamily::Swin},
      {"pola_swin",
       "PolaFormer-Swin: polarity-aware linear attention (pola_swin.py: alpha 4, learned power, 5x5 DWC, gate) in "
       "stage 0, Swin's shifted softmax windows in stages 1-2",
       NativeAttention::Pola, 5, false, 0, DemoFamily::Swin},
      {"l2vit_hierarchical",
       "L2ViT, the whole architecture: local softmax windows (LWA) alternating with enhanced linear attention (LGA) "
       "and its local concentration module, in three stages",
       NativeAttention::Enhanced, 0, true, 0, DemoFamily::L2ViT},
      {"mlla",
       "MLLA, the whole architecture: Mamba-like linear attention (ELU+1 kernel, RoPE, LePE) inside its gated block, "
       "in three stages",
       NativeAttention::Mlla, 0, false, 0, DemoFamily::Mlla},
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
    if (recipe.attention == NativeAttention::Agent) {
      block.attention.agents = recipe.agents;
      block.attention.agent_grid = arch.pos_grid_h;
    }
    block.attention.inline_residual = recipe.attention == NativeAttention::InLine;
    block.local_concentration = recipe.local_concentration;
  }
  return arch;
}

SwinArch demo_swin_arch(const DemoRecipe& recipe) {
  // Patch 8 as the DeiT demos (a 12x12 first grid): at patch 4 the same widths stay at chance on
  // the sign task for hundreds of steps. Three stages: 12 -> 6 -> 3.
  SwinArch arch;
  arch.patch_size = 8;
  arch.embed_dim = 64;
  arch.num_classes = 10;
  arch.native_height = arch.native_width = 96;
  arch.source_layout = CheckpointLayout::Timm;
  arch.attn_type = "LSS";
  const int dims[] = {64, 128, 256}, heads[] = {2, 4, 8}, grids[] = {12, 6, 3};
  for (int s = 0; s < 3; ++s) {
    SwinStageArch stage;
    stage.dim = dims[s];
    stage.downsample = s > 0;
    for (int b = 0; b < 2; ++b) {
      SwinBlockArch block;
      block.heads = heads[s];
      block.mlp_hidden = 4 * dims[s];
      if (arch.attn_type[size_t(s)] == 'L') {
        // FLatten's and PolaFormer's L window (56) covers these grids: global linear attention.
        block.native = recipe.attention;
        block.window = 56;
        block.dwc_kernel = 5;
        block.encoding_side = grids[s];
      } else {
        block.window = block.table_window = 3;
      }
      stage.blocks.push_back(block);
    }
    arch.stages.push_back(stage);
  }
  return arch;
}

MllaArch demo_mlla_arch() {
  MllaArch arch;
  arch.embed_dim = 32;
  arch.num_classes = 10;
  arch.native_height = arch.native_width = 96;
  const int dims[] = {32, 64, 128}, heads[] = {1, 2, 4};
  for (int s = 0; s < 3; ++s) {
    MllaStageArch stage;
    stage.dim = dims[s];
    stage.heads = heads[s];
    stage.blocks.assign(2, MllaBlockArch{4 * dims[s], true});
    stage.merge_hidden = s < 2 ? 8 * dims[s] : 0;  // PatchMerging: 2C out, ratio 4
    arch.stages.push_back(stage);
  }
  return arch;
}

L2ViTArch demo_l2vit_arch() {
  // The conv stem quarters the input: 96 px gives grids 24, 12 and 6. Windows of 6 tile all three
  // exactly (16, 4 and 1 windows), so the last local block sees its whole grid, as flatten_swin's
  // last stage does. Widths are half flatten_swin's: the first grid has four times its tokens.
  L2ViTArch arch;
  arch.num_classes = 10;
  arch.native_height = arch.native_width = 96;
  arch.window = 6;
  const int dims[] = {32, 64, 128}, heads[] = {1, 2, 4};
  for (int s = 0; s < 3; ++s) {
    L2ViTStageArch stage;
    stage.dim = dims[s];
    for (int b = 0; b < 2; ++b) {
      L2ViTBlockArch block;
      block.global = b % 2 == 1;
      block.heads = heads[s];
      block.mlp_hidden = 4 * dims[s];
      stage.blocks.push_back(block);
    }
    arch.stages.push_back(stage);
  }
  return arch;
}

std::shared_ptr<Backbone> build_demo_model(const DemoRecipe& recipe) {
  std::shared_ptr<Backbone> model;
  switch (recipe.family) {
    case DemoFamily::L2ViT:
      model = std::make_shared<L2ViTImpl>(demo_l2vit_arch());
      break;
    case DemoFamily::Swin:
      model = std::make_shared<SwinTransformerImpl>(demo_swin_arch(recipe));
      break;
    case DemoFamily::Mlla:
      model = std::make_shared<MllaImpl>(demo_mlla_arch());
      break;
    case DemoFamily::Vit:
      model = std::make_shared<VisionTransformerImpl>(demo_arch(recipe));
      break;
  }
  initialise_weights(dynamic_cast<torch::nn::Module&>(*model));
  return model;
}

std::string demo_architecture_text(const DemoRecipe& recipe) {
  if (recipe.family == DemoFamily::L2ViT)
    return "L2ViT (the authors' l2vit.py, mix_local_enhanced_vit), conv stem, input 96x96 (grids 24, 12, 6), "
           "widths 32-64-128, heads 1-2-4 (head dim 32), each stage a local block (softmax in windows of 6: 16, 4 "
           "and 1 windows) then a global block (enhanced linear attention and the LCM), 10 classes";
  if (recipe.family == DemoFamily::Mlla)
    return "MLLA (the authors' mlla.py), conv stem, input 96x96 (grids 24, 12, 6), widths 32-64-128, heads 1-2-4 "
           "(head dim 32), 2 blocks per stage, merges of ratio 4, 10 classes";
  if (recipe.family == DemoFamily::Swin) {
    const std::string kernel = recipe.attention == NativeAttention::Pola
                                   ? "polarity-aware global (alpha 4, learned power, 5x5 DWC, gate)"
                                   : "focused global (p = 3, 5x5 DWC)";
    const std::string name = recipe.attention == NativeAttention::Pola ? "PolaFormer-Swin" : "FLatten-Swin";
    return name +
           ", patch 8, input 96x96 (grids 12, 6, 3), widths 64-128-256, 2 blocks per stage, heads 2-4-8 "
           "(head dim 32), stages LSS: " +
           kernel +
           " in stage 0, softmax windows of 3 in stages 1-2 (shifted by 1 on odd blocks of stage 1; stage 2's 3x3 grid "
           "is one window), 10 classes";
  }
  const VitArch arch = demo_arch(recipe);
  return "DeiT-shaped, embed " + std::to_string(arch.embed_dim) + ", depth " + std::to_string(arch.depth) + ", " +
         std::to_string(arch.heads) + " heads (head dim " + std::to_string(arch.embed_dim / arch.heads) + "), patch " +
         std::to_string(arch.patch_size) + ", input " + std::to_string(arch.native_height()) + "x" +
         std::to_string(arch.native_width()) + " (" + std::to_string(arch.pos_grid_h) + "x" +
         std::to_string(arch.pos_grid_w) +
         " patches + class token = " + std::to_string(1 + arch.pos_grid_h * arch.pos_grid_w) + " tokens), 10 classes";
}

std::map<std::string, std::string> demo_metadata(const DemoRecipe& recipe,
                                                 const std::vector<std::string>& class_names) {
  if (recipe.family == DemoFamily::Vit) return model_metadata(demo_arch(recipe), class_names);
  // What the keys cannot show: the configured windows, the stage types and the training input.
  nlohmann::json arch;
  if (recipe.family == DemoFamily::L2ViT)
    arch = {{"family", "l2vit"}, {"heads", {1, 2, 4}}, {"window", 6}, {"img_size", 96}};
  else if (recipe.family == DemoFamily::Mlla)
    arch = {{"family", "mlla"}, {"heads", {1, 2, 4}}, {"img_size", 96}, {"depths", {2, 2, 2}}};
  else if (recipe.attention == NativeAttention::Pola)
    arch = {{"family", "pola_swin"}, {"heads", {2, 4, 8}}, {"window", 56},   {"window_s", 3},
            {"attn_type", "LSS"},    {"alpha", 4},         {"img_size", 96}, {"depths", {2, 2, 2}}};
  else
    arch = {{"family", "flatten_swin"}, {"heads", {2, 4, 8}},   {"window", 56},   {"window_s", 3},
            {"attn_type", "LSS"},       {"focusing_factor", 3}, {"img_size", 96}, {"depths", {2, 2, 2}}};
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"attnscope_arch", arch.dump()}};
  if (!class_names.empty()) metadata["class_names"] = nlohmann::json(class_names).dump();
  return metadata;
}

void initialise_weights(torch::nn::Module& model) {
  if (auto* vit = dynamic_cast<VisionTransformerImpl*>(&model)) return initialise_weights(*vit);
  torch::NoGradGuard no_grad;
  // BatchNorm (L2ViT's stem and LCM) by type: its names are Sequential indices or "bn".
  std::set<const torch::Tensor*> batch_norm_weights;
  for (const auto& module : model.modules())
    if (auto* bn = module->as<torch::nn::BatchNorm2dImpl>()) batch_norm_weights.insert(&bn->weight);
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool is_norm = name.find("norm") != std::string::npos;
    const bool is_batch_norm = std::any_of(batch_norm_weights.begin(), batch_norm_weights.end(),
                                           [&](const torch::Tensor* weight) { return weight->is_same(p); });
    if (ends_with(".bias"))
      p.zero_();
    else if ((is_norm && ends_with(".weight")) || is_batch_norm)
      p.fill_(1.0);
    else if (ends_with("attn.scale") || ends_with("positional_encoding") || ends_with("attn.power"))
      p.zero_();  // FLatten initialises both to zero, PolaFormer its power too
    else if (ends_with("attn.temperature"))
      p.fill_(1.0);  // L2ViT's torch.ones(num_heads, 1, 1)
    else
      p.normal_(0.0, 0.02).clamp_(-0.04, 0.04);
  }
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
