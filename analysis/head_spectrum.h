// One head's singular spectrum as the workbench, `run` and `analyze` report it: exact where that is
// cheap, else the leading values with bounds.
#pragma once

#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/singular_values.h"
#include "core/grid_map.h"

namespace attnscope {

struct AttentionCapture;

// Which singular spectra `run` computes (nothing O(T^3) unless asked): see the option's help.
enum class RankMode { Auto, Exact, Leading, None };

// One head's singular spectrum: every value by an exact path, or (at many tokens, nothing O(T^3)
// unless asked) the leading values with a posteriori bounds, the ranks then ranges.
struct HeadSpectrum {
  std::string method;                  // "factors", "window blocks", "full SVD" or "leading 32 (...)"
  std::vector<float> singular_values;  // descending; leading: lower bounds of the true values
  std::vector<float> upper_bounds;     // leading: each true value is at most this; exact: empty
  double tolerance = 0.0;              // the numerical rank counts values above it
  int numerical_rank = 0;              // leading: at least this
  int64_t rank_at_most = 0;            // exact: numerical_rank
  double effective_rank = 0.0;         // leading: the low end of its range
  double effective_rank_high = 0.0;    // exact: effective_rank
  bool exact() const { return upper_bounds.empty(); }
};

// The leading singular values computed per head where the exact spectrum is not cheap.
constexpr int64_t kLeadingValues = 32;

// One head's spectrum as `ranks` asks, the one function `run` and the workbench read: by the
// cheapest exact path (factors, window blocks, else a full SVD, which reports to `progress` and can
// be stopped), or, for `leading` and for `auto` where the exact path is a full SVD of more than
// kCheapSpectrumTokens, the kLeadingValues leading values with bounds (analysis/spectrum.h).
// `include_dwc` false: the matrix without FLatten's DWC term (analyze's second spectrum).
HeadSpectrum head_spectrum(const AttentionCapture& capture, int head, RankMode ranks, const SvdProgress& progress = {},
                           bool include_dwc = true);

// A leading spectrum's ranges as run's and analyze's summaries write them: rank_at_least,
// rank_at_most, effective_rank_low, effective_rank_high.
nlohmann::json rank_ranges_json(const HeadSpectrum& leading);

}  // namespace attnscope
