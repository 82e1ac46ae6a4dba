// Two layouts that mirror the workbench: "panels" (each side-by-side panel with its own model and
// variant, at the selected layer, as the selected head, the mean over heads or every head) and
// "fp-vectors" (the f_p view's 2-D projection of a head's vectors before and after f_p).
#include <algorithm>
#include <cstdio>

#include "analysis/focus_metrics.h"
#include "analysis/focus_projection.h"
#include "exports/layout_rows.h"
#include "figures/plots.h"

namespace attnscope {

Figure panels_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                     const std::string& title, const RowModels* rows) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb, rows);
  const std::vector<AttentionCapture>& first_layers = runs.front().result.forward.layers;
  const int layer = resolve_layer_index(request.layer, int(first_layers.size()));
  const TokenLayout& first_layout = first_layers[size_t(layer)].layout;
  const ResolvedQuery query = resolve_query(request.query, first_layout);

  // Columns are the panels; one row for a head or the mean, a row per head for "heads".
  int most_heads = 0;
  for (const auto& run : runs) {
    const auto& layers = run.result.forward.layers;
    most_heads = std::max(most_heads, layers[size_t(std::min(layer, int(layers.size()) - 1))].heads);
  }
  const bool every_head = request.view == HeadView::Heads, mean = request.view == HeadView::Mean;
  if (!every_head && !mean) check_head_index(request.head, first_layers[size_t(layer)].heads);
  Figure figure(every_head ? most_heads : 1, int(runs.size()));
  // The mean view says over how many heads: once in the title when every panel has as many.
  std::vector<int> heads;
  for (const auto& run : runs) {
    const auto& layers = run.result.forward.layers;
    heads.push_back(layers[size_t(std::min(layer, int(layers.size()) - 1))].heads);
  }
  const bool same_heads = std::all_of(heads.begin(), heads.end(), [&](int h) { return h == heads.front(); });
  figure.title = title + "  \u00b7  layer " + std::to_string(layer) + "  \u00b7  query " +
                 first_layout.token_name(query.token) +
                 (mean && same_heads ? "  \u00b7  mean of " + std::to_string(heads.front()) + " heads" : "") +
                 (request.direction == MapDirection::In ? "  \u00b7  in: the attention patches give it" : "");
  if (every_head)
    for (int h = 0; h < most_heads; ++h) figure.row_labels.push_back("head " + std::to_string(h));
  c10::InferenceMode inference;
  for (size_t c = 0; c < runs.size(); ++c) {
    const VariantRun& run = runs[c];
    figure.col_labels.push_back(run.variant.label);
    const auto& layers = run.result.forward.layers;
    // A model with fewer layers shows its last, as the workbench does.
    const int panel_layer = std::min(layer, int(layers.size()) - 1);
    const AttentionCapture& capture = layers[size_t(panel_layer)];
    const int token = query_in_row(request.query, query.token, first_layout, capture.layout);
    for (int r = 0; r < figure.rows; ++r) {
      const int head = every_head ? r : mean ? -1 : request.head;
      if (head >= capture.heads) continue;  // this panel's model has fewer heads: an empty cell
      Panel& panel = figure.at(r, int(c));
      panel.data_name = file_safe(run.variant.label) + "_l" + std::to_string(panel_layer) +
                        (head < 0 ? std::string("_mean") : "_h" + std::to_string(head));
      HeatmapPanel heatmap = query_overlay(capture, head, token, request, run.result.input_rgb);
      std::string text = r == 0 ? prediction_text(run.result, *run.model) : "";
      if (mean && !same_heads) text += "  \u00b7  mean of " + std::to_string(capture.heads) + " heads";
      if (!capture.attention.native) {
        const torch::Tensor values =
            torch::from_blob(heatmap.values.values.data(), {heatmap.values.grid_h, heatmap.values.grid_w});
        const std::string note = near_uniform_note(to_string(capture.attention.kernel), uniformity(values));
        if (!note.empty()) text += (text.empty() ? "" : "  \u00b7  ") + note;
      }
      panel.title = text;
      panel.content = heatmap;
    }
  }
  figure.scales.push_back(attention_scale(figure, request, "attention weight"));
  return figure;
}

Figure fp_vectors_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                         const std::string& title, const RowModels* rows) {
  FigureRequest first_row = request;
  first_row.variants.resize(1);
  const std::vector<VariantRun> runs = run_variants(first_row, model, prepared_rgb, rows);
  const VariantRun& run = runs.front();
  const auto& layers = run.result.forward.layers;
  const int layer = resolve_layer_index(request.layer, int(layers.size()));
  check_head_index(request.head, layers[size_t(layer)].heads);
  const double p = run.variant.settings.p;
  c10::InferenceMode inference;
  const FocusProjection projection = project_focusing(
      layers[size_t(layer)], request.head, p, request.fp_vectors == FocusVectors::Queries, request.fp_projection);
  Figure figure(1, 2);
  char heading[160];
  std::snprintf(heading, sizeof heading, "  \u00b7  f_p with p = %g  \u00b7  %d of %d %s", p, projection.shown,
                projection.total, projection.vectors.c_str());
  figure.title = title + heading;
  figure.row_labels = {"layer " + std::to_string(layer) + ", head " + std::to_string(request.head)};
  figure.at(0, 0) = {projection.axes, "fp_projection", focus_projection_plot(projection, p)};
  figure.at(0, 1) = {"pull toward the axes", "fp_axis_cosine", axis_cosine_plot(projection, p)};
  return figure;
}

}  // namespace attnscope
