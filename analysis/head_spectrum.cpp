#include "analysis/head_spectrum.h"

#include "analysis/spectrum.h"
#include "models/attention.h"

namespace attnscope {

HeadSpectrum head_spectrum(const AttentionCapture& capture, int head, RankMode ranks, const SvdProgress& progress,
                           bool include_dwc) {
  torch::NoGradGuard no_grad;
  HeadSpectrum out;
  const bool leading =
      (ranks == RankMode::Leading || ranks == RankMode::Auto) && !exact_spectrum_is_cheap(capture, head, include_dwc);
  if (leading) {
    const torch::Tensor matrix = include_dwc ? capture.equivalent_matrix(0, head) : capture.matrix(0, head);
    const LeadingSpectrum bounds = leading_spectrum(matrix, kLeadingValues);
    out.method = "leading " + std::to_string(kLeadingValues) + " (randomised subspace iteration, " +
                 std::to_string(bounds.power_iterations) + " power iterations)";
    out.singular_values = float_values(bounds.singular_values);
    out.upper_bounds = float_values(bounds.upper_bounds);
    out.tolerance = bounds.tolerance;
    out.numerical_rank = bounds.rank_at_least;
    out.rank_at_most = bounds.rank_at_most;
    out.effective_rank = bounds.effective_rank_low;
    out.effective_rank_high = bounds.effective_rank_high;
    return out;
  }
  const AttentionSpectrum exact = attention_spectrum(capture, head, include_dwc, 0, progress);
  out.method = exact.method;
  out.singular_values = float_values(exact.spectrum.singular_values);
  out.tolerance = exact.spectrum.tolerance;
  out.numerical_rank = exact.spectrum.numerical_rank;
  out.rank_at_most = exact.spectrum.numerical_rank;
  out.effective_rank = out.effective_rank_high = exact.spectrum.effective_rank;
  return out;
}

nlohmann::json rank_ranges_json(const HeadSpectrum& leading) {
  return {{"rank_at_least", leading.numerical_rank},
          {"rank_at_most", leading.rank_at_most},
          {"effective_rank_low", leading.effective_rank},
          {"effective_rank_high", leading.effective_rank_high}};
}

}  // namespace attnscope
