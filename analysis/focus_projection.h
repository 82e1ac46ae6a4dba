// FLatten's f_p on real data, in two dimensions: one head's key (or query) vectors' directions before
// and after f_p, projected onto their two largest channels or their first two principal axes, so
// the "pull toward the axes" shows on the model's own features rather than on toy vectors.
#pragma once

#include <string>
#include <vector>

#include "core/enum_names.h"
#include "models/attention.h"

namespace attnscope {

enum class FocusProjectionKind { Channels, Pca };
template <>
struct EnumTable<FocusProjectionKind> {
  static const std::vector<EnumEntry<FocusProjectionKind>>& entries();
};
FocusProjectionKind parse_focus_projection(const std::string& name);  // "channels" | "pca"
std::string to_string(FocusProjectionKind kind);

struct FocusProjection {
  // Unit directions x / ||x|| and f_p(x) / ||f_p(x)|| of the shown vectors, projected.
  std::vector<double> before_x, before_y, after_x, after_y;
  std::string vectors;  // "keys" or "queries"
  std::string axes;     // what the two plot axes are, in words
  std::string x_label, y_label;
  int shown = 0, total = 0;  // at most `max_points` of the head's tokens are drawn, evenly spread
  // Cosine of each shown vector to its nearest channel axis (in all d channels), before and after.
  std::vector<double> axis_cosine_before, axis_cosine_after;
  std::string source;  // which features f_p acts on (see study_focusing)
};

// Throws std::invalid_argument for a layer without q and k, std::out_of_range for a bad head.
FocusProjection project_focusing(const AttentionCapture& layer, int64_t head, double p, bool queries,
                                 FocusProjectionKind kind, int max_points = 200);

}  // namespace attnscope
