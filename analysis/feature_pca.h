// The PCA of patch features as RGB (DINOv2's figure 1), as researchers compute it with
// sklearn.decomposition.PCA(3).fit_transform: the features centred by their mean over the patches
// (not whitened), projected on their first principal axes; for display each component min-max
// scaled to [0, 1] over the patches (facebookresearch/dinov2 issue #23), optionally with that
// issue's second pass on the foreground. Plus Otsu's threshold, which picks that foreground.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

namespace attnscope {

// Principal axes fitted on some rows: what projects other rows (a video's later frames) the same way.
struct PcaBasis {
  torch::Tensor mean;       // [C] float64: the fitted rows' mean
  torch::Tensor axes;       // [k, C] float64: unit principal axes, largest variance first
  torch::Tensor explained;  // [k] float64: each axis's share of the total variance (sklearn's ratio)
  int64_t rows = 0;         // how many rows it was fitted on
};

// The first `components` principal axes of rows [N, C] (any float type; computed in float64). Each
// axis's sign is made deterministic as sklearn's svd_flip does it (its largest entry positive); the
// sign carries no meaning. Throws std::invalid_argument for fewer than 2 rows or components > C.
PcaBasis fit_pca(const torch::Tensor& rows, int components = 3);

// (rows - mean) @ axes^T: [N, k] float64, the scores fit_transform gives for the fitted rows.
torch::Tensor pca_scores(const PcaBasis& basis, const torch::Tensor& rows);

// Each column of `scores` [N, k] min-max scaled to [0, 1] over the rows; `low`/`high` (when given)
// instead of the rows' own range, so a frozen basis keeps its colours (values are then clamped).
// A constant column becomes 0.
torch::Tensor min_max_columns(const torch::Tensor& scores, const torch::Tensor& low = {},
                              const torch::Tensor& high = {});

// Otsu's threshold as scikit-image's threshold_otsu computes it (256 bins over the values' range,
// the bin centre maximising the between-class variance); values strictly above it form the upper
// class. Throws std::invalid_argument for no values or a non-finite one.
double otsu_threshold(const torch::Tensor& values, int bins = 256);

// What `analyze --analysis pca` and the features view compute from one image's patch features.
struct PcaOptions {
  // The second pass of dinov2 issue #23: the patches whose min-max scaled first component exceeds
  // the threshold (a number in [0, 1], or Otsu's when `otsu`) are the foreground; a PCA of those
  // alone colours them, the rest are 0.
  bool foreground = false;
  bool otsu = false;
  double threshold = 0.5;
  bool flip = false;  // negate the first component before thresholding: the other side is the foreground
};

struct FeaturePca {
  PcaBasis basis;
  torch::Tensor scores;     // [N, 3] float64, PCA(3).fit_transform of the patches
  torch::Tensor rgb;        // [N, 3] float32 in [0, 1]: scores min-max scaled per component
  torch::Tensor low, high;  // [3] float64: the ranges `rgb` was scaled with
  // With PcaOptions::foreground:
  bool foreground = false;
  double threshold = 0.0;           // on the min-max scaled (and flipped) first component
  torch::Tensor foreground_mask;    // [N] bool
  PcaBasis foreground_basis;        // fitted on the foreground patches
  torch::Tensor foreground_scores;  // [N, 3] float64, 0 on the background
  torch::Tensor foreground_rgb;     // [N, 3] float32: min-max per component over the foreground, 0 elsewhere
  torch::Tensor foreground_low, foreground_high;  // [3] float64: its ranges
};

// The PCA of patch rows [N, C]. With `frozen`, its bases, ranges and threshold project and colour
// the rows instead of a new fit: a video's colours stay those of its first frame.
// Throws std::invalid_argument when the foreground has fewer than 4 patches.
FeaturePca feature_pca(const torch::Tensor& patches, const PcaOptions& options, const FeaturePca* frozen = nullptr);

// "otsu", a number in [0, 1] or empty (off), as --pca-foreground takes it; throws std::invalid_argument.
PcaOptions parse_pca_foreground(const std::string& text, bool flip);

}  // namespace attnscope
