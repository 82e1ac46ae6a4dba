// Attention relevance for a class (or an output dimension / the output's norm on models without
// classes), from each attention layer's probabilities A and their gradients dScore/dA:
// - Chefer et al.'s rule (Transformer-MM-Explainability's generate_relevance for ViTs): R = I, then
//   per layer R += mean_heads((dScore/dA * A)^+) R; the class token's row of R over the patches.
// - gradient-weighted attention rollout as jacobgil/vit-explain's grad_rollout: per layer
//   (A * dScore/dA) averaged over heads, negatives zeroed, the weakest links dropped, (. + I) / 2
//   with rows renormalised, multiplied through the layers.
// Both need the model's attention as part of the autograd graph (ForwardOptions::attention_hook).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "analysis/attribution_target.h"
#include "models/backbone.h"

namespace attnscope {

enum class RelevanceRule { Chefer, GradientRollout };
std::string to_string(RelevanceRule rule);  // "relevance", "gradrollout"

struct RelevanceOptions {
  RelevanceRule rule = RelevanceRule::Chefer;
  AttributionTarget target;  // what is differentiated (resolve_target_spec); default: the top-1 class
  // The attention layer whose group the propagation runs through (negative: from the end): every
  // layer of a ViT; on a hierarchical model the layers of that stage, which share one token grid.
  int layer = -1;
  double discard_ratio = 0.0;  // gradient rollout: fraction of the weakest fused links dropped per layer
};

struct RelevanceResult {
  RelevanceRule rule = RelevanceRule::Chefer;
  AttributionTarget target;
  double score = 0.0;
  torch::Tensor logits;      // [K], CPU
  torch::Tensor row;         // [T] relevance of every token for the read-out, CPU float32
  torch::Tensor patch_map;   // [gh, gw] the patch part of `row`
  torch::Tensor normalised;  // Chefer: (x - min) / (max - min); rollout: x / max (vit-explain's mask)
  TokenLayout layout;        // of the layers propagated through
  std::vector<int> layers;   // which attention layers took part
  std::string readout;       // "class token row" or "mean of the patch rows" (no class token)
  double milliseconds = 0.0;
};

// One forward pass with autograd through every block and one backward to the attention
// probabilities; no parameter gradient is formed. image: [1, 3, H, W] prepared input. Throws
// std::invalid_argument, saying why, where the method does not apply (a TorchScript file that only
// reports its probabilities, layers whose keys are not their queries).
RelevanceResult attention_relevance(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                    const RelevanceOptions& options = {});

}  // namespace attnscope
