// The plots that both the workbench and the exported figures draw, built in one place: the
// singular spectrum with its tolerance line and rank marker, f_p's similarity histograms (log y
// where one bin dominates), entropy and top-k mass over p, and f_p on a head's own vectors in 2-D.
// The workbench renders these Figures with the same cairo code (render_figure_image) as the exports.
#pragma once

#include <string>
#include <vector>

#include "analysis/focus_projection.h"
#include "figures/figure.h"

namespace attnscope {

// Singular values (descending) on a log axis, the rank tolerance as a dashed line and the
// numerical rank as a marker.
PlotPanel spectrum_plot(const std::vector<double>& singular_values, int numerical_rank, double tolerance);
std::string effective_rank_title(double effective_rank);

// Gives every plot in `column` of `figure` the same y range (the union of theirs), so rows compare.
void share_y_axis(Figure& figure, int column);

// Counts per bin over cosine similarity [0, 1], before and after f_p; a log y axis when one bin
// holds most pairs (otherwise the rest is a flat line at 0).
PlotPanel similarity_histogram_plot(const std::vector<double>& before, const std::vector<double>& after,
                                    const std::string& after_label);
bool histogram_needs_log(const std::vector<double>& counts);

PlotPanel focus_curve_plot(const std::vector<double>& ps, const std::vector<double>& values, double p,
                           const std::string& series_label, const std::string& y_label);

// Each shown vector's direction before (x) and after f_p, with a line from x to f_p(x).
PlotPanel focus_projection_plot(const FocusProjection& projection, double p);
// How close to a channel axis the shown vectors are, before and after: histograms of their cosine
// to the nearest axis.
PlotPanel axis_cosine_plot(const FocusProjection& projection, double p, int bins = 20);

}  // namespace attnscope
