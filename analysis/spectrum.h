// Numbers that summarise an attention matrix or row: singular spectrum, numerical rank (NumPy's
// default tolerance), effective rank, and the entropy of a row.
#pragma once

#include <torch/types.h>

namespace attnscope {

struct Spectrum {
  torch::Tensor singular_values;  // descending, float32, CPU
  int numerical_rank = 0;         // count above tol = s_max * max(M, N) * eps(float32)
  double tolerance = 0.0;
  double effective_rank = 0.0;  // exp(entropy of s / sum(s)) (Roy & Vetterli)
};

// Full SVD of a matrix [M, N] (computed in float32, as numpy.linalg.matrix_rank on float32 does).
Spectrum matrix_spectrum(const torch::Tensor& matrix);

// Shannon entropy (nats) of a row read as a distribution: negative entries (a DWC band can add
// them) are clamped to 0 and the row is renormalised.
double row_entropy(const torch::Tensor& row);

}  // namespace attnscope
