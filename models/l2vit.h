// L2ViT (ChuanyangZheng/L2ViT classification/models/l2vit.py, block_type mix_local_enhanced_vit with
// the conv stem of every released model): stages alternating local window attention (LWA: softmax
// in w x w windows, no shift, no bias, no mask, zero padding after the norm) and enhanced linear
// global attention (LGA: ReLU kernel, per-head temperature, denominator clamped at 100) followed by
// the local concentration module (LCM). Registered names equal the authors' keys.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/local_attention.h"
#include "models/vit.h"

namespace attnscope {

struct L2ViTBlockArch {
  bool global = false;  // LGA (odd blocks, `local_mp` present); else LWA
  int heads = 1;
  bool qkv_bias = true;
  int mlp_hidden = 0;
};

struct L2ViTStageArch {
  int dim = 0;
  std::vector<L2ViTBlockArch> blocks;
};

struct L2ViTArch {
  int in_chans = 3;
  bool stem_conv_bias = true;  // the stem convs' bias (keys show it)
  std::vector<L2ViTStageArch> stages;
  int window = 7;  // LWA window_size (12 for L2ViT_Base_384)
  int num_classes = 0;
  int native_height = 224, native_width = 224;
};

// The stem `downsample_layers.0`: proj.proj = conv 3x3 s2, BN, ReLU, conv 3x3 s2, BN; then `norm`.
// The authors' ConvStem holds its Sequential as `proj` inside PatchEmbed's `proj`.
struct L2ViTConvStemImpl : torch::nn::Module {
  L2ViTConvStemImpl(int in_chans, int dim, bool conv_bias);
  torch::nn::Sequential proj{nullptr};
};
TORCH_MODULE(L2ViTConvStem);

struct L2ViTStemImpl : torch::nn::Module {
  L2ViTStemImpl(int in_chans, int dim, bool conv_bias);
  torch::Tensor forward(const torch::Tensor& images);  // [B, 3, H, W] -> [B, H/4, W/4, C] (padded to 4)
  L2ViTConvStem proj{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(L2ViTStem);

// `downsample_layers.i`, i > 0: LayerNorm first, then zero padding to even sides, then a 2x2 conv.
struct L2ViTDownsampleImpl : torch::nn::Module {
  L2ViTDownsampleImpl(int in_dim, int out_dim);
  torch::Tensor forward(const torch::Tensor& x);  // [B, H, W, Cin] -> [B, ceil(H/2), ceil(W/2), Cout]
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(L2ViTDownsample);

// A conditional positional encoding `cpe.i`: x + DWConv3x3(x).
struct L2ViTPositionalConvImpl : torch::nn::Module {
  explicit L2ViTPositionalConvImpl(int dim);
  torch::Tensor forward(const torch::Tensor& x);  // [B, H, W, C]
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(L2ViTPositionalConv);

struct L2ViTAttentionImpl : torch::nn::Module {
  L2ViTAttentionImpl(int dim, const L2ViTBlockArch& arch);
  // x: [B, H, W, C] normed -> [B, H, W, C] before the residual. `window` is the LWA window.
  torch::Tensor forward(const torch::Tensor& x, int window, const AttentionSettings& settings,
                        AttentionCapture* capture);
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::Tensor temperature;  // LGA: [h, 1, 1]
  L2ViTBlockArch arch;
  int dim = 0;
};
TORCH_MODULE(L2ViTAttention);

struct L2ViTBlockImpl : torch::nn::Module {
  L2ViTBlockImpl(int dim, const L2ViTBlockArch& arch);
  torch::nn::ModuleList cpe{nullptr};  // LWA: before and after the attention; LGA: before only
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  L2ViTAttention attn{nullptr};
  Mlp mlp{nullptr};
  LocalConcentration local_mp{nullptr};  // LGA only
};
TORCH_MODULE(L2ViTBlock);

class L2ViTImpl : public StagedBackbone {
 public:
  explicit L2ViTImpl(const L2ViTArch& arch);
  // Hook points: "stages.S.B.norm1" and "stages.S.B" ([B, H, W, C]), "norm", and "blocks.N.norm1" /
  // "blocks.N" with N counting blocks across stages.
  std::string family() const override { return "l2vit"; }
  std::vector<std::string> summary_lines() const override;
  const L2ViTArch& arch() const { return arch_; }

  torch::nn::ModuleList downsample_layers{nullptr};
  torch::nn::ModuleList stages{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  L2ViTArch arch_;
};
TORCH_MODULE(L2ViT);

// The LCM's spatial mixing as the views show it after a global layer, per channel c: conv2_c .
// (gain_c) . conv1_c with gain_c = bn.weight_c / sqrt(running_var_c + eps) / 2 (BatchNorm folded,
// GELU linearised at 0, slope 1/2); biases and BatchNorm shift mix no tokens and are left out.
constexpr double kLcmGeluSlope = 0.5;
void capture_local_concentration(const LocalConcentrationImpl& lcm, AttentionCapture& capture);

}  // namespace attnscope
