// What a sparse autoencoder (models/sparse_autoencoder.h) reads in a ViT: its features at every token
// of one image (the map of one feature over the image, the top features of a patch, how well it
// reconstructs the stream there), and over a folder each feature's top images and patches, kept in
// memory bounded by features x k as the folder streams through.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/sparse_autoencoder.h"
#include "models/token_layout.h"
#include "models/vit.h"

namespace attnscope {

// A forward of `images` [B, 3, H, W] that keeps the stream at `point` as it was there (before the
// session's own edits at that point): its output and that activation [B, T, C].
struct StreamAtPoint {
  ForwardOutput output;
  torch::Tensor activation;
};
StreamAtPoint read_stream_point(VisionTransformerImpl& model, const torch::Tensor& images, const StreamPoint& point,
                                const AttentionSettings& settings, const ForwardOptions& options = {});

// One image through the model, read at the SAE's point (before the session's own intervention
// there: the features are what the SAE reads; the intervention changes what later blocks see).
struct SaeImageReport {
  StreamPoint point;
  TokenLayout layout;
  torch::Tensor activations;     // [T, d_in] float32, CPU: the stream at the point, the model's token order
  torch::Tensor features;        // [T, d_sae] float32, CPU
  torch::Tensor reconstruction;  // [T, d_in]
  torch::Tensor logits;          // the model's output row [K] (with the session's intervention)
  // Over the tokens the SAE reads (the class token alone for a class-token SAE):
  double normalised_mse = 0;   // sum ||x - x_hat||^2 / sum ||x - mean_tokens(x)||^2 (variance unexplained)
  double l0 = 0;               // mean features above zero per token
  double silent_fraction = 0;  // features zero on every token of the image
  int64_t tokens_read = 0;
};

// Reads `image` [1, 3, H, W] through `model` at the SAE's point (sae_stream_point with `hook`).
SaeImageReport sae_image_report(VisionTransformerImpl& model, const SparseAutoencoder& sae, const std::string& hook,
                                const torch::Tensor& image, const AttentionSettings& settings,
                                const std::function<bool()>& cancelled = {});

// The K largest features of every token: indices [T, K] int64 and values [T, K] float32, sorted
// from the largest (K is clamped to the SAE's width).
struct TokenTopFeatures {
  torch::Tensor indices, values;
};
TokenTopFeatures top_features_per_token(const torch::Tensor& features, int k);

// Each feature's k images of highest activation over a folder (its largest activation over the
// image's patch tokens: the class token for a class-token SAE), with the token it peaks at, and how
// often it fires. Memory: features x k entries, whatever the folder's length.
struct SaeTopImages {
  int k = 0;
  int64_t images_done = 0;
  torch::Tensor values;        // [F, k] float32, descending; -inf where fewer than k images were seen
  torch::Tensor images;        // [F, k] int64: the image's index in the folder's order (-1: none)
  torch::Tensor tokens;        // [F, k] int64: the token where it peaks
  torch::Tensor image_counts;  // [F] int64: images where the feature fired on some token
  torch::Tensor token_counts;  // [F] int64: tokens where it fired
  int64_t tokens_seen = 0;
  void start(int64_t features, int k);
  // Takes one image's features [T, d_sae]: scored over the tokens `read` (indices into T), counted
  // over every token.
  void add(int64_t image, const torch::Tensor& features, const torch::Tensor& read);
  double dead_fraction() const;  // features that fired on no token of any image
};

// A folder pass as it goes: the top images and the reconstruction's sums over every token read so
// far. A run saves it now and then; a new run of the same pass (the same `key`: model, SAE, point,
// images, k, settings) goes on from it.
struct SaeFolderPass {
  SaeTopImages top;
  double error = 0, variance = 0, active = 0;  // squared error, squared deviation from each image's mean, features on
  int64_t tokens = 0;
  void add(int64_t image, const SaeImageReport& report, const SparseAutoencoder& sae);
  double normalised_mse() const;
  double l0() const;
  // Into `folder` (its arrays, then progress.json last, each written whole).
  void save(const std::string& folder, const std::string& key) const;
  // From `folder` when it holds a pass of `key` with this pass's shapes (start() first); false
  // otherwise (none, another pass's, damaged), leaving this pass as it was.
  bool load(const std::string& folder, const std::string& key);
};

// The tokens a folder pass scores an image by: the patches (the class token for a class-token SAE).
torch::Tensor scored_tokens(const SparseAutoencoder& sae, const TokenLayout& layout);

}  // namespace attnscope
