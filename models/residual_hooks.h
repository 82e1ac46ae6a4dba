// What a ViT forward can record of its residual stream and change in it, at ViT-Prisma's hook points
// (blocks.L.hook_resid_pre, hook_attn_out, hook_mlp_out, attn.hook_z, ln_final.hook_scale), and the
// record it leaves: the engine of direct logit attribution, the logit lens, ablation and patching.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnscope {

// One head's value-weighted sum z (Prisma's hook_z, without the value bias) replaced before the
// output projection.
struct HeadReplacement {
  int layer = 0, head = 0;
  torch::Tensor z;  // undefined: zero; else [T, d] (every batch item) or [B, T, d]
};

// The input of block `layer` (Prisma's blocks.L.hook_resid_pre) at one token, replaced.
struct ResidualReplacement {
  int layer = 0, token = 0;
  torch::Tensor value;  // [C] (every batch item) or [B, C]
};

// A point of a block's residual stream, as TransformerLens and ViT-Prisma name them
// (blocks.L.hook_resid_pre, hook_attn_out, hook_resid_mid, hook_mlp_out, hook_resid_post): the
// block's input, what its attention adds (after LayerScale), the stream between attention (and
// L2ViT's LCM) and MLP, what its MLP adds, and its output (the next block's input).
enum class StreamSite { ResidPre, AttnOut, ResidMid, MlpOut, ResidPost };
struct StreamPoint {
  int layer = 0;
  StreamSite site = StreamSite::ResidPost;
  bool operator==(const StreamPoint& other) const { return layer == other.layer && site == other.site; }
  bool operator!=(const StreamPoint& other) const { return !(*this == other); }
  // Whether the point is inside the block (the forward reaches it only through forward_streams).
  bool inside_block() const {
    return site == StreamSite::AttnOut || site == StreamSite::ResidMid || site == StreamSite::MlpOut;
  }
};
// "blocks.3.hook_resid_post": TransformerLens's name, the one summaries and sessions write.
std::string stream_point_name(const StreamPoint& point);
// TransformerLens's names, and timm's module name "blocks.3" for the block's output; throws
// std::invalid_argument naming what it takes. The model's depth is checked where the point meets one.
StreamPoint parse_stream_point(const std::string& text);

// A function of the stream at one point, [B, T, C] -> [B, T, C]: what a sparse autoencoder's
// intervention puts in place of the activation, or a probe that keeps it and returns it unchanged.
struct StreamTransform {
  StreamPoint point;
  std::function<torch::Tensor(const torch::Tensor& activation)> apply;
};

struct StreamEdits {
  std::vector<HeadReplacement> heads;
  std::vector<ResidualReplacement> residuals;
  // Applied in order at their points. A forward resumed at block F applies those of blocks F and
  // later (a record keeps each block's input before its hook_resid_pre transforms, as a resumed
  // forward takes it); those of earlier blocks acted on the residual it resumes from.
  std::vector<StreamTransform> transforms;
  bool empty() const { return heads.empty() && residuals.empty() && transforms.empty(); }
};

// What a forward keeps. The residual at each block's input is kept whole (the lens and patching read
// every token); the blocks' outputs and z may be kept at some tokens only (a class-token read-out
// reads one or two), so that a large model's record stays small.
struct StreamRecording {
  bool resid_pre = false;       // each block's input (and always the final residual and the final norm's scale)
  bool components = false;      // each block's attention output (after LayerScale), LCM output and MLP output
  bool z = false;               // each block's z [B, h, T, d]
  std::vector<int64_t> tokens;  // components and z at these tokens only, in this order; empty: all
  bool any_block() const { return resid_pre || components || z; }
  bool per_block_streams() const { return components || z; }
};

struct ResidualStreamRecord {
  int first_block = 0;          // a resumed forward records from the block it resumed at
  std::vector<int64_t> tokens;  // what StreamRecording::tokens kept (empty: all)
  // Indexed by block (those before first_block undefined), as recorded.
  std::vector<torch::Tensor> resid_pre;  // [B, T, C]: the block's input, after any replacement, before transforms
  std::vector<torch::Tensor> attn_out;   // [B, T', C]: what the attention adds (after LayerScale)
  std::vector<torch::Tensor> local_out;  // [B, T', C]: what L2ViT's LCM adds (undefined without one)
  std::vector<torch::Tensor> mlp_out;    // [B, T', C]
  std::vector<torch::Tensor> z;          // [B, h, T', d]
  torch::Tensor resid_final;             // [B, T, C]: the last block's output, the final norm's input
  // The read-out norm's scale sqrt(var + eps) as the forward computed it: per token [B, T] for
  // `norm`, of the pooled features [B] for `fc_norm`; undefined where the model has no such norm.
  torch::Tensor final_scale;
  torch::Tensor pooled_scale;
};

// Every head's mean z per token position over a folder's images, through the unablated model: what
// mean ablation puts in place of an ablated head's z (models/head_ablation.h computes it).
struct HeadMeanOutputs {
  std::string key;                  // head_means_key of the settings and token count they were taken for
  torch::Tensor z;                  // [layers, heads, T, d] float32
  std::vector<std::string> images;  // the files averaged over
  std::string preparation;          // how they were prepared (input settings, normalisation)
};

// What mean ablation's means depend on: the folder, every attention knob but the ablation itself,
// and the token count (the input size).
struct AttentionSettings;
std::string head_means_key(const AttentionSettings& settings, int64_t tokens);

// Bytes a record of `recording` takes for `batch` images of `tokens` tokens through `blocks` blocks
// of width `width` (z has the same size as a width-wide output).
double record_bytes(const StreamRecording& recording, int64_t batch, int64_t tokens, int64_t blocks, int64_t width,
                    bool local_out);

// The most a record may take: a residual-stream analysis refuses a model and input whose record
// would need more (ViT-L/14 at 518 pixels keeps its inputs and z of 24 blocks in about 0.3 GiB).
constexpr double kMaxRecordBytes = double(uint64_t(4) << 30);

}  // namespace attnscope
