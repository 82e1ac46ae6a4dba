// MLLA (LeapLabTHU/MLLA models/mlla.py, "Demystify Mamba in Vision: A Linear Attention Perspective",
// NeurIPS 2024) in its authors' keys: a convolutional stem (BatchNorm in eval mode), stages of MLLA
// blocks (a depthwise conv position encoding around a Mamba-like block: in_proj, a depthwise conv and
// SiLU, MLLA's linear attention with RoPE and LePE whose values are its input, gated by
// SiLU(act_proj(x)), out_proj) joined by convolutional merges, then norm, mean and head.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/vit.h"

namespace attnscope {

struct MllaBlockArch {
  int mlp_hidden = 0;
  bool qkv_bias = true;
};

struct MllaStageArch {
  int dim = 0;
  int heads = 1;
  std::vector<MllaBlockArch> blocks;
  int merge_hidden = 0;  // the merge after this stage: its widened channels (0: none)
};

struct MllaArch {
  int in_chans = 3;
  int embed_dim = 64;
  std::vector<MllaStageArch> stages;
  int num_classes = 0;
  int native_height = 224, native_width = 224;
};

// ConvLayer: a convolution, then BatchNorm (eval) and ReLU where the layer has them.
struct MllaConvLayerImpl : torch::nn::Module {
  MllaConvLayerImpl(torch::nn::Conv2dOptions options, bool norm, bool relu);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d norm{nullptr};
  bool relu = true;
};
TORCH_MODULE(MllaConvLayer);

struct MllaStemImpl : torch::nn::Module {
  MllaStemImpl(int in_chans, int dim);
  torch::Tensor forward(const torch::Tensor& images);  // -> [B, C, H/4, W/4]
  MllaConvLayer conv1{nullptr};
  torch::nn::Sequential conv2{nullptr}, conv3{nullptr};
};
TORCH_MODULE(MllaStem);

// LinearAttention: q, k from `qk`, v its input; `rope.rotations` is the buffer the authors store for
// their training grid (attnscope rotates at the input's grid, the same values there); LePE on v.
struct MllaAttentionImpl : torch::nn::Module {
  MllaAttentionImpl(int dim, int heads, int grid_h, int grid_w, bool qkv_bias);
  // x: [B, N, C] of an H x W grid -> the attention output plus LePE, [B, N, C].
  torch::Tensor forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                        AttentionCapture* capture);
  torch::nn::Linear qk{nullptr};
  torch::nn::Conv2d lepe{nullptr};
  std::shared_ptr<torch::nn::Module> rope;
  int heads = 1;
};
TORCH_MODULE(MllaAttention);

struct MllaBlockImpl : torch::nn::Module {
  MllaBlockImpl(const MllaStageArch& stage, const MllaBlockArch& block, int grid_h, int grid_w);
  torch::nn::Conv2d cpe1{nullptr}, dwc{nullptr}, cpe2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear in_proj{nullptr}, act_proj{nullptr}, out_proj{nullptr};
  MllaAttention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(MllaBlock);

class MllaImpl : public StagedBackbone {
 public:
  explicit MllaImpl(const MllaArch& arch);
  std::string family() const override { return "mlla"; }
  std::vector<std::string> summary_lines() const override;

  MllaStem patch_embed{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  MllaArch arch_;
};
TORCH_MODULE(Mlla);

}  // namespace attnscope
