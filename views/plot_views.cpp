#include "views/plot_views.h"

#include <algorithm>
#include <cstdio>

#include "figures/plots.h"
#include "figures/render.h"

namespace attnscope {

namespace {

constexpr double kScreenPixelsPerPoint = 1.6;

std::vector<double> doubles(const std::vector<float>& values) { return {values.begin(), values.end()}; }

}  // namespace

Panel head_spectrum_panel(const HeadSpectrum& spectrum, const std::string& data_name) {
  if (spectrum.exact())
    return {effective_rank_title(spectrum.effective_rank), data_name,
            spectrum_plot(doubles(spectrum.singular_values), spectrum.numerical_rank, spectrum.tolerance)};
  // Leading values: each true value lies between its two points; the rank is a range.
  PlotPanel plot = spectrum_plot(doubles(spectrum.singular_values), spectrum.numerical_rank, spectrum.tolerance);
  plot.series.front().label = "lower bound";
  Series upper;
  upper.label = "upper bound";
  for (size_t i = 0; i < spectrum.upper_bounds.size(); ++i) {
    upper.x.push_back(double(i + 1));
    upper.y.push_back(spectrum.upper_bounds[i]);
  }
  plot.series.push_back(upper);
  plot.x_guides.front().label = "rank >= " + std::to_string(spectrum.numerical_rank);
  if (spectrum.numerical_rank >= int(spectrum.singular_values.size())) plot.x_guides.clear();  // off the plot
  char title[96];
  std::snprintf(title, sizeof title, "leading %zu values, effective rank %.1f to %.1f", spectrum.singular_values.size(),
                spectrum.effective_rank, spectrum.effective_rank_high);
  return {title, data_name, plot};
}

Figure spectrum_view_figure(const HeadSpectrum& spectrum) {
  Figure figure(1, 1);
  figure.at(0, 0) = head_spectrum_panel(spectrum, "spectrum");
  return figure;
}

Figure focus_view_figure(const FocusView& focus) {
  char p_text[32];
  std::snprintf(p_text, sizeof p_text, "f_p, p = %g", focus.p);
  Figure figure(2, 2);
  const FocusProjection& projection = focus.projection;
  figure.at(0, 0) = {projection.vectors + " before and after f_p", "fp_projection",
                     focus_projection_plot(projection, focus.p)};
  figure.at(0, 1) = {
      "query-key similarity", "fp_similarity",
      similarity_histogram_plot(doubles(focus.histogram_before), doubles(focus.histogram_after), p_text)};
  figure.at(1, 0) = {"mean row entropy", "fp_entropy",
                     focus_curve_plot(doubles(focus.curve_ps), doubles(focus.entropy), focus.p, "entropy", "nats")};
  figure.at(1, 1) = {
      "mean top-10 mass", "fp_top_k",
      focus_curve_plot(doubles(focus.curve_ps), doubles(focus.top_k_mass), focus.p, "top-10 mass", "mass")};
  return figure;
}

FigureStyle screen_figure_style(const Figure& figure, int width) {
  FigureStyle style;
  style.dpi = 72.0 * kScreenPixelsPerPoint;
  width = std::max(60, width);
  try {
    return style_for_width(figure, style, width / kScreenPixelsPerPoint);
  } catch (const std::invalid_argument&) {
    // Labels wider than the column even at the smallest font (a 12 x 12 head grid at 1280 x 800):
    // the figure at its natural size, drawn at fewer pixels a point so that it fits the column,
    // smaller on screen instead of refused.
    const double natural_pt = layout_figure(figure, style).width;
    style.dpi = 72.0 * width / std::max(1.0, natural_pt);
    return style;
  }
}

}  // namespace attnscope
