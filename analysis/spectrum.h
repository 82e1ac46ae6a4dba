// Numbers that summarise an attention matrix or row: singular spectrum, numerical rank (NumPy's
// default tolerance), effective rank, and the entropy of a row.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "analysis/singular_values.h"
#include "models/attention_kernels.h"

namespace attnscope {

struct AttentionCapture;

struct Spectrum {
  torch::Tensor singular_values;  // descending, float32, CPU
  int numerical_rank = 0;         // count above tol = s_max * max(M, N) * eps(float32)
  double tolerance = 0.0;
  double effective_rank = 0.0;  // exp(entropy of s / sum(s)) (Roy & Vetterli)
};

// Up to this many tokens a full SVD takes well under a second; above it, nothing O(T^3) unless asked.
constexpr int64_t kCheapSpectrumTokens = 400;

// Full SVD of a matrix [M, N] (computed in float32, as numpy.linalg.matrix_rank on float32 does).
// Above kCheapSpectrumTokens in both sides it runs panel by panel (exact_singular_values), reports
// to `progress` and can be stopped; a matrix handed over (std::move) is reduced in place.
Spectrum matrix_spectrum(torch::Tensor matrix, const SvdProgress& progress = {});

// The k leading singular values of a large matrix without its full SVD: randomised subspace
// iteration (Halko, Martinsson & Tropp 2011, Alg. 4.4) from products with the matrix, O(M N k) a
// power iteration instead of O(N^3). Each bound is a posteriori, from the projection Q actually
// found: s_i <= sigma_i <= sqrt(s_i^2 + r^2) with r = ||(I - Q Q^T) A||_F (Weyl on A^T A = A^T Q Q^T
// A + the rest), so it holds whatever the spectrum's decay.
struct LeadingSpectrum {
  torch::Tensor singular_values;  // [k] descending, float64: lower bounds of the true ones
  torch::Tensor upper_bounds;     // [k]: sigma_i is at most this
  double residual = 0.0;          // r: Frobenius norm of what Q does not capture
  double tolerance = 0.0;         // the numerical-rank tolerance matrix_spectrum uses
  int rank_at_least = 0;          // values certainly above the tolerance
  int64_t rank_at_most = 0;       // what the residual could still hold above it
  // exp(entropy of s / sum(s)) over every value the bounds allow for the tail (Roy & Vetterli):
  // the tail spread evenly gives the high end, packed into values as large as the k-th the low end.
  double effective_rank_low = 0.0, effective_rank_high = 0.0;
  int power_iterations = 0;
};
LeadingSpectrum leading_spectrum(const torch::Tensor& matrix, int64_t count, int power_iterations = 4,
                                 uint64_t seed = 0);

// Singular values of left @ right^T ([M, r] and [N, r]) without forming it: thin QR of both
// factors and an SVD of the r x r core, O((M + N) r^2), in float64. Returns min(M, N, r) values
// (the rest are exactly 0); the tolerance is the one matrix_spectrum uses for the M x N matrix.
Spectrum factored_spectrum(const torch::Tensor& left, const torch::Tensor& right);

// The factors of one head's equivalent matrix when its kernel has them (equivalent_factors in
// models/attention_kernels.h: linear kernels, r = d; anchors, r = m). None for softmax, a window
// restriction, or when `include_dwc` and the layer's DWC band is on (that band is T x T).
std::optional<MatrixFactors> equivalent_matrix_factors(const AttentionCapture& layer, int64_t head,
                                                       bool include_dwc = true, int64_t batch = 0);

struct AttentionSpectrum {
  Spectrum spectrum;
  std::string method;  // "factors" (O(T r^2)), "window blocks" (one SVD per window) or "full SVD" (O(T^3))
  int rank_bound = 0;  // r for the factor path, T otherwise
  bool dwc = false;    // the DWC band is part of the matrix
  double milliseconds = 0.0;
};

// One head's spectrum by the cheapest exact path: the factors where the matrix has them, the
// blocks of a windowed layer (Swin), else the full SVD of the matrix (softmax, a ViT window
// restriction, the DWC band: at T = 3137 that takes seconds).
AttentionSpectrum attention_spectrum(const AttentionCapture& layer, int64_t head, bool include_dwc = true,
                                     int64_t batch = 0, const SvdProgress& progress = {});

// Whether one head's exact spectrum is cheap: its kernel has thin factors, its layer is windowed,
// or the matrix has at most kCheapSpectrumTokens rows or columns; else it is a full SVD, O(T^3).
// `include_dwc` as attention_spectrum takes it.
bool exact_spectrum_is_cheap(const AttentionCapture& layer, int64_t head, bool include_dwc = true);

// Shannon entropy (nats) of a row read as a distribution: negative entries (a DWC band can add
// them) are clamped to 0 and the row is renormalised.
double row_entropy(const torch::Tensor& row);

}  // namespace attnscope
