// PVT v2 in timm's layout (the original whai362 and FLatten layouts are renamed to it by
// models/pvt_checkpoint), with FLatten-PVT v2's focused blocks: overlapping patch embeddings,
// spatial-reduction attention whose keys are a reduced grid (PVT v2-li: pooled to 7 x 7), and an
// MLP with a depthwise conv. Registered names equal timm's keys.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/attention_kernels_successors.h"
#include "models/backbone.h"
#include "models/checkpoint_layout.h"
#include "models/local_attention.h"

namespace attnscope {

struct PvtBlockArch {
  // softmax (spatial reduction), focused (FLatten), or the successors' PVT blocks (models/pvt_v1):
  // agent (agent_pvt), inline (inline_pvt), pola (pola_pvt)
  NativeAttention native = NativeAttention::Softmax;
  int heads = 1;
  int sr_ratio = 1;     // keys from a grid reduced by this stride (1: every token)
  bool pooled = false;  // PVT v2-li: keys from the grid average-pooled to 7 x 7
  bool qkv_bias = true;
  int dwc_kernel = 0;              // focused, pola: the DWC's kernel (per head channel); agent: 3 over all C
  int encoding_tokens = 0;         // focused, pola: tokens of the positional encoding (the training key grid)
  int agents = 0, agent_side = 0;  // agent: its count and the grid side of its biases
  int mlp_hidden = 0;
  bool mlp_dwconv = true;  // PVT v2's MLP has a depthwise conv; PVT v1's is fc1, GELU, fc2
};

struct PvtStageArch {
  int dim = 0;
  bool downsample = false;  // stage > 0: an overlapping 3x3 stride-2 patch embedding first
  std::vector<PvtBlockArch> blocks;
};

struct PvtArch {
  int in_chans = 3;
  std::vector<PvtStageArch> stages;
  bool linear = false;  // PVT v2-li: ReLU before the MLP's depthwise conv
  int num_classes = 0;
  int native_height = 224, native_width = 224;
  double block_eps = 1e-6;  // blocks and stage norms (the factories' partial(LayerNorm, eps=1e-6))
  double embed_eps = 1e-5;  // patch embeddings and attn.norm (nn.LayerNorm's default)
  CheckpointLayout source_layout = CheckpointLayout::Timm;
  bool flatten = false;
};

struct PvtAttentionImpl : torch::nn::Module {
  PvtAttentionImpl(int dim, const PvtBlockArch& arch, double eps);
  // x: [B, N, C] normed tokens of an H x W grid; returns [B, N, C].
  torch::Tensor forward(const torch::Tensor& x, int height, int width, const AttentionSettings& settings,
                        AttentionCapture* capture, TokenLayout& key_layout);
  // The tokens keys and values come from: x itself, the grid reduced by `sr`, or pooled (-li);
  // sets key_layout's grid.
  torch::Tensor reduced_keys(const torch::Tensor& x, int height, int width, TokenLayout& key_layout);
  // Attention of the projected queries [B, N, C] over `reduced`'s keys and values (and FLatten's
  // DWC): [B, N, C] before `proj`.
  torch::Tensor mix(const torch::Tensor& queries, const torch::Tensor& reduced, int height, int width,
                    const AttentionSettings& settings, AttentionCapture* capture, const TokenLayout& key_layout);
  torch::nn::Linear q{nullptr}, kv{nullptr}, proj{nullptr};
  torch::nn::Linear qg{nullptr};  // pola_pvt: the queries and its gate g, in place of q
  torch::nn::Conv2d sr{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Conv2d dwc{nullptr};
  torch::Tensor scale, positional_encoding, power;
  successor_kernels::AgentPositionBiases agent_biases;  // agent_pvt's position biases
  torch::nn::Sequential residual{nullptr};              // inline_pvt's local residual
  PvtBlockArch arch;
  int dim = 0;
};
TORCH_MODULE(PvtAttention);

struct PvtMlpImpl : torch::nn::Module {
  PvtMlpImpl(int dim, int hidden, bool relu, bool depthwise = true);
  torch::Tensor forward(const torch::Tensor& x, int height, int width);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Conv2d dwconv{nullptr};
  bool relu = false;
};
TORCH_MODULE(PvtMlp);

struct PvtBlockImpl : torch::nn::Module {
  PvtBlockImpl(int dim, const PvtBlockArch& arch, bool linear, double block_eps, double embed_eps);
  // The block without autograd on the CPU: the per-token ops by row chunks, one core each, the
  // spatial reduction, attention and depthwise conv whole on all cores. Returns the block's output
  // and sets `normed_input` (norm1's output) and key_layout's grid.
  torch::Tensor forward_by_row_chunks(const torch::Tensor& x, int height, int width, const AttentionSettings& settings,
                                      AttentionCapture* capture, TokenLayout& key_layout, torch::Tensor& normed_input);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  PvtAttention attn{nullptr};
  PvtMlp mlp{nullptr};
};
TORCH_MODULE(PvtBlock);

struct OverlapPatchEmbedImpl : torch::nn::Module {
  // PVT v2's overlapping embedding pads kernel / 2; PVT v1's (kernel = stride) `padding` 0.
  OverlapPatchEmbedImpl(int in_chans, int dim, int kernel, int stride, double eps, int padding = -1);
  torch::nn::Conv2d proj{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(OverlapPatchEmbed);

struct PvtStageImpl : torch::nn::Module {
  PvtStageImpl(int in_dim, const PvtStageArch& arch, bool linear, double block_eps, double embed_eps);
  OverlapPatchEmbed downsample{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(PvtStage);

class PyramidVisionTransformerImpl : public StagedBackbone {
 public:
  explicit PyramidVisionTransformerImpl(const PvtArch& arch);
  // Hook points (tokens [B, N, C] of the stage's grid): "stages.S.blocks.B.norm1",
  // "stages.S.blocks.B", "stages.S.norm", and "blocks.N.norm1" / "blocks.N" across stages.
  std::string family() const override;
  std::vector<std::string> summary_lines() const override;
  const PvtArch& arch() const { return arch_; }

  OverlapPatchEmbed patch_embed{nullptr};
  torch::nn::ModuleList stages{nullptr};
  torch::nn::Linear head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor leave_stage(int stage, const StageTokens& tokens, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  PvtArch arch_;
};
TORCH_MODULE(PyramidVisionTransformer);

}  // namespace attnscope
