// Swin Transformer in timm's layout (hub files; Microsoft's and FLatten's .pth files are renamed to
// it by models/swin_checkpoint), and FLatten-Swin: stages of (shifted) window attention with
// a relative position bias, or FLatten's focused linear attention, joined by patch merging.
// Registered names equal timm's keys; window sizes follow timm's rules at any input size.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "models/attention_kernels_successors.h"
#include "models/backbone.h"
#include "models/checkpoint_layout.h"
#include "models/local_attention.h"
#include "models/vit.h"

namespace attnscope {

struct SwinBlockArch {
  // softmax (window), focused (FLatten's L blocks), pola (PolaFormer's L blocks), agent (Agent-Swin's
  // A blocks) or inline (InLine-Swin's I blocks); the last two attend over their whole stage, as the
  // authors' window 56 does at every stage of a 224-px input.
  NativeAttention native = NativeAttention::Softmax;
  int heads = 1;
  int window = 7;         // the window the block asks for (timm clamps it per stage resolution)
  int table_window = 7;   // softmax: the window its relative position table was trained for
  int dwc_kernel = 0;     // focused, pola: the DWC's kernel
  int encoding_side = 0;  // focused, pola: the positional encoding's trained window side
  int agents = 0;         // agent: the agent count of its position biases
  int agent_side = 0;     // agent: the grid side its position biases were trained for
  bool qkv_bias = true;
  int mlp_hidden = 0;
  // Swin V2: cosine attention with a learned logit scale per head, the bias from a small MLP over
  // log-spaced relative coordinates (cpb_mlp, normalised by the pretraining window when it is not
  // 0), q_bias / v_bias beside a bias-free qkv, and the norms after attention and MLP (post-norm).
  bool v2 = false;
  int pretrained_window = 0;
  // Agent and InLine blocks attend over their whole stage at every input size.
  bool whole_stage() const { return native == NativeAttention::Agent || native == NativeAttention::InLine; }
  // FLatten's and PolaFormer's blocks: a positional encoding for their trained window, scale and DWC.
  bool encoded() const { return native == NativeAttention::Focused || native == NativeAttention::Pola; }
};

struct SwinStageArch {
  int dim = 0;
  bool downsample = false;        // patch merging at the start of the stage (timm's layout)
  bool merge_norm_after = false;  // Swin V2's merging: reduction, then norm
  std::vector<SwinBlockArch> blocks;
};

struct SwinArch {
  int patch_size = 4;
  int in_chans = 3;
  int embed_dim = 96;
  bool patch_norm = true;
  std::vector<SwinStageArch> stages;
  int num_classes = 0;
  int native_height = 224, native_width = 224;
  double layer_norm_eps = 1e-5;
  CheckpointLayout source_layout = CheckpointLayout::Timm;
  std::string attn_type;  // FLatten's per-stage L/S letters, empty for plain Swin
};

struct SwinAttentionImpl : torch::nn::Module {
  SwinAttentionImpl(int dim, const SwinBlockArch& arch);
  // x: [B, H, W, C] normed; returns the attention output [B, H, W, C] before the residual.
  torch::Tensor forward(const torch::Tensor& x, const WindowPlan& plan, const AttentionSettings& settings,
                        AttentionCapture* capture);
  // What one attention step of this layer needs: the resolved kernel and its parameters, and for
  // windowed kernels the window grid, bias, shift mask and (with a capture) slots. Anchor kernels
  // are global: one group of all `plan.grid` tokens.
  GroupedAttention attention_step(const WindowPlan& plan, const AttentionSettings& settings, const torch::Tensor& like,
                                  bool capture);
  // Attention within groups of projected tokens [N', S, 3C] (after qkv): [N', S, C] before proj.
  torch::Tensor attend_groups(const torch::Tensor& projected, const GroupedAttention& step, AttentionCapture* capture);
  KernelParameters kernel_parameters() const;
  // The relative position bias [h, S, S] for a window (the table resized when it differs).
  torch::Tensor relative_bias(int window_h, int window_w);

  // The stacked q, k, v of tokens [..., C] -> [..., 3C] (V2: with its q and v biases).
  torch::Tensor project_input(const torch::Tensor& x);

  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::nn::Linear qkvg{nullptr};  // PolaFormer's blocks: q, k, v and the gate, in place of qkv
  torch::Tensor relative_position_bias_table;
  torch::Tensor q_bias, v_bias, logit_scale;  // Swin V2
  torch::nn::Sequential cpb_mlp{nullptr};     // Swin V2: Linear(2, 512), ReLU, Linear(512, heads)
  torch::nn::Conv2d dwc{nullptr};
  torch::Tensor scale, positional_encoding, power;      // focused and Pola blocks; power: Pola's
  successor_kernels::AgentPositionBiases agent_biases;  // Agent-Swin's position biases
  torch::nn::Sequential residual{nullptr};              // InLine-Swin: the predictor of its 3 x 3 local residual
  SwinBlockArch arch;
  int dim = 0;

 private:
  // A plan's window geometry on a device, built once (timm keeps the mask as a buffer): the shift
  // mask [G, S, S] (undefined without a shift), where it forbids, the slots, and the bias plus
  // mask as inference last added it.
  struct WindowGeometry {
    torch::Tensor shift_mask, forbidden, slots, inference_additive;
  };
  WindowGeometry& geometry(const WindowPlan& plan, torch::Device device);

  std::map<std::pair<int, int>, torch::Tensor> resized_tables_;
  std::map<std::tuple<int, int, int, int, int, int, std::string>, WindowGeometry> geometry_;
};
TORCH_MODULE(SwinAttention);

struct SwinBlockImpl : torch::nn::Module {
  SwinBlockImpl(int dim, const SwinBlockArch& arch, double eps);
  // The block without autograd on the CPU, in its window frame (x [B, H, W, C] rolled and
  // partitioned once, and back once): norms, projections and MLP by row chunks on one core each,
  // attention on all cores. `step` is attn->attention_step's, windowed. Returns the block's output
  // and, with a capture, sets `normed_input` (norm1's output, [B, N, C] in grid order).
  torch::Tensor forward_by_window_chunks(const torch::Tensor& x, const WindowPlan& plan, const GroupedAttention& step,
                                         AttentionCapture* capture, torch::Tensor& normed_input);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  SwinAttention attn{nullptr};
  Mlp mlp{nullptr};
  bool post_norm = false;  // Swin V2
};
TORCH_MODULE(SwinBlock);

struct PatchMergingImpl : torch::nn::Module {
  // V1 normalises the 4 merged cells, then reduces; V2 reduces, then normalises (norm_after).
  PatchMergingImpl(int dim, int out_dim, double eps, bool norm_after = false);
  bool norm_after = false;
  torch::Tensor forward(const torch::Tensor& x);  // [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), out]
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear reduction{nullptr};
};
TORCH_MODULE(PatchMerging);

struct SwinStageImpl : torch::nn::Module {
  SwinStageImpl(int in_dim, const SwinStageArch& arch, double eps);
  PatchMerging downsample{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};
TORCH_MODULE(SwinStage);

struct SwinPatchEmbedImpl : torch::nn::Module {
  SwinPatchEmbedImpl(int in_chans, int dim, int patch, bool with_norm, double eps);
  torch::nn::Conv2d proj{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(SwinPatchEmbed);

struct ClassifierHeadImpl : torch::nn::Module {
  ClassifierHeadImpl(int dim, int classes);
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ClassifierHead);

class SwinTransformerImpl : public StagedBackbone {
 public:
  explicit SwinTransformerImpl(const SwinArch& arch);
  // Hook points ([B, H, W, C]): "layers.S.blocks.B.norm1" and "layers.S.blocks.B", "norm", and
  // "blocks.N.norm1" / "blocks.N" with N counting attention blocks across stages.
  std::string family() const override;
  std::vector<std::string> summary_lines() const override;
  const SwinArch& arch() const { return arch_; }

  SwinPatchEmbed patch_embed{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  ClassifierHead head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  SwinArch arch_;
};
TORCH_MODULE(SwinTransformer);

}  // namespace attnscope
