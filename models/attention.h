// One attention module whose registered names equal its authors' checkpoint keys (timm qkv/proj,
// FLatten dwc/scale/positional_encoding, L2ViT temperature, AnchorFormer x_to_emb/dist_anchor_B/
// to_out), able to run any variant from its own q, k, v and to record what the views need.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/attention_kernels.h"
#include "models/attention_settings.h"
#include "models/token_layout.h"

namespace attnscope {

// The kernel a module was trained with, read from which parameters its checkpoint carries
// (plain ReLU linear attention has none of its own: files say so in their metadata).
enum class NativeAttention { Softmax, Linear, Focused, Enhanced, Anchor };
std::string to_string(NativeAttention native);

struct AttentionArch {
  int dim = 0;
  int heads = 0;
  bool qkv_bias = true;
  NativeAttention native = NativeAttention::Softmax;
  int dwc_kernel = 0;                  // focused: depthwise conv size, 0 when absent
  bool has_scale = false;              // focused: softplus scale [1, 1, C]
  int positional_encoding_tokens = 0;  // focused: tokens of the K positional encoding, 0 when absent
  int anchors = 0;                     // anchor: learned anchors m
};

// Everything one attention layer computed that the views read: no view re-runs the model.
struct AttentionCapture {
  ResolvedAttention attention;
  TokenLayout layout;
  int heads = 0;
  int head_dim = 0;
  torch::Tensor q, k, v;       // [B, h, T, d] projections (focused: k with its positional encoding)
  KernelFeatures features;     // what the scores are built from
  torch::Tensor dwc_weight;    // [d, 1, k, k] when the DWC term ran
  torch::Tensor normed_input;  // norm1 output [B, T, C]; part of the graph when gradients are on
  // [B, h, T, T]: probabilities a model reported itself (TorchScript files); q, k, v and the
  // features are then empty, and rows are read from here.
  torch::Tensor probabilities;

  // Rows of the equivalent T x T matrix for some queries: [Q, T] (with the DWC band when on).
  torch::Tensor rows(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const;
  torch::Tensor row(int64_t batch, int64_t head, int64_t query) const;
  torch::Tensor matrix(int64_t batch, int64_t head) const;  // [T, T]
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionArch& arch);

  // x: [B, T, C] -> [B, T, C]. Fills `capture` when given.
  torch::Tensor forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                        AttentionCapture* capture = nullptr);

  // forward = project_output(mix(project_input(x))). The projections act on each token alone; only
  // mix looks across tokens.
  torch::Tensor project_input(const torch::Tensor& x);  // [..., C] -> [..., 3C] (anchor: [..., 2C])
  int64_t projected_dim() const { return (arch_.native == NativeAttention::Anchor ? 2 : 3) * int64_t(arch_.dim); }
  torch::Tensor mix(const torch::Tensor& projected, const TokenLayout& layout, const AttentionSettings& settings,
                    AttentionCapture* capture = nullptr);     // [B, T, 3C] -> [B, T, C], heads merged
  torch::Tensor project_output(const torch::Tensor& merged);  // [..., C] -> [..., C]

  ResolvedAttention resolve(const AttentionSettings& settings, const TokenLayout& layout) const;
  const AttentionArch& arch() const { return arch_; }

  // Registered with the names of the checkpoints that carry them; unused ones stay null.
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::nn::Linear x_to_emb{nullptr}, dist_anchor_B{nullptr};
  torch::nn::Sequential to_out{nullptr};     // AnchorFormer's to_out.0
  torch::nn::Linear to_out_linear{nullptr};  // the same layer, held directly
  torch::nn::Conv2d dwc{nullptr};
  torch::Tensor scale, positional_encoding, temperature;

 private:
  KernelFeatures kernel_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                                 const TokenLayout& layout) const;
  AttentionArch arch_;
};
TORCH_MODULE(Attention);

}  // namespace attnscope
