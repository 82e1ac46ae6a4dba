// DINO's attention masks (facebookresearch/dino, visualize_attention.py's th_attn): per head, the
// patches that together hold a share `mass` of the class token's attention, and their Jaccard index
// against an object's mask (the evaluation of DINO's figure, dino issue #54).
#pragma once

#include <torch/types.h>

#include <vector>

#include "models/attention.h"

namespace attnscope {

constexpr double kDefaultDinoMass = 0.6;  // the paper's

struct DinoMasks {
  int heads = 0, grid_h = 0, grid_w = 0;
  int patch_h = 0, patch_w = 0;  // pixels per patch: the masks' nearest upsampling to the image
  // float64 [heads, gh, gw]: the class token's row over the patch keys (registers and other prefix
  // tokens dropped), renormalised to sum 1.
  torch::Tensor attention;
  // uint8 [heads, gh, gw]: 1 where the cumulative sum of the row sorted ascending is strictly
  // greater than 1 - mass.
  torch::Tensor masks;
};

// The masks of one layer on image `item`. Throws std::invalid_argument when the layer's queries
// have no class token or `mass` is not in (0, 1].
DinoMasks dino_masks(const AttentionCapture& capture, int64_t item, double mass);

// Each head's Jaccard index |A ∩ B| / |A ∪ B| between its mask upsampled (nearest) to the object
// mask's size and the object (`object`: [H, W], nonzero = object). NaN where both are empty.
std::vector<double> mask_jaccard(const DinoMasks& masks, const torch::Tensor& object);

}  // namespace attnscope
