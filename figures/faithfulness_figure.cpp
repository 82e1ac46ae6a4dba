#include "figures/faithfulness_figure.h"

#include <cstdio>
#include <stdexcept>

namespace attnscope {

namespace {

// "gradcam++" -> "gradcampp": file names of the panels' data.
std::string data_stem(const std::string& method) {
  std::string stem;
  for (char c : method) stem += c == '+' ? 'p' : c;
  return stem;
}

std::string auc_text(const char* kind, double auc, double random) {
  char text[96];
  std::snprintf(text, sizeof text, "%s AUC %.3f (random %.3f)", kind, auc, random);
  return text;
}

PlotPanel curve_plot(const FaithfulnessCurve& curve, const FaithfulnessCurve& random, const std::string& method,
                     const std::string& x_label) {
  PlotPanel plot;
  plot.series.push_back({method, curve.fraction, curve.probability, true, true});
  plot.series.push_back({"random", random.fraction, random.probability, false, true});
  plot.x_label = x_label;
  plot.y_label = "p(class)";
  return plot;
}

}  // namespace

Figure faithfulness_figure(const FaithfulnessTable& table, const RgbImage& input_rgb, Colormap colormap, float opacity,
                           const std::string& title) {
  Figure figure(int(table.methods.size()), 3);
  char heading[160];
  if (table.target_class >= 0)
    std::snprintf(heading, sizeof heading, "  \u00b7  class %d (p = %.3f)  \u00b7  %s, %d steps", table.target_class,
                  table.probability, to_string(table.options.replacement).c_str(), table.options.steps);
  else  // another target: the curves follow its score
    std::snprintf(heading, sizeof heading, "  \u00b7  %s (%.3f)  \u00b7  %s, %d steps", describe(table.target).c_str(),
                  table.probability, to_string(table.options.replacement).c_str(), table.options.steps);
  figure.title = title + heading;
  figure.col_labels = {"map", "deletion (lower is better)", "insertion (higher is better)"};
  figure.scales.push_back({colormap, 0.0f, 1.0f, "each map's own normalisation"});
  for (size_t r = 0; r < table.methods.size(); ++r) {
    const MethodFaithfulness& row = table.methods[r];
    const std::string method = to_string(row.map.method);
    const std::string stem = data_stem(method);
    figure.row_labels.push_back(method);

    HeatmapPanel heatmap;
    heatmap.values = to_grid_map(row.map.map);
    heatmap.background = input_rgb;
    heatmap.opacity = opacity;
    figure.at(int(r), 0) = {row.map.where, stem + "_map", heatmap};
    figure.at(int(r), 1) = {auc_text("deletion", row.curves.deletion.auc, table.random.deletion.auc),
                            stem + "_deletion",
                            curve_plot(row.curves.deletion, table.random.deletion, method, "fraction removed")};
    figure.at(int(r), 2) = {auc_text("insertion", row.curves.insertion.auc, table.random.insertion.auc),
                            stem + "_insertion",
                            curve_plot(row.curves.insertion, table.random.insertion, method, "fraction added")};
  }
  return figure;
}

}  // namespace attnscope
