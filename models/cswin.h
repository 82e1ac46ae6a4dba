// FLatten-CSwin (LeapLabTHU/FLatten-Transformer models/flatten_cswin.py): a conv stem, stages of
// cross-shaped window blocks joined by conv merges. A block's qkv runs on the whole block; its
// channels split into two branches, vertical stripes (full height, split_size wide) and horizontal
// stripes (split_size high, full width), each with LePE (a depthwise 3x3 on V per stripe) added
// after attention x V. The last stage, and blocks whose training grid equals their stripe, have a
// single branch over the whole grid. Focused (L) blocks run FLatten's focused linear attention with
// its scale, positional encoding and DWC. Registered names equal the authors' checkpoint keys.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/attention_kernels_successors.h"
#include "models/backbone.h"
#include "models/vit.h"

namespace attnscope {

struct CSwinBlockArch {
  // softmax (S), focused (FLatten's L), agent (Agent-CSwin's A) or inline (InLine-CSwin's I); the last
  // two as their authors run them: one branch over the whole grid (la_split_size = the grid)
  NativeAttention native = NativeAttention::Softmax;
  int heads = 1;                   // the block's total (each of two branches has half)
  int branches = 2;                // 2: vertical + horizontal stripes; 1: the whole grid
  int split = 1;                   // stripe width of a two-branch block
  int dwc_kernel = 0;              // focused: the DWC's kernel
  int encoding_side = 0;           // focused: the positional encoding's trained grid side
  int agents = 0, agent_side = 0;  // agent: its count and its biases' grid side
  bool qkv_bias = true;
  int mlp_hidden = 0;
};

struct CSwinStageArch {
  int dim = 0;
  std::vector<CSwinBlockArch> blocks;
};

struct CSwinArch {
  int in_chans = 3;
  int embed_dim = 64;
  std::vector<CSwinStageArch> stages;
  int num_classes = 0;
  int native_height = 224, native_width = 224;
  double focusing_factor = 3.0;  // MODEL.LA.FOCUSING_FACTOR (informative: runs use the p setting)
  std::string attn_type;         // the authors' per-stage letters (L, S or the M<n> form)
  std::vector<int> split_size, la_split_size;
};

// Stripe orientation of a branch: the authors' LePEAttention idx (0 vertical, 1 horizontal, -1 whole grid).
enum class StripeOrientation { Vertical, Horizontal, Whole };
std::string to_string(StripeOrientation orientation);

// How one branch's stripes tile a layer's grid. A stripe that does not divide the grid is padded
// with zeros as Microsoft's CSwin segmentation backbone does: half (rounded down) before, the rest after.
struct StripePlan {
  StripeOrientation orientation = StripeOrientation::Whole;
  int grid_h = 0, grid_w = 0;
  int stripe_h = 0, stripe_w = 0;
  int pad_top = 0, pad_left = 0;
  int padded_h = 0, padded_w = 0;
  int stripes() const { return (padded_h / stripe_h) * (padded_w / stripe_w); }
  int stripe_area() const { return stripe_h * stripe_w; }
};
StripePlan plan_stripes(int grid_h, int grid_w, StripeOrientation orientation, int split);

// [G, S] int64: the image token (row-major) each stripe slot holds, -1 for padding.
torch::Tensor stripe_slots(const StripePlan& plan);

// One LePEAttention / FocusedLinearAttention branch (`attns.i`): its LePE conv and, for focused
// blocks, FLatten's scale, positional encoding and DWC.
struct CSwinBranchImpl : torch::nn::Module {
  CSwinBranchImpl(int dim, const CSwinBlockArch& arch);
  // q, k, v: [B, H, W, Cb] of this branch's channels -> attention x V + LePE (+ DWC, or InLine's
  // residual predicted from `input_mean`, the block input's token mean of these channels [B, Cb]).
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const StripePlan& plan,
                        const AttentionSettings& settings, AttentionCapture* capture, const torch::Tensor& input_mean);

  torch::nn::Conv2d get_v{nullptr}, dwc{nullptr};
  torch::Tensor scale, positional_encoding;
  successor_kernels::AgentPositionBiases agent_biases;  // agent_cswin's position biases
  torch::nn::Sequential residual{nullptr};              // inline_cswin's local residual
  CSwinBlockArch arch;
  int dim = 0, heads = 0;
};
TORCH_MODULE(CSwinBranch);

struct CSwinBlockImpl : torch::nn::Module {
  CSwinBlockImpl(int dim, const CSwinBlockArch& arch, double eps);
  // x: [B, H, W, C] normed -> the attention output [B, H, W, C] before the residual; `input` is the
  // block's input before norm1 (InLine predicts its residual from its token mean).
  torch::Tensor attend(const torch::Tensor& x, const AttentionSettings& settings, AttentionCapture* capture,
                       const torch::Tensor& input);
  std::vector<StripePlan> plans(int grid_h, int grid_w) const;

  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::ModuleList attns{nullptr};
  Mlp mlp{nullptr};
  CSwinBlockArch arch;
  int dim = 0;
};
TORCH_MODULE(CSwinBlock);

// Merge_Block: Conv2d(C, 2C, 3, stride 2, padding 1) then LayerNorm.
struct CSwinMergeImpl : torch::nn::Module {
  CSwinMergeImpl(int in_dim, int out_dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);  // [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), out]
  torch::nn::Conv2d conv{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(CSwinMerge);

class CSwinTransformerImpl : public StagedBackbone {
 public:
  explicit CSwinTransformerImpl(const CSwinArch& arch);
  // Hook points ([B, H, W, C]): "stageS.B.norm1" and "stageS.B" (S from 1, as the authors name
  // them), "blocks.N.norm1" / "blocks.N" with N counting blocks across stages, "stage1_conv_embed",
  // "mergeS" and "norm".
  std::string family() const override;
  std::vector<std::string> summary_lines() const override;
  const CSwinArch& arch() const { return arch_; }

  torch::nn::Sequential stage1_conv_embed{nullptr};  // 0: conv, 1: the authors' Rearrange, 2: LayerNorm
  torch::nn::Conv2d stem_conv{nullptr};
  torch::nn::LayerNorm stem_norm{nullptr};
  std::vector<torch::nn::ModuleList> stages;  // registered as stage1..stageN
  std::vector<CSwinMerge> merges;             // registered as merge1..merge(N-1)
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  CSwinArch arch_;
};
TORCH_MODULE(CSwinTransformer);

}  // namespace attnscope
