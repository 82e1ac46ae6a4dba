// Sparse autoencoders on a ViT's residual stream, as saev, ViT-Prisma, SAELens and
// dictionary_learning save them (models/sae_formats.cpp reads each by its own rules), held in one
// struct: encode, decode, and the change of the stream an intervention on features makes.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "models/residual_hooks.h"
#include "models/sae_settings.h"

namespace attnscope {

// How pre-activations become features.
enum class SaeActivation {
  Relu,       // relu(pre)
  TanhRelu,   // tanh(relu(pre)) (ViT-Prisma's tanh-relu)
  TopK,       // the k largest pre per token (relu'd where the library does), the rest 0
  BatchTopK,  // at inference: pre where pre > threshold (a number; at most 0: relu)
  JumpRelu,   // relu(pre) where pre > the feature's threshold, else 0
  Gated,      // (sae_in W_enc + b_gate > 0) * relu(sae_in (W_enc exp(r_mag)) + b_mag)
};

// How the input is scaled before encoding, undone on the reconstruction with the same token's
// statistics (SAELens' and ViT-Prisma's run_time_activation_norm_fn_in/out).
enum class SaeNormalisation {
  None,
  TokenNorm,  // constant_norm_rescale: x * sqrt(d_in) / ||x||, reconstruction / that factor
  LayerNorm,  // layer_norm: (x - mean) / (std_unbiased + 1e-5), reconstruction * std + mean
};

struct SparseAutoencoder {
  std::string format;  // "saev", "ViT-Prisma", "SAELens", "dictionary_learning"
  std::string source;  // the file or folder it was read from
  std::string kind;    // the library's own name of the architecture (e.g. "topk", "AutoEncoderTopK")
  SaeActivation activation = SaeActivation::Relu;
  int64_t d_in = 0, d_sae = 0;
  int k = 0;  // TopK, BatchTopK without a threshold
  // float32 on the CPU (or the model's device once moved): W_enc [d_in, d_sae], W_dec [d_sae, d_in].
  torch::Tensor W_enc, b_enc, W_dec, b_dec;
  torch::Tensor threshold;             // JumpRelu: [d_sae]; BatchTopK: a number (undefined: per-token top k)
  torch::Tensor b_gate, r_mag, b_mag;  // Gated: [d_sae] each
  bool subtract_b_dec = true;          // encode reads x - b_dec (after normalisation)
  bool relu_after_top_k = true;        // TopK: relu on the kept values (not saev's)
  // SAELens' rescale_acts_by_decoder_norm: pre * pre_scale before the activation, features /
  // pre_scale before the decoder. Undefined: 1.
  torch::Tensor pre_scale;
  SaeNormalisation normalisation = SaeNormalisation::None;
  double norm_eps = 1e-5;           // LayerNorm
  std::optional<StreamPoint> hook;  // the point the file names (absent: the file does not say)
  std::string hook_text;            // ... in the file's own words
  bool hook_named = false;          // hook_text is a hook's name (ViT-Prisma, SAELens), not a description
  bool class_token_only = false;    // trained on the class token alone (ViT-Prisma's cls_token_only)
  std::vector<int64_t> prefixes;    // Matryoshka: the nested prefix sizes (the features' groups)
  std::vector<std::string> notes;   // what the reader assumed, said where the user looks

  // The features of x [N, d_in]: [N, d_sae] (float32 on x's device).
  torch::Tensor encode(const torch::Tensor& x) const;
  // Feature `feature`'s activation on every token of x [N, d_in]: [N]. One column of the encoder
  // where the activation acts on each feature alone; the whole encode for TopK, whose k largest
  // depend on every feature.
  torch::Tensor encode_feature(const torch::Tensor& x, int64_t feature) const;
  // The reconstruction of x from its features f = encode(x): [N, d_in], in the stream's units.
  torch::Tensor decode(const torch::Tensor& features, const torch::Tensor& x) const;
  // The per-token factor [N, 1] that takes a decoder row to the stream's units (1 without normalisation).
  torch::Tensor stream_scale(const torch::Tensor& x) const;
  // The intervention's change of the stream at x [N, d_in] with features f: the listed features'
  // decoder rows times their change (off: -f_i; add: +scale), in the stream's units. The SAE's
  // reconstruction error stays, and an empty edit list changes nothing (exactly zero).
  torch::Tensor edit_delta(const torch::Tensor& x, const torch::Tensor& features, const std::vector<int>& off,
                           const std::vector<SaeFeatureAdd>& add) const;
  std::string describe() const;  // "SAELens topk (k=8), 768 -> 16384, blocks.8.hook_resid_post"
  double bytes() const;          // the weights' size
};

template <>
struct EnumTable<SaeActivation> {
  static const std::vector<EnumEntry<SaeActivation>>& entries();
};
template <>
struct EnumTable<SaeNormalisation> {
  static const std::vector<EnumEntry<SaeNormalisation>>& entries();
};

// The most features and the widest input an SAE may declare (a 1M-feature SAE on a ViT-g's 1536
// channels is 12 GB of float32): refused from the header before anything is allocated.
constexpr int64_t kMaxSaeFeatures = int64_t(1) << 21;
constexpr int64_t kMaxSaeInput = 8192;
constexpr double kMaxSaeBytes = 16.0 * double(uint64_t(1) << 30);

// Reads an SAE in any of the four formats: saev's sae.pt, or a folder (or a file in it) of
// ViT-Prisma (config.json + weights), SAELens (cfg.json + sae_weights.safetensors) or
// dictionary_learning (config.json + ae.pt). Throws std::invalid_argument with the reason and what
// to do (unknown format, pickled config objects, wrong shapes, NaN thresholds, k above the width,
// sizes past the limits above).
SparseAutoencoder load_sparse_autoencoder(const std::string& path);
// The same, read once per file (and its size and time) and kept.
std::shared_ptr<const SparseAutoencoder> open_sparse_autoencoder(const std::string& path);

// The point the SAE reads on a model of `depth` blocks and `width` channels: the file's, or
// `given` (--sae-hook) where the file does not say; refused when they disagree, when neither says,
// or when the width or the block does not fit the model.
StreamPoint sae_stream_point(const SparseAutoencoder& sae, const std::string& given, int depth, int64_t width);

// The session's intervention (settings.sae) as a transform of the stream at the SAE's point on a
// model `width` channels wide (models/vit.cpp applies it in every forward).
StreamTransform sae_intervention(const SaeSetting& setting, int depth, int64_t width);

}  // namespace attnscope
