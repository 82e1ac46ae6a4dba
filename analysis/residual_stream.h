// Inside a ViT's residual stream, computed as ViT-Prisma (HookedViT.from_pretrained: LayerNorms and
// value biases folded) and TransformerLens compute it: direct logit attribution of every head and
// layer, the patch logit lens, head ablation (zero and mean) and activation patching. Each quantity
// is one function of a recorded forward (models/residual_hooks.h); the forwards an ablation or a
// patch needs resume at the first block they change.
//
// Conventions (issue 35):
// - Read-out: the class token (a distilled DeiT: the mean of the class token through `head` and the
//   distillation token through `head_dist`; a pooled model: the mean of its patch tokens). Each
//   component is centred and divided by the scale the real forward's final LayerNorm had at that
//   token (ln_final.hook_scale), then dotted with norm.weight * W^T t, t the read-out direction in
//   the output space (a class: head.weight[C]). The head bias is t . (head.bias + head.weight norm.bias).
// - A head's output is its value-weighted sum without the value bias (Prisma's hook_z after
//   fold_value_biases) through its slice of the output projection (and LayerScale). The value bias
//   belongs to the layer, with the output projection's bias: the layer's bias share is its output
//   minus its heads' (exactly the biases' contribution for every kernel, FLatten's DWC included).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/attribution_target.h"
#include "models/residual_hooks.h"
#include "models/vit.h"

namespace attnscope {

// The ViT a residual-stream analysis runs on; throws std::invalid_argument with the reason for
// the families that have no one residual stream (hierarchical models) or no weights to decompose
// (TorchScript files).
VisionTransformerImpl& residual_stream_model(Backbone& backbone);

// What is read out of the model's output row [K]: a class's logit (an output coordinate on models
// without classes), the projection on a direction of the output space (a CLIP prompt's embedding,
// another image's embedding: after CLIP's ln_post and proj), or the output's L2 norm.
struct ReadoutTarget {
  enum class Kind { Class, Direction, OutputNorm };
  Kind kind = Kind::Class;
  int class_index = 0;
  torch::Tensor direction;  // [K], Kind::Direction

  static ReadoutTarget of_class(int index);
  static ReadoutTarget along(const torch::Tensor& direction);
  static ReadoutTarget output_norm();
  static ReadoutTarget from(const AttributionTarget& target);
  std::string describe() const;  // "class 3", "a direction", "the output norm"
  // Throws std::invalid_argument when the target does not fit an output of `output_dim` values.
  void check(int64_t output_dim) const;
  // The read-out of one output row [K].
  double read(const torch::Tensor& output_row) const;
  // The direction in the output space [K] (float64) that reads the target off `output_row` linearly:
  // a basis vector, the direction itself, or the row's unit vector for the norm.
  torch::Tensor output_direction(const torch::Tensor& output_row) const;
};

// The session's target (`--target`, `--class`) as a read-out of `output_row`: class C, or for the
// default its top-1 class (on a model without classes output coordinate C, or the output's norm);
// a prompt or another image along its unit embedding; the norm.
ReadoutTarget readout_for(const AttributionTarget& target, bool has_classes, const torch::Tensor& output_row);

// One recorded forward of one image: its output (and captures) and its residual stream.
struct ResidualRun {
  ForwardOutput output;
  ResidualStreamRecord record;
};

// What direct logit attribution and the lens read: every block's input, and the attention, LCM and
// MLP outputs and z at the tokens the model's read-out reads.
StreamRecording readout_recording(const VisionTransformerImpl& model, const TokenLayout& layout);

// One image [1, 3, H, W] through the model keeping `recording`; refuses a record above
// kMaxRecordBytes.
ResidualRun record_residual_stream(VisionTransformerImpl& model, const torch::Tensor& image,
                                   const AttentionSettings& settings, const StreamRecording& recording,
                                   const ForwardOptions& options = {});

// Direct logit attribution (TransformerLens ActivationCache.decompose_resid and stack_head_results
// through apply_ln_to_stack with the cached final scale, then logit_attrs).
struct LogitAttribution {
  // embed (the input of block 0), L_attn_out (the layer's heads plus its bias share), L_local_out
  // (L2ViT's LCM, where the block has one), L_mlp_out, ..., head_bias; they sum to `output`.
  std::vector<std::string> labels;
  std::vector<double> values;
  torch::Tensor heads;      // [layers, heads] float64: each head's direct contribution
  torch::Tensor attn_bias;  // [layers] float64: each layer's bias share, L_attn_out minus its heads
  double output = 0;        // the target read off the real output
  double residual = 0;      // output minus the sum of `values`: float32 rounding of the forward
};
LogitAttribution direct_logit_attribution(VisionTransformerImpl& model, const ResidualRun& run,
                                          const ReadoutTarget& target);

// What head `head` of block `layer` writes into the residual stream from its z [..., T, d] (TransformerLens's
// compute_head_results for one head): z through its slice of the output projection and the block's
// LayerScale, [..., T, C], without any bias. One head at a time: a layer's heads side by side would be
// heads x tokens x width.
torch::Tensor head_result(VisionTransformerImpl& model, int layer, int head, const torch::Tensor& z);

// The patch logit lens (ViT-Prisma's get_patch_logit_directions): [layers + 1, tokens, K] float32,
// the residual at the input of each block and the final residual, every token in the model's
// order (prefix tokens first), each centred and divided by its own token's final-norm scale, times
// the norm's weight, through the head's weights (a distilled model: the mean of head and
// head_dist, the read-out with this token in both slots), without any bias. A pooled model with
// fc_norm and no final norm divides by the scale fc_norm would give the final residual's token.
torch::Tensor patch_logit_lens(VisionTransformerImpl& model, const ResidualRun& run);

// "L.H[,L.H...]" (whole numbers) as heads of a model of `layers` x `heads_per_layer`; throws
// std::invalid_argument naming the item that is malformed, out of range or listed twice.
std::vector<HeadIndex> parse_heads(const std::string& text, int layers, int heads_per_layer);
void check_heads(const std::vector<HeadIndex>& heads, int layers, int heads_per_layer);

// Progress of a long computation (done of total steps); a cancel check between steps.
using ProgressReport = std::function<void(int64_t done, int64_t total)>;
using CancelCheck = std::function<bool()>;

// Each listed head's z (Prisma's hook_z) averaged over `images` (each [1, 3, H, W], all one size)
// through the unablated model, per token position.
struct HeadMeans {
  std::vector<HeadIndex> heads;
  torch::Tensor z;  // [heads listed, T, d] float32
  int64_t tokens = 0;
  int images = 0;
};
HeadMeans mean_head_outputs(VisionTransformerImpl& model, const std::vector<torch::Tensor>& images,
                            const AttentionSettings& settings, const std::vector<HeadIndex>& heads,
                            const ProgressReport& progress = {}, const CancelCheck& cancelled = {});

struct HeadAblation {
  std::vector<HeadIndex> heads;
  AblationKind kind = AblationKind::Zero;
  HeadMeans means;  // AblationKind::Mean: covers every listed head
};

// The model with the listed heads' z replaced (zero, or the mean per token position) on `image`: its
// output, its captures (when options.capture) and `recording`. With `clean`, a run of the same image
// and settings that recorded resid_pre (and captured, when options.capture asks), only the blocks
// from the first ablated layer on run; the earlier blocks' captures and record come from it.
ResidualRun ablate_heads(VisionTransformerImpl& model, const torch::Tensor& image, const AttentionSettings& settings,
                         const HeadAblation& ablation, const ForwardOptions& options = {},
                         const StreamRecording& recording = {}, const ResidualRun* clean = nullptr);

// ld = read(target) - read(baseline) (no baseline: read(target)), the patching metric's measure.
struct LogitDifference {
  ReadoutTarget target;
  std::optional<ReadoutTarget> baseline;
  double of(const torch::Tensor& output_row) const;
  std::string describe() const;
};

// Activation patching (TransformerLens patching.py: get_act_patch_attn_head_out_all_pos and
// get_act_patch_resid_pre), each entry (ld_patched - ld_corrupt) / (ld_clean - ld_corrupt).
struct ActivationPatching {
  torch::Tensor heads;            // [layers, heads] float64: head L.H's z from the clean run at every token
  torch::Tensor residual;         // [layers, tokens] float64: the input of block L at one token from the clean run
  double clean = 0, corrupt = 0;  // ld of each unpatched run
  int64_t forwards = 0;           // partial forwards run
  int64_t blocks_run = 0;         // blocks they ran in all (a full forward each would run forwards x layers)
};
// Refuses images of different sizes and an ld that does not differ between the runs (the metric is
// undefined). Each patch resumes at the block it changes. `progress` after every patch; `cancelled`
// (checked between blocks) throws Cancelled.
ActivationPatching activation_patching(VisionTransformerImpl& model, const torch::Tensor& clean_image,
                                       const torch::Tensor& corrupt_image, const AttentionSettings& settings,
                                       const LogitDifference& difference, const ProgressReport& progress = {},
                                       const CancelCheck& cancelled = {});

}  // namespace attnscope
