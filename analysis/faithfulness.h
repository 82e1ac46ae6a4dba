// Whether a map is faithful to the model, measured: deletion and insertion curves (Petsiuk et al.
// 2018, RISE). The map's cells are removed from the image (replaced, e.g. by the blurred image)
// or added to the replacement in the map's order, largest first, and the target class's
// probability (for another target, its score: a prompt's CLIP logit, a cosine, the norm) is
// recorded after each step; the area under each curve (AUC, over the fraction of
// cells) summarises it: low deletion and high insertion AUC mean the map found what the model uses.
// A random order of the same cells is the baseline any map should beat.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/attribution_target.h"
#include "analysis/perturbation.h"
#include "models/backbone.h"

namespace attnscope {

struct FaithfulnessOptions {
  // Points after the start: after step i, round(i N / steps) of the N cells are removed (or added).
  int steps = 20;
  Replacement replacement = Replacement::Blur;
  double blur_sigma = 0.0;  // pixels; 0: one patch of the model's first attention layer
  // What the curves record: a class's probability (default: the image's top-1 class), or the score
  // of another target (resolve_target_spec).
  AttributionTarget target;
  int batch = 32;                   // perturbed images per forward pass
  int random_orders = 3;            // random orders averaged for the baseline
  uint64_t seed = 0;                // of the random orders
  std::function<bool()> cancelled;  // checked between forward passes; true throws Cancelled
};

struct FaithfulnessCurve {
  std::vector<double> fraction;     // of the cells removed (deletion) or added (insertion), 0 .. 1
  std::vector<double> probability;  // of the target class after that step (another target: its score)
  double auc = 0.0;                 // trapezoid rule over `fraction`
};

struct Faithfulness {
  FaithfulnessCurve deletion, insertion;
};

// The image, its replacement and the target, shared by every map measured on it.
class FaithfulnessProbe {
 public:
  // input: [1, 3, H, W] prepared input. Throws std::invalid_argument for a class target on a model
  // without classes (the curves record a class probability) or a class it does not have.
  FaithfulnessProbe(Backbone& model, const torch::Tensor& input, const AttentionSettings& settings,
                    const Normalization& normalization, const FaithfulnessOptions& options = {});

  // Curves for a map [gh, gw] over the image (any grid that tiles it), cells in the order of the
  // map's values, largest first; equal values keep their row-major order.
  Faithfulness measure(const torch::Tensor& map) const;
  // Curves for an explicit order of the N = gh * gw cells (row-major indices, most important first).
  Faithfulness measure_order(const torch::Tensor& order, int grid_h, int grid_w) const;
  // The deletion curve alone (half the forward passes), for a map as `measure` orders it.
  FaithfulnessCurve deletion(const torch::Tensor& map) const;
  // The mean curves over `random_orders` random orders of a gh x gw grid's cells.
  Faithfulness random_baseline(int grid_h, int grid_w) const;

  // The class whose probability the curves record; -1 when they record another target's score.
  int target_class() const { return records_probability_ ? target_.index : -1; }
  const AttributionTarget& target() const { return target_; }  // resolved
  bool records_probability() const { return records_probability_; }
  double probability() const { return probability_; }  // of the target on the unperturbed image (or its score)
  const torch::Tensor& replacement() const { return replacement_; }
  const FaithfulnessOptions& options() const { return options_; }

 private:
  // Target probabilities of the images where `removed` [S, H, W] (true: replaced) says.
  std::vector<double> probabilities(const torch::Tensor& removed) const;
  // Which pixels are removed after each step [S + 1, H, W] for an order, and the fractions.
  torch::Tensor removed_pixels(const torch::Tensor& order, int grid_h, int grid_w, std::vector<double>& fraction) const;

  Backbone& model_;
  AttentionSettings settings_;
  FaithfulnessOptions options_;
  torch::Tensor input_, replacement_;
  AttributionTarget target_;
  bool records_probability_ = true;
  double probability_ = 0.0;
};

// Trapezoid-rule area under y(x).
double area_under_curve(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace attnscope
