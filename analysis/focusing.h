// FLatten's focusing function f_p made visible: what it does to toy 2-D and 3-D vectors and to a
// query's scores (the paper's Fig. 4), and to the real queries and keys of a captured layer.
#pragma once

#include <torch/types.h>

#include <vector>

#include "models/attention.h"

namespace attnscope {

// f_p(x) = ||x|| / ||x^p|| * x^p on ReLU(x), row by row: vectors [n, d] -> [n, d]. It keeps each
// row's norm and the order of its components, and pulls the row toward its largest component's axis.
torch::Tensor focus_rows(const torch::Tensor& vectors, double p);

// Fig. 4 (a) inputs: `count` unit vectors spread evenly over the quarter circle [count, 2] (angles
// from 0 to 90 degrees) and over the positive octant of the sphere [count, 3] (a Fibonacci lattice).
torch::Tensor quarter_circle_vectors(int count);
torch::Tensor octant_vectors(int count);

// Cosine of each row's angle to its nearest axis: max_c x_c / ||x|| (1 on an axis).
torch::Tensor nearest_axis_cosine(const torch::Tensor& vectors);

// Fig. 4 (b): one query's linear-attention scores against a few keys, phi(q).phi(k_j) / sum_j,
// before (phi = ReLU) and after (phi = f_p o ReLU) focusing.
struct ScoreExample {
  torch::Tensor query;   // [d]
  torch::Tensor keys;    // [n, d]
  torch::Tensor before;  // [n], sums to 1
  torch::Tensor after;   // [n], sums to 1
};
ScoreExample focus_scores(const torch::Tensor& query, const torch::Tensor& keys, double p);

// The example shown for Fig. 4 (b). The paper prints only the scores ([0.37, 0.19, 0.26, 0.18] ->
// [0.75, 0.11, 0.09, 0.05] at p = 3), not its vectors; these 3-D vectors (two decimals) were found by
// a numerical search so that f_3 of them gives those numbers to two decimals. They are ours, not
// the paper's: the point is that the computation, not the input, reproduces the effect.
ScoreExample example_focus_scores(double p);

// f_p on a captured layer's real features, without re-running the model.
struct FocusStudyOptions {
  double p = 3.0;  // the "after" of the histograms and axes
  std::vector<double> curve_ps = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  int histogram_bins = 50;  // over cosine similarity [0, 1]
  int top_k = 10;           // keys counted by the top-k mass
};

struct FocusStudy {
  // Similarities of every (query, key) pair of the head: cos(phi(q_i), phi(k_j)), counts per bin.
  torch::Tensor histogram_before, histogram_after;  // [bins] int64
  // Queries and keys grouped by their nearest axis (largest channel; f_p never changes it) and the
  // mean cosine to that axis before and after f_p: how hard the group is pulled.
  torch::Tensor axis_counts;                            // [d] int64
  torch::Tensor axis_cosine_before, axis_cosine_after;  // [d] (0 where a group is empty)
  // Mean over queries of the entropy (nats) and top-k mass of the normalised score rows, per p.
  std::vector<double> curve_ps, entropy, top_k_mass;
  std::string source;  // which features were used
};

// The non-negative features f_p acts on in a captured layer, [1, h, T, d] float64 on the CPU, and
// which they are (see study_focusing).
struct FocusFeatures {
  torch::Tensor q, k;
  std::string source;
};
FocusFeatures focus_features(const AttentionCapture& layer, int64_t batch = 0);

// Features: the captured pre-f_p features when the layer ran the focused kernel ((ReLU(x) + 1e-6) /
// softplus(scale), K with its positional encoding), else ReLU(x) + 1e-6 of the captured q and k.
// f_p's norms follow the layer's norm setting (all channels or per head), as the model's do.
FocusStudy study_focusing(const AttentionCapture& layer, int64_t head, const FocusStudyOptions& options = {},
                          int64_t batch = 0);

}  // namespace attnscope
