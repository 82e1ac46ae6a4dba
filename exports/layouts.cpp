#include "exports/layouts.h"
#include "core/cv_image.h"

#include "core/excerpt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "exports/layout_rows.h"
#include "figures/faithfulness_figure.h"
#include "figures/plots.h"
#include "models/inference.h"

namespace attnscope {

FigureRequest FigureRequest::from_state(const AppState& state) {
  FigureRequest request;
  const FigureLayoutInfo& layout = figure_layout(state.figure.layout);
  static_cast<FigureOutput&>(request) = figure_output(state);
  // A session's side-by-side panels are its figure's rows unless it names rows of its own, so that
  // `export --session` draws the panels the session holds (and writes back), as the workbench does.
  request.variants = variant_rows(
      state.figure.variants.empty() && !state.compare.empty() ? state.panels_as_figure_rows() : state.figure.variants,
      state.attention);
  request.layers = state.figure.layers;
  request.heads = state.figure.heads;
  static_cast<ViewSelection&>(request) = state;
  static_cast<AnalysisSettings&>(request) = state;
  static_cast<DisplaySettings&>(request) = state;
  request.width_pt = state.figure.width_pt;
  request.input = state.input_settings();
  if (layout.faithfulness) request.faithfulness = faithfulness_request(state);
  return request;
}

namespace {

std::vector<double> to_doubles(const torch::Tensor& values) {
  const torch::Tensor cpu = values.detach().to(torch::kCPU, torch::kDouble).contiguous();
  return std::vector<double>(cpu.data_ptr<double>(), cpu.data_ptr<double>() + cpu.numel());
}

std::vector<int> resolve_layers(const std::vector<int>& requested, int depth) {
  std::vector<int> layers;
  if (requested.empty())
    for (int l = 0; l < depth; ++l) layers.push_back(l);
  for (int l : requested) {
    layers.push_back(resolve_layer_index(l, depth, "--layers"));
    // Two panels of one block (0 and -4 of four) would be one figure's panel twice.
    for (size_t before = 0; before + 1 < layers.size(); ++before)
      if (layers[before] == layers.back())
        throw std::invalid_argument("--layers names block " + std::to_string(layers.back()) + " twice (" +
                                    std::to_string(requested[before]) + " and " + std::to_string(l) + ")");
  }
  return layers;
}

std::vector<int> resolve_heads(const std::vector<int>& requested, int heads) {
  std::vector<int> list = requested;
  if (list.empty())
    for (int h = 0; h < heads; ++h) list.push_back(h);
  for (size_t i = 0; i < list.size(); ++i) {
    check_head_index(list[i], heads, "--heads");
    if (std::find(list.begin(), list.begin() + long(i), list[i]) != list.begin() + long(i))
      throw std::invalid_argument("--heads names head " + std::to_string(list[i]) + " twice");
  }
  return list;
}

Figure overlay_grid(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                    const std::string& title, bool columns_are_layers, const RowModels* rows) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb, rows);
  const std::vector<AttentionCapture>& captures = runs.front().result.forward.layers;
  const int depth = int(captures.size());
  const int fixed_layer = resolve_layer_index(request.layer, depth);
  // The query is given in the fixed layer's grid; other layers (other stages) take the patch at the
  // same place in the image.
  const TokenLayout& layout = captures[size_t(fixed_layer)].layout;
  const ResolvedQuery query = resolve_query(request.query, layout);
  const std::vector<int> columns = columns_are_layers
                                       ? resolve_layers(request.layers, depth)
                                       : resolve_heads(request.heads, captures[size_t(fixed_layer)].heads);
  // grid-layers shows one head or, with --view mean, the mean over heads.
  const bool mean = columns_are_layers && request.view == HeadView::Mean;
  if (columns_are_layers && !mean)
    for (int column : columns) check_head_index(request.head, captures[size_t(column)].heads);

  Figure figure(int(runs.size()), int(columns.size()));
  const std::string heads_text = mean ? "mean of " + std::to_string(captures[size_t(fixed_layer)].heads) + " heads"
                                      : "head " + std::to_string(request.head);
  figure.title = title + "  \u00b7  " + (columns_are_layers ? heads_text : "layer " + std::to_string(fixed_layer)) +
                 "  \u00b7  query " + layout.token_name(query.token);
  for (int column : columns)
    figure.col_labels.push_back((columns_are_layers ? "layer " : "head ") + std::to_string(column));
  c10::InferenceMode inference;
  for (size_t r = 0; r < runs.size(); ++r) {
    figure.row_labels.push_back(runs[r].variant.label);
    const std::vector<AttentionCapture>& row_layers = runs[r].result.forward.layers;
    for (size_t c = 0; c < columns.size(); ++c) {
      const int layer = columns_are_layers ? resolve_layer_index(columns[c], int(row_layers.size())) : fixed_layer;
      const int head = mean ? -1 : columns_are_layers ? request.head : columns[c];
      Panel& panel = figure.at(int(r), int(c));
      panel.data_name = file_safe(runs[r].variant.label) + "_l" + std::to_string(layer) +
                        (head < 0 ? std::string("_mean") : "_h" + std::to_string(head));
      const AttentionCapture& capture = row_layers[size_t(std::min(layer, int(row_layers.size()) - 1))];
      if (head >= capture.heads) check_head_index(head, capture.heads);
      const int token = query_in_row(request.query, follow_query(query.token, layout, captures[size_t(layer)].layout),
                                     captures[size_t(layer)].layout, capture.layout);
      panel.content = query_overlay(capture, head, token, request, runs[r].result.input_rgb);
    }
  }
  figure.scales.push_back(attention_scale(figure, request, "attention weight"));
  return figure;
}

Figure matrix_spectrum_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                              const std::string& title, const RowModels* rows) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb, rows);
  const int depth = int(runs.front().result.forward.layers.size());
  const int layer = resolve_layer_index(request.layer, depth);
  check_head_index(request.head, runs.front().result.forward.layers[size_t(layer)].heads);

  Figure figure(int(runs.size()), 2);
  figure.title = title + "  \u00b7  layer " + std::to_string(layer) + "  \u00b7  head " + std::to_string(request.head);
  figure.col_labels = {"attention matrix", "singular values"};
  c10::InferenceMode inference;
  for (size_t r = 0; r < runs.size(); ++r) {
    figure.row_labels.push_back(runs[r].variant.label);
    const auto& row_layers = runs[r].result.forward.layers;
    const AttentionCapture& capture = row_layers[size_t(resolve_layer_index(request.layer, int(row_layers.size())))];
    check_head_index(request.head, capture.heads);
    const torch::Tensor matrix = capture.equivalent_matrix(0, request.head);
    const std::string stem =
        file_safe(runs[r].variant.label) + "_l" + std::to_string(layer) + "_h" + std::to_string(request.head);

    HeatmapPanel heatmap;
    heatmap.values = to_grid_map(matrix * display_factor(request.scale, int(matrix.size(1))));
    heatmap.x_label = "key token";
    heatmap.y_label = "query token";
    figure.at(int(r), 0).data_name = stem + "_matrix";
    figure.at(int(r), 0).content = heatmap;

    Panel& spectrum_panel = figure.at(int(r), 1);
    spectrum_panel.data_name = stem + "_spectrum";
    const Spectrum spectrum = matrix_spectrum(matrix);
    spectrum_panel.title = effective_rank_title(spectrum.effective_rank);
    spectrum_panel.content =
        spectrum_plot(to_doubles(spectrum.singular_values), spectrum.numerical_rank, spectrum.tolerance);
  }
  // One y axis for every row, so spectra compare by height.
  share_y_axis(figure, 1);
  figure.scales.push_back(attention_scale(figure, request, "attention weight"));
  return figure;
}

std::vector<double> indices(size_t count, double first = 0.0) {
  std::vector<double> x;
  for (size_t i = 0; i < count; ++i) x.push_back(first + double(i));
  return x;
}

// A map in [0, 1] over the input image, on its own scale with its own colour bar beside it.
HeatmapPanel unit_overlay(const torch::Tensor& grid_map, const FigureRequest& request, const RgbImage& input_rgb,
                          int scale) {
  HeatmapPanel heatmap;
  heatmap.values = to_grid_map(grid_map);
  heatmap.background = input_rgb;
  heatmap.opacity = float(request.opacity);
  heatmap.alpha = request.alpha;
  heatmap.scale = scale;
  heatmap.colour_bar = true;
  return heatmap;
}

Figure gradcam_attention_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                                const std::string& title, const RowModels* rows) {
  const std::vector<VariantRun> runs = run_variants(request, model, prepared_rgb, rows);
  const int depth = int(runs.front().result.forward.layers.size());
  const int layer = resolve_layer_index(request.layer, depth);
  const AttentionCapture& first_capture = runs.front().result.forward.layers[size_t(layer)];
  check_head_index(request.head, first_capture.heads);
  const TokenLayout& layout = first_capture.layout;
  const ResolvedQuery query = resolve_query(request.query, layout);
  GradCamOptions gradcam_options;
  gradcam_options.layer = request.gradcam_layer;
  const std::string gradcam_layer = model.native("Grad-CAM").resolve_hook_point(request.gradcam_layer);

  Figure figure(int(runs.size()), 3);
  figure.title = title + "  \u00b7  query " + layout.token_name(query.token);
  figure.col_labels = {"Grad-CAM (" + gradcam_layer + ")",
                       "attention (layer " + std::to_string(layer) + ", head " + std::to_string(request.head) + ")",
                       "rollout (" + to_string(request.fusion) + " of heads)"};
  // Each column its own scale, drawn beside every panel: Grad-CAM and rollout are scaled to a
  // maximum of 1, attention is in weights (shared by the rows, so variants compare).
  figure.scales.push_back({request.colormap, 0.0f, 1.0f, "Grad-CAM (max = 1)"});
  figure.scales.push_back({});  // attention: set from its panels below
  figure.scales.push_back({request.colormap, 0.0f, 1.0f, "rollout (max = 1)"});
  for (size_t r = 0; r < runs.size(); ++r) {
    const VariantRun& run = runs[r];
    LoadedModel& row_model = *run.model;
    const std::string stem = file_safe(run.variant.label);
    figure.row_labels.push_back(run.variant.label);
    const torch::Tensor input = image_to_tensor(run.prepared, row_model.normalization).to(row_model.device);
    // Each row's own model resolves the target (a prompt through its text tower, another image through it).
    gradcam_options.target =
        resolve_target_spec(request.target, {row_model, request.input, run.variant.settings, kDefaultMaxPixels});
    const GradCamResult gradcam = grad_cam(row_model.native("Grad-CAM"), input, run.variant.settings, gradcam_options);
    Panel& gradcam_panel = figure.at(int(r), 0);
    gradcam_panel.title = gradcam.target.kind == TargetKind::Class ? output_name(row_model, gradcam.target_class)
                                                                   : describe(gradcam.target);
    gradcam_panel.data_name = stem + "_gradcam";
    gradcam_panel.content = unit_overlay(gradcam.scaled, request, run.result.input_rgb, 0);

    c10::InferenceMode inference;
    const auto& row_layers = run.result.forward.layers;
    const AttentionCapture& capture = row_layers[size_t(resolve_layer_index(request.layer, int(row_layers.size())))];
    check_head_index(request.head, capture.heads);
    const int token = query_in_row(request.query, query.token, layout, capture.layout);
    HeatmapPanel attention = query_overlay(capture, request.head, token, request, run.result.input_rgb);
    attention.scale = 1;
    attention.colour_bar = true;
    figure.at(int(r), 1).data_name =
        stem + "_attention_l" + std::to_string(layer) + "_h" + std::to_string(request.head);
    figure.at(int(r), 1).content = attention;

    RolloutOptions rollout_options;
    rollout_options.fusion = request.fusion;
    rollout_options.discard_ratio = request.discard;
    rollout_options.query = token;
    const RolloutResult rollout = attention_rollout(row_layers, rollout_options);
    figure.at(int(r), 2).data_name = stem + "_rollout";
    figure.at(int(r), 2).content = unit_overlay(rollout.normalised, request, run.result.input_rgb, 2);
  }
  figure.scales[1] = attention_scale(figure, request, "attention weight", 1);
  return figure;
}

// FLatten's f_p made visible (the paper's Fig. 4 and its effect on a real layer).
Figure focusing_figure(const FigureRequest& request, LoadedModel& base_model, const RgbImage& base_prepared,
                       const std::string& title, const RowModels* rows) {
  FigureRequest first_row = request;
  first_row.variants.resize(1);
  VariantRun run = std::move(run_variants(first_row, base_model, base_prepared, rows).front());
  const VariantChoice& variant = run.variant;
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
  const InferenceResult& result = run.result;
  const int depth = int(result.forward.layers.size());
  const int layer = resolve_layer_index(request.layer, depth);
  check_head_index(request.head, result.forward.layers[size_t(layer)].heads);
  FocusStudyOptions options;
  options.p = p;
  c10::InferenceMode inference;
  const FocusStudy study = study_focusing(result.forward.layers[size_t(layer)], request.head, options);
  const PlotPanel histogram = similarity_histogram_plot(
      to_doubles(study.histogram_before), to_doubles(study.histogram_after), std::string("f_p, ") + p_text);
  figure.at(1, 0) = {"query-key similarity", "fp_similarity_histogram", histogram};
  figure.at(1, 1) = {"mean row entropy", "fp_entropy",
                     focus_curve_plot(study.curve_ps, study.entropy, p, "entropy", "row entropy (nats)")};
  const std::string top_k = "top-" + std::to_string(options.top_k) + " mass";
  figure.at(1, 2) = {"mean " + top_k, "fp_top_k_mass",
                     focus_curve_plot(study.curve_ps, study.top_k_mass, p, "top-k mass", top_k)};

  figure.row_labels = {"toy vectors", "layer " + std::to_string(layer) + ", head " + std::to_string(request.head)};
  return figure;
}

// The layout as `export --layout faithfulness` builds it: the table for the first variant (on its own
// checkpoint when it names one, loaded through `rows`), then the figure.
Figure faithfulness_layout(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                           const std::string& title, const RowModels* rows) {
  if (request.variants.empty()) throw std::invalid_argument("a figure needs at least one variant");
  const VariantChoice& variant = request.variants.front();
  const VariantRun row = variant_model(variant, request, model, prepared_rgb, rows);
  LoadedModel* row_model = row.model;
  const RgbImage& row_rgb = row.prepared;
  const torch::Tensor input = image_to_tensor(row_rgb, row_model->normalization).to(row_model->device);
  FaithfulnessTableRequest faithfulness = request.faithfulness;
  faithfulness.faithfulness.target =
      resolve_target_spec(request.target, {*row_model, request.input, variant.settings, kDefaultMaxPixels});
  const FaithfulnessTable table = faithfulness_table(row_model->native("faithfulness"), input, variant.settings,
                                                     row_model->normalization, faithfulness);
  return faithfulness_figure(table, row_rgb, request.colormap, float(request.opacity),
                             title + "  \u00b7  " + variant.label);
}

}  // namespace

const std::vector<FigureLayoutInfo>& figure_layouts() {
  static const std::vector<FigureLayoutInfo> layouts = {
      {"grid-layers", "overlays of the query's attention, variants (rows) x layers (columns), one colour scale",
       [](const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb, const std::string& title,
          const RowModels* rows) { return overlay_grid(request, model, prepared_rgb, title, true, rows); }},
      {"grid-heads", "overlays of the query's attention, variants (rows) x heads (columns) of one layer",
       [](const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb, const std::string& title,
          const RowModels* rows) { return overlay_grid(request, model, prepared_rgb, title, false, rows); }},
      {"matrix-spectrum", "each variant's attention matrix beside its singular values (log scale, rank marked)",
       matrix_spectrum_figure},
      {"gradcam-attention", "per variant: Grad-CAM beside the query's attention and the attention rollout",
       gradcam_attention_figure},
      {"fp-demo", "FLatten's f_p: toy vectors and scores, then a layer's similarities, entropy and top-k mass vs p",
       focusing_figure},
      {"panels", "what the workbench shows: each panel (model, variant) side by side, --view head, mean or heads",
       panels_figure},
      {"fp-vectors", "a head's key or query vectors before and after f_p in 2-D (PCA), a line from each x to f_p(x)",
       fp_vectors_figure},
      {"faithfulness", "per attribution method (--methods): its map, deletion and insertion curves against random",
       faithfulness_layout, true},
  };
  return layouts;
}

const FigureLayoutInfo& figure_layout(const std::string& name) {
  for (const FigureLayoutInfo& info : figure_layouts())
    if (name == info.name) return info;
  std::string names;
  for (const auto& info : figure_layouts()) names += std::string(names.empty() ? "" : ", ") + info.name;
  throw std::invalid_argument("--layout: unknown layout '" + excerpt(name) + "' (available: " + names + ")");
}

Figure build_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                    const std::string& title, const RowModels* rows) {
  Figure figure = figure_layout(request.layout).build(request, model, prepared_rgb, title, rows);
  // Two rows of one variant (the workbench allows two panels alike) name their files apart.
  number_repeated_data_names(figure);
  return figure;
}

}  // namespace attnscope
