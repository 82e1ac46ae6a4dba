// ViT / DeiT in timm's layout (class, distillation and register tokens or global pooling, any
// width, depth, heads, patch size and input resolution) with observable, swappable attention.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "models/attention.h"

namespace attnscope {

struct BlockArch {
  AttentionArch attention;
  int mlp_hidden = 0;
  bool layer_scale = false;          // timm ls1.gamma / ls2.gamma
  bool local_concentration = false;  // L2ViT's LCM: norm3 + local_mp
};

struct VitArch {
  int embed_dim = 0;
  int depth = 0;
  int heads = 0;
  int patch_size = 16;
  int in_chans = 3;
  int pos_grid_h = 0, pos_grid_w = 0;  // the grid pos_embed was trained on
  int num_classes = 0;                 // 0: no head, the pooled features are the output
  bool class_token = true;
  bool dist_token = false;
  int register_tokens = 0;
  bool pos_embed_has_prefix = true;  // timm default; false = no_embed_class
  bool final_norm = true;            // `norm` before pooling
  bool fc_norm = false;              // `fc_norm` after pooling
  double layer_norm_eps = 1e-6;
  std::vector<BlockArch> blocks;

  int native_height() const { return pos_grid_h * patch_size; }
  int native_width() const { return pos_grid_w * patch_size; }
  TokenLayout layout_for(int height, int width) const;
  std::string family() const;  // "deit-distilled", "vit-cls", "vit-gap", with native attention
};

void to_json(nlohmann::json& j, const VitArch& arch);

// A plain softmax ViT with a class token: square input, MLP ratio 4, qkv bias.
VitArch plain_vit_arch(int embed_dim, int depth, int heads, int patch_size, int grid, int num_classes);

// Thrown between blocks when a caller's cancel check says the run is no longer wanted.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "inference cancelled"; }
};

// Called at named points of the forward pass with the tensor there, like a PyTorch forward hook
// that may return a replacement: the hook may reassign `value` (Grad-CAM swaps in a leaf that
// requires grad). Points carry timm's module names: "blocks.3.norm1", "blocks.3.norm2",
// "blocks.3" (the block's output) and "norm" (the final norm, when the model has one).
using ForwardHook = std::function<void(const std::string& point, torch::Tensor& value)>;

struct ForwardOptions {
  bool capture = true;
  std::function<bool()> cancelled;  // checked between blocks
  ForwardHook hook;                 // empty: no hook, no cost
};

struct ForwardOutput {
  torch::Tensor logits;  // [B, classes] (or pooled features when there is no head)
  TokenLayout layout;
  std::vector<AttentionCapture> layers;  // empty unless capture was asked for
};

struct LayerScaleImpl : torch::nn::Module {
  explicit LayerScaleImpl(int dim) { gamma = register_parameter("gamma", torch::ones({dim})); }
  torch::Tensor forward(const torch::Tensor& x) { return x * gamma; }
  torch::Tensor gamma;
};
TORCH_MODULE(LayerScale);

struct MlpImpl : torch::nn::Module {
  MlpImpl(int dim, int hidden);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// L2ViT's local concentration module on the patch grid: DW7x7 -> GELU -> BN -> DW7x7.
struct LocalConcentrationImpl : torch::nn::Module {
  explicit LocalConcentrationImpl(int dim);
  torch::Tensor forward(const torch::Tensor& tokens, const TokenLayout& layout);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(LocalConcentration);

struct BlockImpl : torch::nn::Module {
  BlockImpl(const BlockArch& arch, double eps);
  // `hook` (may be empty) sees "norm1", "norm2" and "" (the block output), prefixed by its caller.
  torch::Tensor forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                        AttentionCapture* capture, const std::function<void(const char*, torch::Tensor&)>& hook = {});
  // The same computation without autograd on a multi-core CPU: every stage that acts on tokens one
  // by one runs as chunks of token rows, one per core, in one parallel region.
  torch::Tensor forward_by_row_chunks(const torch::Tensor& x, const TokenLayout& layout,
                                      const AttentionSettings& settings, AttentionCapture* capture);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  LayerScale ls1{nullptr}, ls2{nullptr};
  LocalConcentration local_mp{nullptr};
};
TORCH_MODULE(Block);

struct PatchEmbedImpl : torch::nn::Module {
  PatchEmbedImpl(int in_chans, int dim, int patch);
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

class VisionTransformerImpl : public torch::nn::Module {
 public:
  explicit VisionTransformerImpl(const VitArch& arch);
  // images: [B, 3, H, W] with H, W multiples of the patch size.
  ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                        const ForwardOptions& options = {});
  const VitArch& arch() const { return arch_; }

  PatchEmbed patch_embed{nullptr};
  torch::Tensor cls_token, dist_token, reg_token, pos_embed;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr}, fc_norm{nullptr};
  torch::nn::Linear head{nullptr}, head_dist{nullptr};

 private:
  torch::Tensor embed(const torch::Tensor& images, const TokenLayout& layout);
  torch::Tensor pool_and_classify(const torch::Tensor& tokens, const TokenLayout& layout, const ForwardHook& hook);
  VitArch arch_;
};
TORCH_MODULE(VisionTransformer);

// timm's resample_abs_pos_embed: bicubic (antialiased) resize of the patch part to a new grid.
torch::Tensor resize_patch_positions(const torch::Tensor& patch_positions, int from_h, int from_w, int to_h, int to_w);

}  // namespace attnscope
