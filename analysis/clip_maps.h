// Text-prompted maps of a CLIP image, each computed as its authors' code computes it:
// - Chefer et al.'s relevance (hila-chefer/Transformer-MM-Explainability, interpret() in
//   CLIP_explainability.ipynb): the image-prompt logit differentiated with respect to each block's
//   attention, R <- R + mean_h clamp(grad * A, 0) R from the identity, image and text towers;
// - LeGrad (WalBouss/LeGrad, LeWrapper.compute_legrad_clip): per block, ln_post of the mean over all
//   tokens times proj, normalised, dotted with the normalised text embedding and differentiated with
//   respect to that block's attention;
// - the spatial decomposition of Gandelsman et al. (yossigandelsman/clip_text_span, PRSLogger and
//   compute_segmentations.py): the class token's output as the direct contributions of every layer,
//   head and token through ln_post linearised at its actual mean and std, projected.
// The visual tower must be a ViT attnscope computes (not a TorchScript forward); the text side is
// the file's text tower (LoadedModel::text).
#pragma once

#include <torch/types.h>

#include <functional>

#include "models/model_loader.h"

namespace attnscope {

// The first block of a "from block L on" option: L >= 0 is the block, a negative L counts from the
// end (-1: the last block). Throws std::invalid_argument naming `option` and the valid range.
int resolve_start_block(int start, int blocks, const std::string& option);

struct CheferClipRelevance {
  torch::Tensor raw;         // [gh, gw] float32: R[cls, 1:] over the patch grid
  torch::Tensor normalised;  // [gh, gw]: raw min-max to [0, 1] (all zero when raw is constant)
  // The text side: R_text[eot, 1:eot] / its sum, the prompt's tokens between start and end of text
  // (empty for a prompt without tokens), and the end-of-text position it was read at.
  torch::Tensor text;
  int64_t end_of_text = 0;
  int image_start = 0, text_start = 0;  // the first block of each tower that took part
  double logit = 0;                     // logits_per_image of the image and the prompt
};
// `image` [1, 3, H, W] prepared for the model, `token_ids` [1, L] (one prompt). The image tower
// starts at `start_block` (resolved by resolve_start_block), the text tower at its last block (the
// notebook's start_layer_text = -1).
CheferClipRelevance chefer_clip_relevance(LoadedModel& model, const torch::Tensor& image,
                                          const torch::Tensor& token_ids, int start_block);

struct LegradMap {
  torch::Tensor raw;        // [gh, gw] float32: the sum over the blocks, before upsampling (SigLIP: corrected)
  torch::Tensor upsampled;  // [H, W]: bilinear by the patch size (align_corners false), then min-max
                            // (SigLIP: min-max, then bilinear, as compute_legrad_siglip orders them)
  int start_block = 0;
  std::vector<double> similarities;  // per block from start_block: the cosine the gradient is of
  int64_t corrected_patches = 0;     // SigLIP: the patches the 'a photo of a' correction zeroed
};
// LeGrad's SigLIP correction: the map of this prompt, min-max normalised, zeroes the patches where
// it exceeds the threshold (compute_legrad_siglip's defaults).
constexpr const char* kLegradEmptyPrompt = "a photo of a";
constexpr double kLegradCorrectionThreshold = 0.8;
// `layer_index` as LeWrapper takes it (the authors' default -2: the last two blocks). A CLIP
// visual tower (class token, ln_post, proj) takes compute_legrad_clip's path, a SigLIP tower (no
// class token, the attention-pool head's output as the embedding) compute_legrad_siglip's.
LegradMap legrad_clip(LoadedModel& model, const torch::Tensor& image, const torch::Tensor& token_ids,
                      int layer_index = -2);

// The class token's output decomposed (PRSLogger), kept so that the map of any prompt is one
// product: the direct contributions of the patch tokens summed over layers and heads.
struct TextSpanComponents {
  torch::Tensor patch_directions;  // [gh * gw, E] float64: projected and divided by the embedding's norm
  torch::Tensor image_embedding;   // [E] float32, the model's output
  int grid_h = 0, grid_w = 0;
  int layers = 0, heads = 0;
  // The sum of every component (embedding, each layer's heads x tokens, each MLP) minus the image
  // embedding: float32 rounding of the forward and of the decomposition.
  double residual_max_abs = 0;
  double residual_relative = 0;  // over max |image_embedding|
  int64_t transient_bytes = 0;   // the largest block of components held at once (one head of a layer)
};
// Streams the components layer by layer and head by head: at most tokens x width values of one
// head live at once, never layers x tokens x heads x width.
TextSpanComponents textspan_components(LoadedModel& model, const torch::Tensor& image,
                                       const std::function<bool()>& cancelled = {});
// [P, gh, gw]: each patch's summed direct contribution dotted with each normalised text embedding
// [P, E], minus the mean over the prompts (compute_segmentations.py before its upsampling).
torch::Tensor textspan_maps(const TextSpanComponents& components, const torch::Tensor& text_embeddings);

// Min-max to [0, 1] as the authors' min_max does (all zero when the values are constant).
torch::Tensor min_max(const torch::Tensor& values);

}  // namespace attnscope
