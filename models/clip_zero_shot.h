// CLIP's zero-shot scores of an image over prompts, from a loaded CLIP file: the image embedding
// from the visual tower, the text embeddings from the text tower, logits_per_image and their
// softmax over the prompts, as clip/model.py's CLIP.forward computes them.
#pragma once

#include <functional>

#include <torch/torch.h>

#include "models/model_loader.h"

namespace attnscope {

struct ClipZeroShot {
  torch::Tensor image_embedding;  // [E], before normalisation
  torch::Tensor text_embeddings;  // [P, E], before normalisation
  torch::Tensor logits;           // [P]: logit_scale.exp() times the cosine (SigLIP: plus logit_bias)
  torch::Tensor probabilities;    // [P]: softmax over the prompts (SigLIP: each prompt's sigmoid)
};

// `image`: [1, 3, H, W], prepared as the model's input; `token_ids`: [P, L] (clip.tokenize's rows).
// Throws std::invalid_argument when the file has no text tower (naming why) or the ids do not fit
// it; runs without autograd.
ClipZeroShot clip_zero_shot(LoadedModel& model, const torch::Tensor& image, const torch::Tensor& token_ids,
                            const std::function<bool()>& cancelled = {});

}  // namespace attnscope
