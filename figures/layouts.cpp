#include "figures/layouts.h"

#include "core/excerpt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "models/inference.h"

namespace attnscope {

const std::vector<FigureLayoutInfo>& figure_layouts() {
  static const std::vector<FigureLayoutInfo> layouts = {
      {"grid-layers", "overlays of the query's attention, variants (rows) x layers (columns), one colour scale"},
      {"grid-heads", "overlays of the query's attention, variants (rows) x heads (columns) of one layer"},
      {"matrix-spectrum", "each variant's attention matrix beside its singular values (log scale, rank marked)"},
      {"gradcam-attention", "per variant: Grad-CAM beside the query's attention and the attention rollout"},
      {"fp-demo", "FLatten's f_p: toy vectors and scores, then a layer's similarities, entropy and top-k mass vs p"},
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
    throw std::invalid_argument("--layout: unknown layout '" + excerpt(state.figure.layout) + "' (available: " + names +
                                ")");
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
  request.opacity = float(state.opacity);
  request.gradcam_layer = state.gradcam_layer;
  request.target_class = state.target_class;
  request.fusion = state.fusion;
  request.discard = state.discard;
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

std::vector<int> resolve_layers(const std::vector<int>& requested, int depth) {
  std::vector<int> layers;
  if (requested.empty())
    for (int l = 0; l < depth; ++l) layers.push_back(l);
  for (int l : requested) layers.push_back(resolve_layer_index(l, depth));
  return layers;
}

std::vector<int> resolve_heads(const std::vector<int>& requested, int heads) {
  std::vector<int> list = requested;
  if (list.empty())
    for (int h = 0; h < heads; ++h) list.push_back(h);
  for (int h : list) check_head_index(h, heads);
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
  const int fixed_layer = resolve_layer_index(request.layer, depth);
  if (columns_are_layers) check_head_index(request.head, heads);

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
  const int layer = resolve_layer_index(request.layer, depth);
  check_head_index(request.head, model.arch.heads);

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

std::vector<double> to_doubles(const torch::Tensor& values) {
  const torch::Tensor cpu = values.detach().to(torch::kCPU, torch::kDouble).contiguous();
  return std::vector<double>(cpu.data_ptr<double>(), cpu.data_ptr<double>() + cpu.numel());
}

std::vector<double> indices(size_t count, double first = 0.0) {
  std::vector<double> x;
  for (size_t i = 0; i < count; ++i) x.push_back(first + double(i));
  return x;
}

// A map in [0, 1] over the input image, on its own scale.
HeatmapPanel unit_overlay(const torch::Tensor& grid_map, const FigureRequest& request, const cv::Mat& input_rgb,
                          int scale) {
  HeatmapPanel heatmap;
  heatmap.values = to_mat(grid_map);
  heatmap.background = input_rgb;
  heatmap.opacity = request.opacity;
  heatmap.scale = scale;
  return heatmap;
}

Figure gradcam_attention_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                                const std::string& title) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb);
  const int depth = int(runs.front().result.forward.layers.size());
  const int layer = resolve_layer_index(request.layer, depth);
  check_head_index(request.head, model.arch.heads);
  const TokenLayout& layout = runs.front().result.forward.layout;
  const ResolvedQuery query = resolve_query(request.query, layout);
  GradCamOptions gradcam_options;
  gradcam_options.layer = request.gradcam_layer;
  gradcam_options.target_class = request.target_class;
  const std::string gradcam_layer = resolve_gradcam_layer(request.gradcam_layer, depth, model.arch.final_norm);
  const torch::Tensor input = image_to_tensor(prepared_rgb, model.normalization).to(model.device);

  Figure figure(int(runs.size()), 3);
  figure.title = title + "  \u00b7  query " + layout.token_name(query.token);
  figure.col_labels = {"Grad-CAM (" + gradcam_layer + ")",
                       "attention (layer " + std::to_string(layer) + ", head " + std::to_string(request.head) + ")",
                       "rollout (" + to_string(request.fusion) + " of heads)"};
  figure.scales.push_back({request.colormap, 0.0f, 1.0f, "Grad-CAM, rollout (max = 1)"});
  figure.scales.push_back({});  // attention: set from its panels below
  for (size_t r = 0; r < runs.size(); ++r) {
    const VariantRun& run = runs[r];
    const std::string stem = file_safe(run.variant.label);
    figure.row_labels.push_back(run.variant.label);
    const GradCamResult gradcam = grad_cam(model.native("Grad-CAM"), input, run.variant.settings, gradcam_options);
    Panel& gradcam_panel = figure.at(int(r), 0);
    gradcam_panel.title = output_name(model, gradcam.target_class);
    gradcam_panel.data_name = stem + "_gradcam";
    gradcam_panel.content = unit_overlay(gradcam.scaled, request, run.result.input_rgb, 0);

    c10::InferenceMode inference;
    HeatmapPanel attention = query_overlay(run.result.forward.layers[size_t(layer)], request.head, query.token, request,
                                           run.result.input_rgb);
    attention.scale = 1;
    figure.at(int(r), 1).data_name =
        stem + "_attention_l" + std::to_string(layer) + "_h" + std::to_string(request.head);
    figure.at(int(r), 1).content = attention;

    RolloutOptions rollout_options;
    rollout_options.fusion = request.fusion;
    rollout_options.discard_ratio = request.discard;
    rollout_options.query = query.token;
    const RolloutResult rollout = attention_rollout(run.result.forward.layers, rollout_options);
    figure.at(int(r), 2).data_name = stem + "_rollout";
    figure.at(int(r), 2).content = unit_overlay(rollout.normalised, request, run.result.input_rgb, 0);
  }
  // The attention panels share one scale of their own.
  Figure attention_only(figure.rows, 1);
  for (int r = 0; r < figure.rows; ++r) attention_only.at(r, 0) = figure.at(r, 1);
  figure.scales[1] = shared_scale(attention_only, request.colormap, "attention weight");
  return figure;
}

// FLatten's f_p made visible (the paper's Fig. 4 and its effect on a real layer).
Figure focusing_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                       const std::string& title) {
  const VariantChoice& variant = request.variants.front();
  const double p = variant.settings.p;
  char p_text[32];
  std::snprintf(p_text, sizeof p_text, "p = %g", p);

  Figure figure(2, 3);
  figure.title = title + "  \u00b7  f_p with " + p_text + "  \u00b7  " + variant.label;

  // Toy vectors on the quarter circle, before and after f_p.
  const torch::Tensor circle = quarter_circle_vectors(24);
  const torch::Tensor focused = focus_rows(circle, p);
  PlotPanel vectors;
  vectors.series.push_back({"x", to_doubles(circle.select(1, 0)), to_doubles(circle.select(1, 1)), true, false});
  vectors.series.push_back({"f_p(x)", to_doubles(focused.select(1, 0)), to_doubles(focused.select(1, 1)), true, false});
  vectors.x_label = "x\u2081";
  vectors.y_label = "x\u2082";
  figure.at(0, 0) = {"unit vectors, 2-D", "fp_vectors_2d", vectors};

  PlotPanel pull;
  std::vector<double> angles;
  for (int64_t i = 0; i < circle.size(0); ++i)
    angles.push_back(std::atan2(circle[i][1].item<double>(), circle[i][0].item<double>()) * 180.0 / M_PI);
  pull.series.push_back({"x", angles, to_doubles(nearest_axis_cosine(circle)), true, true});
  pull.series.push_back({"f_p(x)", angles, to_doubles(nearest_axis_cosine(focused)), true, true});
  pull.x_label = "angle (degrees)";
  pull.y_label = "cos to nearest axis";
  figure.at(0, 1) = {"pull toward the axes", "fp_axis_cosine_2d", pull};

  const ScoreExample example = example_focus_scores(p);
  PlotPanel scores;
  const std::vector<double> keys = indices(size_t(example.before.numel()), 1.0);
  scores.series.push_back({"ReLU", keys, to_doubles(example.before), true, true});
  scores.series.push_back({"f_p \u2218 ReLU", keys, to_doubles(example.after), true, true});
  scores.x_label = "key";
  scores.y_label = "score";
  figure.at(0, 2) = {"one query's scores", "fp_scores", scores};

  // The same on a real layer's queries and keys.
  const InferenceResult result = run_inference(model, prepared_rgb, variant.settings);
  const int depth = int(result.forward.layers.size());
  const int layer = resolve_layer_index(request.layer, depth);
  check_head_index(request.head, model.arch.heads);
  FocusStudyOptions options;
  options.p = p;
  c10::InferenceMode inference;
  const FocusStudy study = study_focusing(result.forward.layers[size_t(layer)], request.head, options);
  const int bins = int(study.histogram_before.numel());
  PlotPanel histogram;
  std::vector<double> centres;
  for (int b = 0; b < bins; ++b) centres.push_back((b + 0.5) / bins);
  histogram.series.push_back({"ReLU", centres, to_doubles(study.histogram_before), false, true});
  histogram.series.push_back({std::string("f_p, ") + p_text, centres, to_doubles(study.histogram_after), false, true});
  histogram.x_label = "cos(\u03c6(q), \u03c6(k))";
  histogram.y_label = "pairs";
  figure.at(1, 0) = {"query-key similarity", "fp_similarity_histogram", histogram};

  PlotPanel entropy;
  entropy.series.push_back({"entropy", study.curve_ps, study.entropy, true, true});
  entropy.x_guides.push_back({p, p_text});
  entropy.x_label = "p";
  entropy.y_label = "row entropy (nats)";
  figure.at(1, 1) = {"mean row entropy", "fp_entropy", entropy};

  PlotPanel mass;
  mass.series.push_back({"top-k mass", study.curve_ps, study.top_k_mass, true, true});
  mass.x_guides.push_back({p, p_text});
  mass.x_label = "p";
  mass.y_label = "top-" + std::to_string(options.top_k) + " mass";
  figure.at(1, 2) = {"mean top-" + std::to_string(options.top_k) + " mass", "fp_top_k_mass", mass};

  figure.row_labels = {"toy vectors", "layer " + std::to_string(layer) + ", head " + std::to_string(request.head)};
  return figure;
}

}  // namespace

Figure build_figure(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                    const std::string& title) {
  if (request.layout == "grid-layers") return overlay_grid(request, model, prepared_rgb, title, true);
  if (request.layout == "grid-heads") return overlay_grid(request, model, prepared_rgb, title, false);
  if (request.layout == "matrix-spectrum") return matrix_spectrum_figure(request, model, prepared_rgb, title);
  if (request.layout == "gradcam-attention") return gradcam_attention_figure(request, model, prepared_rgb, title);
  if (request.layout == "fp-demo") return focusing_figure(request, model, prepared_rgb, title);
  throw std::invalid_argument("unknown figure layout '" + excerpt(request.layout) + "'");
}

}  // namespace attnscope
