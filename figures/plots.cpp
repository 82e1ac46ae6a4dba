#include "figures/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "figures/plot_axes.h"

namespace attnscope {

namespace {

std::string p_text(double p) {
  char text[32];
  std::snprintf(text, sizeof text, "p = %g", p);
  return text;
}

std::vector<double> bin_centres(size_t bins) {
  std::vector<double> centres;
  for (size_t b = 0; b < bins; ++b) centres.push_back((double(b) + 0.5) / double(bins));
  return centres;
}

}  // namespace

PlotPanel spectrum_plot(const std::vector<double>& singular_values, int numerical_rank, double tolerance) {
  PlotPanel plot;
  Series values;
  values.label = "singular value";
  for (size_t i = 0; i < singular_values.size(); ++i) {
    values.x.push_back(double(i + 1));
    values.y.push_back(singular_values[i]);
  }
  plot.series.push_back(values);
  plot.log_y = true;
  plot.x_label = "index";
  plot.y_label = "singular value";
  plot.x_guides.push_back({numerical_rank + 0.5, "rank " + std::to_string(numerical_rank)});
  if (tolerance > 0) plot.y_guides.push_back({tolerance, "tol"});
  return plot;
}

std::string effective_rank_title(double effective_rank) {
  char text[64];
  std::snprintf(text, sizeof text, "effective rank %.1f", effective_rank);
  return text;
}

void share_y_axis(Figure& figure, int column) {
  double low = HUGE_VAL, high = -HUGE_VAL;
  std::vector<PlotPanel*> plots;
  for (int r = 0; r < figure.rows; ++r)
    if (auto* plot = std::get_if<PlotPanel>(&figure.at(r, column).content)) plots.push_back(plot);
  for (PlotPanel* plot : plots) {
    plot->y_lo = plot->y_hi = 0;  // this plot's own range
    const PlotAxes axes = plot_axes(*plot);
    low = std::min(low, axes.y_lo);
    high = std::max(high, axes.y_hi);
  }
  if (!(high > low)) return;
  for (PlotPanel* plot : plots) {
    plot->y_lo = low;
    plot->y_hi = high;
  }
}

bool histogram_needs_log(const std::vector<double>& counts) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  if (!(total > 0)) return false;
  const double largest = *std::max_element(counts.begin(), counts.end());
  return largest > 0.5 * total;  // one bin holds most pairs: on a linear axis the rest would be flat at 0
}

PlotPanel similarity_histogram_plot(const std::vector<double>& before, const std::vector<double>& after,
                                    const std::string& after_label) {
  PlotPanel plot;
  plot.series.push_back({"ReLU", bin_centres(before.size()), before, false, true});
  plot.series.push_back({after_label, bin_centres(after.size()), after, false, true});
  plot.x_label = "cos(\u03c6(q), \u03c6(k))";
  plot.log_y = histogram_needs_log(before) || histogram_needs_log(after);
  plot.y_label = "pairs";
  return plot;
}

PlotPanel focus_curve_plot(const std::vector<double>& ps, const std::vector<double>& values, double p,
                           const std::string& series_label, const std::string& y_label) {
  PlotPanel plot;
  plot.series.push_back({series_label, ps, values, true, true});
  plot.x_guides.push_back({p, p_text(p)});
  plot.x_label = "p";
  plot.y_label = y_label;
  return plot;
}

PlotPanel focus_projection_plot(const FocusProjection& projection, double p) {
  PlotPanel plot;
  Series links;  // x -> f_p(x), one segment per vector
  links.pairs = true;
  links.colour = 7;  // grey: the links stay behind the points
  for (size_t i = 0; i < projection.before_x.size(); ++i) {
    links.x.push_back(projection.before_x[i]);
    links.y.push_back(projection.before_y[i]);
    links.x.push_back(projection.after_x[i]);
    links.y.push_back(projection.after_y[i]);
  }
  plot.series.push_back(links);
  plot.series.push_back({"x", projection.before_x, projection.before_y, true, false, false, 0});
  plot.series.push_back({"f_p(x), " + p_text(p), projection.after_x, projection.after_y, true, false, false, 1});
  plot.x_label = projection.x_label;
  plot.y_label = projection.y_label;
  plot.same_xy_range = true;
  return plot;
}

PlotPanel axis_cosine_plot(const FocusProjection& projection, double p, int bins) {
  auto histogram = [bins](const std::vector<double>& values) {
    std::vector<double> counts(size_t(bins), 0.0);
    for (double v : values) counts[size_t(std::clamp(int(v * bins), 0, bins - 1))] += 1;
    return counts;
  };
  PlotPanel plot;
  plot.series.push_back({"x", bin_centres(size_t(bins)), histogram(projection.axis_cosine_before), true, true});
  plot.series.push_back(
      {"f_p(x), " + p_text(p), bin_centres(size_t(bins)), histogram(projection.axis_cosine_after), true, true});
  plot.x_label = "cos to nearest channel axis";
  plot.y_label = projection.vectors;
  return plot;
}

}  // namespace attnscope
