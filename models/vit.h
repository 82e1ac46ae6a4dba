// ViT / DeiT in timm's layout (class, distillation and register tokens or global pooling, any
// width, depth, heads, patch size and input resolution) with observable, swappable attention.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/enum_names.h"
#include "models/attention.h"
#include "models/backbone.h"
#include "models/checkpoint_layout.h"
#include "models/residual_hooks.h"

namespace attnscope {

// The MLP's activation: timm/HF ViT use exact GELU, OpenAI CLIP x * sigmoid(1.702 x), timm's
// gelu_tanh the tanh approximation, SwiGLU SiLU.
enum class MlpActivation { Gelu, QuickGelu, GeluTanh, Silu };
template <>
struct EnumTable<MlpActivation> {
  static const std::vector<EnumEntry<MlpActivation>>& entries();
};
// "gelu", "quick_gelu", "gelu_tanh", "silu" (timm's act_layer names); parse also takes
// transformers' and timm's other names of the same functions and throws std::invalid_argument
// listing them.
inline std::string to_string(MlpActivation activation) { return enum_name(activation); }
MlpActivation parse_mlp_activation(const std::string& name);

// A gated MLP (GLU) keeps its two input projections packed in fc1 (timm's GluMlp: the first half is
// gated, act(x1) * x2) or apart as fc1_g and fc1_x (timm's SwiGLU: act(g) * x); None: plain fc1.
enum class MlpGate { None, Packed, Separate };

struct BlockArch {
  AttentionArch attention;
  int mlp_hidden = 0;  // the width fc2 reads
  MlpActivation activation = MlpActivation::Gelu;
  MlpGate gate = MlpGate::None;
  bool mlp_norm = false;             // mlp.norm over the hidden width before fc2 (timm scale_mlp)
  bool layer_scale = false;          // timm ls1.gamma / ls2.gamma (EVA's gamma_1 / gamma_2 renamed)
  bool local_concentration = false;  // L2ViT's LCM: norm3 + local_mp
};

// What the final features are read from: the class token, the mean of the patch tokens, or an
// attention-pool head (`attn_pool`, SigLIP's MAP and PE's: a learned query attending over the
// tokens, then its own MLP).
enum class GlobalPool { Token, Average, AttentionPool };
template <>
struct EnumTable<GlobalPool> {
  static const std::vector<EnumEntry<GlobalPool>>& entries();
};
inline std::string to_string(GlobalPool pool) { return enum_name(pool); }  // "token", "avg", "map" (timm's)

struct AttentionPoolArch {
  int heads = 0;
  int mlp_hidden = 0;
  MlpActivation activation = MlpActivation::Gelu;
  bool include_prefix = false;  // EVA's pool attends over the class token too; timm's ViT drops it
};

// CaiT's class-attention blocks (blocks_token_only.N): after the blocks, the class token alone
// queries itself and the patch tokens, which they leave unchanged.
struct ClassAttentionArch {
  int mlp_hidden = 0;
  bool qkv_bias = true;
};

// How the patch part of pos_embed follows another input grid: bicubic, align_corners=False, to the
// grid's size (timm antialiased, Hugging Face not), or, with an offset, by the scale factor
// (grid + offset) / trained grid as DINOv2 does.
struct PositionInterpolation {
  bool antialias = true;
  double offset = 0.0;
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
  bool abs_pos_embed = true;  // pos_embed; DINOv3 has none (its positions are rotary)
  RotaryArch rope;            // rotary positions of every block's queries and keys
  GlobalPool pool = GlobalPool::Token;
  AttentionPoolArch attn_pool;  // when pool is AttentionPool
  // Leading prefix tokens that pos_embed covers: -1 all of them (timm's default), 0 (timm's
  // no_embed_class) or 1, the class token alone (DINOv2: its registers get no position).
  int pos_embed_prefix_tokens = -1;
  PositionInterpolation pos_interpolation;
  bool patch_bias = true;  // OpenAI CLIP's conv1 has none
  bool norm_pre = false;   // `norm_pre` before the blocks (CLIP's ln_pre)
  bool final_norm = true;  // `norm` before pooling
  bool fc_norm = false;    // `fc_norm` after pooling
  bool head_bias = true;   // CLIP's projection `x @ proj` is a head without bias
  bool dist_head = true;   // `head_dist` beside `head` when there is a distillation token
                           // (HF's DeiTForImageClassification has none: the class token alone)
  bool pooler = false;     // Hugging Face ViTModel's pooler: tanh(dense(class token))
  double layer_norm_eps = 1e-6;
  // What the output is: logits (a classifier), an embedding (CLIP's image embedding) or features
  // (pooled features of a headless model).
  OutputKind output_kind = OutputKind::Logits;
  CheckpointLayout source_layout = CheckpointLayout::Timm;  // the layout the weights came in
  std::vector<BlockArch> blocks;
  // CaiT: class-attention blocks after `blocks`. The class token (cls_token) then joins only there:
  // `class_token` is false, the blocks' stream holds the patches alone.
  std::vector<ClassAttentionArch> class_blocks;

  int prefix_tokens() const { return int(class_token) + int(dist_token) + register_tokens; }
  int positioned_prefix_tokens() const {
    return pos_embed_prefix_tokens < 0 ? prefix_tokens() : pos_embed_prefix_tokens;
  }

  int native_height() const { return pos_grid_h * patch_size; }
  int native_width() const { return pos_grid_w * patch_size; }
  TokenLayout layout_for(int height, int width) const;
  std::string family() const;  // "deit-distilled", "vit-cls", "vit-gap", with native attention
};

void to_json(nlohmann::json& j, const VitArch& arch);

// A plain softmax ViT with a class token: square input, MLP ratio 4, qkv bias.
VitArch plain_vit_arch(int embed_dim, int depth, int heads, int patch_size, int grid, int num_classes);

struct LayerScaleImpl : torch::nn::Module {
  explicit LayerScaleImpl(int dim) { gamma = register_parameter("gamma", torch::ones({dim})); }
  torch::Tensor forward(const torch::Tensor& x) { return x * gamma; }
  torch::Tensor gamma;
};
TORCH_MODULE(LayerScale);

struct MlpImpl : torch::nn::Module {
  MlpImpl(int dim, int hidden, MlpActivation activation = MlpActivation::Gelu, MlpGate gate = MlpGate::None,
          bool norm = false, double eps = 1e-6);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc1_g{nullptr}, fc1_x{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  MlpActivation activation;
  MlpGate gate;
};
TORCH_MODULE(Mlp);

// `x` through an MLP activation.
torch::Tensor activate(const torch::Tensor& x, MlpActivation activation);

// timm's AttentionPoolLatent with one latent query: the pooled features [B, C] of tokens [B, N, C].
struct AttentionPoolImpl : torch::nn::Module {
  AttentionPoolImpl(int dim, const AttentionPoolArch& arch, double eps);
  // `probabilities` (may be null) receives the pool's attention [B, heads, N].
  torch::Tensor forward(const torch::Tensor& tokens, torch::Tensor* probabilities = nullptr);
  torch::Tensor latent;
  torch::nn::Linear q{nullptr}, kv{nullptr}, proj{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  Mlp mlp{nullptr};
  int heads;
};
TORCH_MODULE(AttentionPool);

// timm's ClassAttn: the class token's query over every token.
struct ClassAttentionImpl : torch::nn::Module {
  ClassAttentionImpl(int dim, int heads, bool qkv_bias);
  // tokens [B, N, C], the class token first -> its update [B, 1, C]; `probabilities` (may be null)
  // receives the class token's attention [B, heads, N].
  torch::Tensor forward(const torch::Tensor& tokens, torch::Tensor* probabilities = nullptr);
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, proj{nullptr};
  int heads;
};
TORCH_MODULE(ClassAttention);

// timm's LayerScaleBlockClassAttn (its gamma_1, gamma_2 read as ls1.gamma, ls2.gamma).
struct ClassAttentionBlockImpl : torch::nn::Module {
  ClassAttentionBlockImpl(int dim, int heads, const ClassAttentionArch& arch, MlpActivation activation, double eps);
  // The class token [B, 1, C] after the block, from the patch tokens [B, N, C] and its value before.
  torch::Tensor forward(const torch::Tensor& patches, const torch::Tensor& cls, torch::Tensor* probabilities = nullptr);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  ClassAttention attn{nullptr};
  Mlp mlp{nullptr};
  LayerScale ls1{nullptr}, ls2{nullptr};
};
TORCH_MODULE(ClassAttentionBlock);

// L2ViT's local concentration module on the patch grid: DW7x7 -> GELU -> BN -> DW7x7.
struct LocalConcentrationImpl : torch::nn::Module {
  explicit LocalConcentrationImpl(int dim);
  torch::Tensor forward(const torch::Tensor& tokens, const TokenLayout& layout);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(LocalConcentration);

// What one block records of its residual stream and changes in it (models/residual_hooks.h).
struct BlockStreams {
  HeadStreams heads;  // its heads' z, recorded and/or replaced
  bool record_outputs = false;
  torch::Tensor attn_out, local_out, mlp_out;  // out: what each part adds to the residual
  // Transforms at this block's attention output, middle stream and MLP output, in order.
  std::vector<const StreamTransform*> transforms;
};

struct BlockImpl : torch::nn::Module {
  BlockImpl(const BlockArch& arch, double eps);
  // `hook` (may be empty) sees "norm1", "norm2" and "" (the block output), prefixed by its caller;
  // `probabilities_hook` (may be empty) the attention's explicit matrix (see AttentionHook).
  torch::Tensor forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                        AttentionCapture* capture, const std::function<void(const char*, torch::Tensor&)>& hook = {},
                        const std::function<void(torch::Tensor&)>& probabilities_hook = {});
  // The same computation without autograd on a multi-core CPU: every stage that acts on tokens one
  // by one runs as chunks of token rows, one per core, in one parallel region.
  torch::Tensor forward_by_row_chunks(const torch::Tensor& x, const TokenLayout& layout,
                                      const AttentionSettings& settings, AttentionCapture* capture);
  // forward, keeping what each part adds and each head's z, with heads' z replaced (`streams`).
  torch::Tensor forward_streams(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                                AttentionCapture* capture, BlockStreams& streams,
                                const std::function<void(const char*, torch::Tensor&)>& hook = {},
                                const std::function<void(torch::Tensor&)>& probabilities_hook = {});
  // [C]: the value projection's bias plus norm1's bias through W_V (ViT-Prisma's b_V after
  // fold_layer_norm), which fold_value_biases moves out of the heads into the layer.
  torch::Tensor value_bias() const;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  LayerScale ls1{nullptr}, ls2{nullptr};
  LocalConcentration local_mp{nullptr};
};
TORCH_MODULE(Block);

struct PatchEmbedImpl : torch::nn::Module {
  PatchEmbedImpl(int in_chans, int dim, int patch, bool bias = true);
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

// A staged backbone of one stage: its blocks are named "blocks.N" as timm's keys are.
class VisionTransformerImpl : public StagedBackbone {
 public:
  explicit VisionTransformerImpl(const VitArch& arch);
  // images: [B, 3, H, W] with H, W multiples of the patch size. Hook points carry timm's module
  // names: "blocks.3.norm1", "blocks.3.norm2", "blocks.3" (the block's output) and "norm".
  const VitArch& arch() const { return arch_; }

  std::string family() const override { return arch_.family(); }
  std::vector<std::string> summary_lines() const override;
  OutputKind output_kind() const override { return arch_.output_kind; }
  bool hierarchical() const override { return false; }

  // The forward; with heads ablated (settings.ablation) it runs as forward_with_streams with no
  // edits of its own, so that every analysis sees the ablated model.
  ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                        const ForwardOptions& options = {}) override;
  // Mean ablation's means (models/head_ablation.h); a forward with mean ablation refuses means
  // taken for other settings or another input size.
  void set_head_means(std::shared_ptr<const HeadMeanOutputs> means) { head_means_ = std::move(means); }
  const HeadMeanOutputs* head_means() const { return head_means_.get(); }

  // The residual stream (models/residual_hooks.h). The input of block 0: the tokens after the
  // embedding and norm_pre (Prisma's blocks.0.hook_resid_pre); `images` checked as forward checks them.
  StageTokens embed(const torch::Tensor& images);
  // The forward from the input of block `first`, `resid_pre` [B, T, C] on `layout`, with `edits`
  // applied and what `recording` asks kept in `record` (may be null when it asks nothing). Blocks
  // without an edit or a per-block recording run as forward runs them. Captures (when
  // options.capture) cover blocks first.. only. Throws std::invalid_argument for an edit outside
  // the model or before `first`, duplicate edits, or a replacement of the wrong shape.
  ForwardOutput forward_from_block(int first, const torch::Tensor& resid_pre, const TokenLayout& layout,
                                   const AttentionSettings& settings, const ForwardOptions& options,
                                   const StreamEdits& edits, const StreamRecording& recording,
                                   ResidualStreamRecord* record);
  // The whole forward with edits and a record: embed, then forward_from_block(0, ...).
  ForwardOutput forward_with_streams(const torch::Tensor& images, const AttentionSettings& settings,
                                     const ForwardOptions& options, const StreamEdits& edits,
                                     const StreamRecording& recording, ResidualStreamRecord* record);
  // The output from the last block's output [B, T, C] (final norm, pooling, heads), as forward ends.
  torch::Tensor read_out(const torch::Tensor& tokens, const TokenLayout& layout) {
    return pool_and_classify(tokens, layout, {});
  }

  PatchEmbed patch_embed{nullptr};
  torch::Tensor cls_token, dist_token, reg_token, pos_embed;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::ModuleList blocks_token_only{nullptr};  // CaiT's class-attention blocks
  torch::nn::LayerNorm norm_pre{nullptr}, norm{nullptr}, fc_norm{nullptr};
  torch::nn::Linear head{nullptr}, head_dist{nullptr};
  torch::nn::Sequential pooler{nullptr};  // Hugging Face ViTModel: pooler.dense
  AttentionPool attn_pool{nullptr};

  // The pooled features of the final tokens after `norm` ([B, T, C] -> [B, C]) as arch().pool
  // says; `pool_probabilities` (may be null) receives the attention-pool head's attention.
  torch::Tensor pool(const torch::Tensor& normed, const TokenLayout& layout,
                     std::vector<PoolAttention>* pool_probabilities = nullptr);
  // CaiT: the blocks' output [B, N, C] with the class token the class-attention blocks compute put
  // first ([B, 1 + N, C], on the layout `with_class_token` gives), their attention appended to
  // `probabilities` (may be null).
  torch::Tensor attend_from_class_token(const torch::Tensor& patches, std::vector<PoolAttention>* probabilities);
  // The layout the final norm and the pooling read: CaiT's with its class token joined.
  TokenLayout readout_layout(const TokenLayout& blocks_layout) const;

 protected:
  nlohmann::json describe_architecture() const override { return arch_; }
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  // `edits` and the session's own from block `first` on: the heads settings.ablation knocks out,
  // and the sparse autoencoder's intervention (settings.sae).
  StreamEdits with_session_edits(const StreamEdits& edits, const AttentionSettings& settings, int first,
                                 int64_t tokens) const;
  torch::Tensor embed_tokens(const torch::Tensor& images, const TokenLayout& layout);
  torch::Tensor pool_and_classify(const torch::Tensor& tokens, const TokenLayout& layout, const ForwardHook& hook,
                                  std::vector<PoolAttention>* pool_attention = nullptr);
  VitArch arch_;
  std::shared_ptr<const HeadMeanOutputs> head_means_;
};
TORCH_MODULE(VisionTransformer);

// Resizes the patch part of pos_embed [1, from_h * from_w, C] to a new grid: timm's
// resample_abs_pos_embed by default, Hugging Face's or DINOv2's interpolation as `how` says.
torch::Tensor resize_patch_positions(const torch::Tensor& patch_positions, int from_h, int from_w, int to_h, int to_w,
                                     const PositionInterpolation& how = {});

}  // namespace attnscope
