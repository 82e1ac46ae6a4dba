#include "exports/layout_rows.h"
#include "core/cv_image.h"

#include "analysis/attention_map.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace attnscope {

namespace {

bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code error;
  return std::filesystem::equivalent(a, b, error);
}

}  // namespace

VariantRun variant_model(const VariantChoice& variant, const FigureRequest& request, LoadedModel& model,
                         const RgbImage& prepared_rgb, const RowModels* rows) {
  VariantRun run;
  run.variant = variant;
  run.model = &model;
  run.prepared = prepared_rgb;
  if (!variant.model.empty() && !same_file(variant.model, model.path)) {
    if (!rows || !rows->cache || rows->image_rgb.empty())
      throw std::invalid_argument("--variants: the row '" + variant.label +
                                  "' names another checkpoint, which this figure cannot load");
    run.owned = rows->cache->get(variant.model, "", rows->device);
    configure_input(*run.owned, request.input);
    run.prepared = prepare_model_input(rows->image_rgb, request.input, *run.owned);
    run.model = run.owned.get();
  }
  return run;
}

std::vector<VariantRun> run_variants(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                                     const RowModels* rows) {
  if (request.variants.empty()) throw std::invalid_argument("a figure needs at least one variant");
  std::vector<VariantRun> runs;
  for (const auto& variant : request.variants) {
    VariantRun run = variant_model(variant, request, model, prepared_rgb, rows);
    run.result = run_inference(*run.model, run.prepared, variant.settings);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::string file_safe(const std::string& text) {
  std::string safe;
  for (char c : text) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '=' ? c : '_';
  return safe;
}

int query_in_row(const QuerySpec& query, int first_token, const TokenLayout& first, const TokenLayout& layout) {
  if (first.is_patch(first_token)) return follow_query(first_token, first, layout);
  return resolve_query(query, layout).token;
}

HeatmapPanel query_overlay(const AttentionCapture& capture, int head, int query_token, const FigureRequest& request,
                           const RgbImage& input_rgb) {
  // The map the workbench's panels draw, by the same function (analysis/attention_map.h).
  MapSelection selection;
  selection.head = head;
  selection.query_token = query_token;
  selection.incoming = request.direction == MapDirection::In;
  selection.after_lcm = request.lcm == LcmView::After;
  const torch::Tensor grid = attention_map(capture, selection);
  const TokenLayout& queries = capture.layout;
  HeatmapPanel heatmap;
  // x uniform: a row spreads over the keys, a column over the queries.
  const double factor =
      display_factor(request.scale, selection.incoming ? queries.total_tokens() : capture.key_layout.total_tokens());
  heatmap.values = to_grid_map(grid * factor);
  heatmap.background = input_rgb;
  heatmap.opacity = float(request.opacity);
  heatmap.alpha = request.alpha;
  if (capture.layout.is_patch(query_token)) {
    const TokenLayout& grid_layout = selection.incoming ? queries : capture.key_layout;
    const int marked = follow_query(query_token, queries, grid_layout);
    heatmap.marked_row = grid_layout.row_of(marked);
    heatmap.marked_col = grid_layout.col_of(marked);
  }
  return heatmap;
}

ColorScale attention_scale(const Figure& figure, const FigureRequest& request, const std::string& label, int index) {
  ValueRange range;
  for (const auto& panel : figure.panels)
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      if (heatmap->scale != index) continue;
      range.include(heatmap->values.values.data(), heatmap->values.values.size());
    }
  return figure_scale(resolve_value_scale(request.scale, request.colormap, range), label);
}

std::string prediction_text(const InferenceResult& result, const LoadedModel& model) {
  if (result.top.empty()) return to_string(model.output_kind()) + ", no classes";
  char text[160];
  std::snprintf(text, sizeof text, "%s (%.0f %%)", result.top.front().name.substr(0, 60).c_str(),
                100.0 * result.top.front().probability);
  return text;
}

}  // namespace attnscope
