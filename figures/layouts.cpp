#include "figures/layouts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "analysis/spectrum.h"
#include "models/inference.h"

namespace attnscope {

const std::vector<FigureLayoutInfo>& figure_layouts() {
  static const std::vector<FigureLayoutInfo> layouts = {
      {"grid-layers", "overlays of the query's attention, variants (rows) x layers (columns), one colour scale"},
      {"grid-heads", "overlays of the query's attention, variants (rows) x heads (columns) of one layer"},
      {"matrix-spectrum", "each variant's attention matrix beside its singular values (log scale, rank marked)"},
  };
  return layouts;
}

FigureRequest FigureRequest::from_state(const AppState& state) {
  FigureRequest request;
  const auto& layouts = figure_layouts();
  const bool known = std::any_of(layouts.begin(), layouts.end(),
                                 [&](const FigureLayoutInfo& info) { return state.figure.layout == info.name; });
  if (!known) {
    std::string names;
    for (const auto& info : layouts) names += std::string(names.empty() ? "" : ", ") + info.name;
    throw std::invalid_argument("--layout: unknown layout '" + state.figure.layout + "' (available: " + names + ")");
  }
  request.layout = state.figure.layout;
  request.format = parse_figure_format(state.figure.format);
  request.style.dpi = state.figure.dpi;
  request.style.png_width = state.figure.png_width;
  request.style.transparent = state.figure.transparent;
  request.overwrite = state.figure.overwrite;
  request.variants = parse_variant_list(state.figure.variants, state.attention);
  request.layers = parse_index_list("layers", state.figure.layers);
  request.heads = parse_index_list("heads", state.figure.heads);
  request.layer = state.layer;
  request.head = state.head;
  request.query = state.query;
  request.colormap = state.colormap;
  request.opacity = state.opacity;
  return request;
}

namespace {

// A [rows, cols] float tensor as an owned CV_32F matrix.
cv::Mat to_mat(const torch::Tensor& values) {
  const torch::Tensor cpu = values.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return cv::Mat(int(cpu.size(0)), int(cpu.size(1)), CV_32FC1, const_cast<float*>(cpu.data_ptr<float>())).clone();
}

// Letters, digits, '.', '-' and '=' stay; anything else becomes '_' (labels become file names).
std::string file_safe(const std::string& text) {
  std::string safe;
  for (char c : text) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '=' ? c : '_';
  return safe;
}

int resolve_layer(int layer, int depth) {
  const int resolved = layer < 0 ? depth + layer : layer;
  if (resolved < 0 || resolved >= depth)
    throw std::invalid_argument("layer " + std::to_string(layer) + ": the model has " + std::to_string(depth) +
                                " blocks (0.." + std::to_string(depth - 1) + ")");
  return resolved;
}

void check_head(int head, int heads) {
  if (head < 0 || head >= heads)
    throw std::invalid_argument("head " + std::to_string(head) + ": the model has " + std::to_string(heads) +
                                " heads (0.." + std::to_string(heads - 1) + ")");
}

std::vector<int> resolve_layers(const std::vector<int>& requested, int depth) {
  std::vector<int> layers;
  if (requested.empty())
    for (int l = 0; l < depth; ++l) layers.push_back(l);
  for (int l : requested) layers.push_back(resolve_layer(l, depth));
  return layers;
}

std::vector<int> resolve_heads(const std::vector<int>& requested, int heads) {
  std::vector<int> list = requested;
  if (list.empty())
    for (int h = 0; h < heads; ++h) list.push_back(h);
  for (int h : list) check_head(h, heads);
  return list;
}

// One colour scale over every heatmap of the figure: [min(0, smallest), largest].
ColorScale shared_scale(const Figure& figure, Colormap colormap, const std::string& label) {
  double lo = 0.0, hi = -HUGE_VAL;
  for (const auto& panel : figure.panels)
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      double panel_lo = 0, panel_hi = 0;
      cv::minMaxLoc(heatmap->values, &panel_lo, &panel_hi);
      lo = std::min(lo, panel_lo);
      hi = std::max(hi, panel_hi);
    }
  if (!(hi > lo)) hi = lo + 1e-12;
  return {colormap, float(lo), float(hi), label};
}

struct VariantRun {
  VariantChoice variant;
  InferenceResult result;
};

std::vector<VariantRun> run_variants(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb) {
  if (request.variants.empty()) throw std::invalid_argument("a figure needs at least one variant");
  std::vector<VariantRun> runs;
  for (const auto& variant : request.variants)
    runs.push_back({variant, run_inference(model, prepared_rgb, variant.settings)});
  return runs;
}

// The query's attention over the patch grid, drawn over the model's input image.
HeatmapPanel query_overlay(const AttentionCapture& capture, int head, int query_token, const FigureRequest& request,
                           const cv::Mat& input_rgb) {
  const TokenLayout& layout = capture.layout;
  const torch::Tensor row = capture.row(0, head, query_token);
  HeatmapPanel heatmap;
  heatmap.values = to_mat(row.slice(0, layout.prefix_tokens()).reshape({layout.grid_h, layout.grid_w}));
  heatmap.background = input_rgb;
  heatmap.opacity = request.opacity;
  if (layout.is_patch(query_token)) {
    heatmap.marked_row = layout.row_of(query_token);
    heatmap.marked_col = layout.col_of(query_token);
  }
  return heatmap;
}

Figure overlay_grid(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                    const std::string& title, bool columns_are_layers) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb);
  const int depth = int(runs.front().result.forward.layers.size());
  const int heads = model.arch.heads;
  const TokenLayout& layout = runs.front().result.forward.layout;
  const ResolvedQuery query = resolve_query(request.query, layout);
  const std::vector<int> columns =
      columns_are_layers ? resolve_layers(request.layers, depth) : resolve_heads(request.heads, heads);
  const int fixed_layer = resolve_layer(request.layer, depth);
  if (columns_are_layers) check_head(request.head, heads);

  Figure figure(int(runs.size()), int(columns.size()));
  figure.title =
      title + "  \u00b7  " +
      (columns_are_layers ? "head " + std::to_string(request.head) : "layer " + std::to_string(fixed_layer)) +
      "  \u00b7  query " + layout.token_name(query.token);
  for (int column : columns)
    figure.col_labels.push_back((columns_are_layers ? "layer " : "head ") + std::to_string(column));
  c10::InferenceMode inference;
  for (size_t r = 0; r < runs.size(); ++r) {
    figure.row_labels.push_back(runs[r].variant.label);
    for (size_t c = 0; c < columns.size(); ++c) {
      const int layer = columns_are_layers ? columns[c] : fixed_layer;
      const int head = columns_are_layers ? request.head : columns[c];
      Panel& panel = figure.at(int(r), int(c));
      panel.data_name = file_safe(runs[r].variant.label) + "_l" + std::to_string(layer) + "_h" + std::to_string(head);
      panel.content = query_overlay(runs[r].result.forward.layers[size_t(layer)], head, query.token, request,
                                    runs[r].result.input_rgb);
    }
  }
  figure.scales.push_back(shared_scale(figure, request.colormap, "attention weight"));
  return figure;
}

Figure matrix_spectrum_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                              const std::string& title) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb);
  const int depth = int(runs.front().result.forward.layers.size());
  const int layer = resolve_layer(request.layer, depth);
  check_head(request.head, model.arch.heads);

  Figure figure(int(runs.size()), 2);
  figure.title = title + "  \u00b7  layer " + std::to_string(layer) + "  \u00b7  head " + std::to_string(request.head);
  figure.col_labels = {"attention matrix", "singular values"};
  c10::InferenceMode inference;
  for (size_t r = 0; r < runs.size(); ++r) {
    figure.row_labels.push_back(runs[r].variant.label);
    const torch::Tensor matrix = runs[r].result.forward.layers[size_t(layer)].matrix(0, request.head);
    const std::string stem =
        file_safe(runs[r].variant.label) + "_l" + std::to_string(layer) + "_h" + std::to_string(request.head);

    HeatmapPanel heatmap;
    heatmap.values = to_mat(matrix);
    heatmap.x_label = "key token";
    heatmap.y_label = "query token";
    figure.at(int(r), 0).data_name = stem + "_matrix";
    figure.at(int(r), 0).content = heatmap;

    const Spectrum spectrum = matrix_spectrum(matrix);
    PlotPanel plot;
    Series values;
    const torch::Tensor s = spectrum.singular_values.to(torch::kDouble).contiguous();
    for (int64_t i = 0; i < s.numel(); ++i) {
      values.x.push_back(double(i + 1));
      values.y.push_back(s.data_ptr<double>()[i]);
    }
    values.label = "singular value";
    plot.series.push_back(values);
    plot.log_y = true;
    plot.x_label = "index";
    plot.y_label = "singular value";
    plot.x_guides.push_back({spectrum.numerical_rank + 0.5, "rank " + std::to_string(spectrum.numerical_rank)});
    if (spectrum.tolerance > 0) plot.y_guides.push_back({spectrum.tolerance, "tol"});
    Panel& spectrum_panel = figure.at(int(r), 1);
    spectrum_panel.data_name = stem + "_spectrum";
    char effective[64];
    std::snprintf(effective, sizeof effective, "effective rank %.1f", spectrum.effective_rank);
    spectrum_panel.title = effective;
    spectrum_panel.content = plot;
  }
  figure.scales.push_back(shared_scale(figure, request.colormap, "attention weight"));
  return figure;
}

}  // namespace

Figure build_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                    const std::string& title) {
  if (request.layout == "grid-layers") return overlay_grid(request, model, prepared_rgb, title, true);
  if (request.layout == "grid-heads") return overlay_grid(request, model, prepared_rgb, title, false);
  if (request.layout == "matrix-spectrum") return matrix_spectrum_figure(request, model, prepared_rgb, title);
  throw std::invalid_argument("unknown figure layout '" + request.layout + "'");
}

}  // namespace attnscope
