// Token norms (analysis/token_norms.h): the L2 norm of every token of every block's output, the
// high-norm patch tokens of "Vision Transformers Need Registers" (Otsu on the last block's log
// norms, or --norm-threshold), the class token's attention on them per layer, and how similar they
// stay to their neighbours. The workbench shows the layer's patch norms over the image, where
// outliers appear along the depth, the prefix tokens' norms (DINOv2's registers) and that attention.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/token_norms.h"
#include "core/excerpt.h"
#include "views/analysis_options.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

// Everything the CLI writes and the view draws, from one forward pass.
struct NormsReport {
  std::vector<torch::Tensor> norms;  // per block [T_b]
  std::vector<TokenLayout> layouts;
  std::vector<int> stages;
  double threshold = 0.0;
  bool otsu = true;  // chosen automatically (high_norm_threshold), not given
  HighNormThreshold automatic;
  std::vector<NormOutlier> outliers;  // every block's patch tokens above the threshold
  std::vector<int> last_outliers;     // the last block's, as tokens
  std::vector<double> class_mass;     // per block: the class token's attention on last_outliers
  std::vector<double> neighbours;     // per last outlier: mean cosine similarity to its 4 neighbours
  double other_neighbours = 0.0;      // the same, averaged over the last block's other patches
};

// How the report's threshold was chosen, as the summary and the view say it.
const char* threshold_source(const NormsReport& report) {
  if (!report.otsu) return "given";
  return report.automatic.by_otsu() ? "otsu" : "median";
}

// --norm-threshold: a norm above 0, or none for the automatic threshold (the default): Otsu's, at
// least sqrt(10) x the median (high_norm_threshold).
const AnalysisOption<std::optional<double>>& norm_threshold_option() {
  static const AnalysisOption<std::optional<double>> option(
      "norm-threshold", "X",
      "norms: the outliers' threshold on the token norm (otsu: Otsu's on the last block's log patch norms, "
      "at least sqrt(10) x their median)",
      std::nullopt,
      [](const std::string& text) -> std::optional<double> {
        if (text.empty() || text == "otsu") return std::nullopt;
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(value > 0.0) || !std::isfinite(value))
          throw std::invalid_argument("--norm-threshold expects a norm above 0 or otsu, got '" + excerpt(text) + "'");
        return value;
      },
      [](const std::optional<double>& value) { return value ? format_double(*value) : std::string("otsu"); });
  return option;
}

double mean_of(const std::vector<double>& values) {
  double sum = 0;
  int count = 0;
  for (double value : values)
    if (std::isfinite(value)) {
      sum += value;
      ++count;
    }
  return count ? sum / count : std::nan("");
}

NormsReport norms_report(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                         std::optional<double> given_threshold, const std::function<bool()>& cancelled) {
  std::vector<std::string> points;
  for (int layer = 0; layer < model.attention_layers(); ++layer) points.push_back(block_point(layer));
  ForwardOutput output;
  const std::vector<TokenRows> blocks = read_token_rows(model, image, settings, points, &output, cancelled);
  NormsReport report;
  report.norms = token_norms(blocks);
  for (size_t layer = 0; layer < blocks.size(); ++layer) {
    report.layouts.push_back(blocks[layer].layout);
    report.stages.push_back(output.layers[layer].placement.stage);
  }
  const TokenRows& last = blocks.back();
  report.otsu = !given_threshold;
  if (report.otsu)
    report.automatic =
        high_norm_threshold(report.norms.back().index({torch::indexing::Slice(last.layout.prefix_tokens())}));
  report.threshold = report.otsu ? report.automatic.norm : *given_threshold;
  report.outliers = norm_outliers(report.norms, report.layouts, report.threshold);
  std::vector<int> others;
  for (int token = last.layout.prefix_tokens(); token < last.layout.total_tokens(); ++token)
    (report.norms.back()[token].item<double>() > report.threshold ? report.last_outliers : others).push_back(token);
  report.class_mass = class_attention_mass(output.layers, last.layout, report.last_outliers);
  report.neighbours = neighbour_similarity(last, report.last_outliers);
  report.other_neighbours = mean_of(neighbour_similarity(last, others));
  return report;
}

std::vector<float> patch_values(const torch::Tensor& norms, const TokenLayout& layout) {
  return float_values(norms.index({torch::indexing::Slice(layout.prefix_tokens())}));
}

float median_of(std::vector<float> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

int analyze_norms(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  Backbone& model = loaded.model.native("token norms");
  const NormsReport report = norms_report(model, model_input(loaded.model, loaded.prepared), state.attention,
                                          norm_threshold_option()(state), {});
  const TokenLayout& last = report.layouts.back();
  std::string written;
  bool one_grid = true;
  for (const TokenLayout& layout : report.layouts) one_grid = one_grid && layout.total_tokens() == last.total_tokens();
  if (one_grid) {
    context.files->add_npy("norms.npy", torch::stack(report.norms));
    written = "norms.npy";
  } else {
    // Stages of different grids: one [blocks, tokens] array per stage.
    for (size_t begin = 0; begin < report.norms.size();) {
      size_t end = begin;
      while (end < report.norms.size() && report.stages[end] == report.stages[begin]) ++end;
      const std::string name = "norms_stage" + std::to_string(report.stages[begin]) + ".npy";
      context.files->add_npy(name, torch::stack(std::vector<torch::Tensor>(report.norms.begin() + long(begin),
                                                                           report.norms.begin() + long(end))));
      written += (written.empty() ? "" : ", ") + name;
      begin = end;
    }
  }
  std::vector<std::vector<double>> rows;
  for (const NormOutlier& outlier : report.outliers)
    rows.push_back(
        {double(outlier.layer), double(outlier.token), double(outlier.row), double(outlier.col), double(outlier.norm)});
  write_csv(context, "norm_outliers.csv", "layer,token,row,col,norm", rows);
  rows.clear();
  for (size_t i = 0; i < report.last_outliers.size(); ++i) {
    const int token = report.last_outliers[i];
    rows.push_back({double(token), double(last.row_of(token)), double(last.col_of(token)),
                    report.norms.back()[token].item<double>(), report.neighbours[i]});
  }
  write_csv(context, "norm_outlier_neighbours.csv", "token,row,col,norm,neighbour_cosine", rows);
  written += ", norm_outliers.csv, norm_outlier_neighbours.csv";
  json summary = common_summary(context, "norms", last, loaded);
  summary["threshold"] = {{"norm", report.threshold}, {"chosen_by", threshold_source(report)}};
  if (report.otsu) {
    summary["threshold"]["rule"] =
        "the larger of Otsu's threshold (scikit-image) on the log norms of the last block's patches and sqrt(10) x "
        "their median: Darcet et al.'s high-norm tokens are about 10x the median norm, so a split below the "
        "geometric midpoint parts no such tokens from the rest";
    summary["threshold"]["otsu"] = report.automatic.otsu;
    summary["threshold"]["median_floor"] = report.automatic.median_floor;
  }
  summary["outliers_per_layer"] = json::array();
  for (size_t layer = 0; layer < report.norms.size(); ++layer) {
    int count = 0;
    for (const NormOutlier& outlier : report.outliers) count += outlier.layer == int(layer);
    const std::vector<float> patches = patch_values(report.norms[layer], report.layouts[layer]);
    json entry = {{"layer", layer},
                  {"outliers", count},
                  {"max_patch_norm", *std::max_element(patches.begin(), patches.end())},
                  {"median_patch_norm", median_of(patches)}};
    const TokenLayout& layout = report.layouts[layer];
    for (int token = 0; token < layout.prefix_tokens(); ++token)
      entry["prefix_norms"][layout.token_name(token)] = report.norms[layer][token].item<double>();
    summary["outliers_per_layer"].push_back(entry);
  }
  if (report.class_mass.empty()) {
    summary["class_attention_on_outliers"] = "this model has no class token";
  } else {
    rows.clear();
    for (size_t layer = 0; layer < report.class_mass.size(); ++layer)
      rows.push_back({double(layer), report.class_mass[layer],
                      double(report.last_outliers.size()) / report.layouts[layer].total_tokens()});
    write_csv(context, "norm_class_attention.csv", "layer,mass,uniform_mass", rows);
    written += ", norm_class_attention.csv";
    summary["class_attention_on_outliers"] = report.class_mass;
  }
  summary["neighbour_cosine"] = {{"outliers", mean_of(report.neighbours)}, {"other_patches", report.other_neighbours}};
  if (last.prefix_tokens() == 0)
    summary["note"] = "this model has no prefix tokens (class, registers): the norms are the patches' only";
  write_summary(context, "analyze-norms", summary);
  context.print() << "attnscope analyze norms: " << report.norms.size() << " blocks, threshold " << report.threshold
                  << " (" << threshold_source(report) << ")"
                  << ", " << report.last_outliers.size() << " outliers in the last block\nwrote "
                  << context.out.string() << "/{summary.json, " << written << "}\n";
  return 0;
}

// The view: panel 1's report (kept per forward pass and threshold) and the layer on screen.
struct NormsViewData : AnalysisViewData {
  std::shared_ptr<const NormsReport> report;
  int layer = 0;
  RgbImage image;
  double milliseconds = 0.0;
};

void compute_norms_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  const PanelForwardView& panel = input.panels.front();
  const std::string key = "norms|" + panel.input_key + "|" + settings_key(panel.settings) + "|" +
                          norm_threshold_option().text(input.request);
  auto report = input.cache.get<NormsReport>(key);
  if (!report) {
    report = std::make_shared<const NormsReport>(
        norms_report(panel.model->native("token norms"), model_input(*panel.model, panel.result->input_rgb),
                     panel.settings, norm_threshold_option()(input.request), input.cancelled));
    input.cache.put(key, report);
  }
  auto view = std::make_shared<NormsViewData>();
  view->report = report;
  view->layer = outcome.layer;
  view->image = outcome.input_rgb;
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outcome.analysis_view = view;
}

Figure norms_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const NormsViewData*>(outcome.analysis_view.get());
  if (!view) return Figure(1, 1);
  const NormsReport& report = *view->report;
  const int layer = std::clamp(view->layer, 0, int(report.norms.size()) - 1);
  const TokenLayout& layout = report.layouts[size_t(layer)];
  Figure figure(2, 2);
  HeatmapPanel heatmap;
  heatmap.values =
      patch_grid_values(report.norms[size_t(layer)].index({torch::indexing::Slice(layout.prefix_tokens())}), layout);
  heatmap.background = view->image;
  heatmap.opacity = float(state.opacity);
  heatmap.alpha = state.alpha;
  const auto [lowest, highest] = std::minmax_element(heatmap.values.values.begin(), heatmap.values.values.end());
  const double low = *lowest, high = *highest;
  figure.at(0, 0) = {"patch norms, layer " + std::to_string(layer), "norms_layer" + std::to_string(layer), heatmap};

  PlotPanel depth;
  Series max_series, median_series;
  max_series.label = "max";
  median_series.label = "median";
  PlotPanel prefix;
  std::vector<Series> prefix_series;
  for (size_t l = 0; l < report.norms.size(); ++l) {
    const std::vector<float> patches = patch_values(report.norms[l], report.layouts[l]);
    max_series.x.push_back(double(l));
    max_series.y.push_back(*std::max_element(patches.begin(), patches.end()));
    median_series.x.push_back(double(l));
    median_series.y.push_back(median_of(patches));
    const TokenLayout& at = report.layouts[l];
    prefix_series.resize(std::max(prefix_series.size(), size_t(at.prefix_tokens())));
    for (int token = 0; token < at.prefix_tokens(); ++token) {
      prefix_series[size_t(token)].label = at.token_name(token);
      prefix_series[size_t(token)].x.push_back(double(l));
      prefix_series[size_t(token)].y.push_back(report.norms[l][token].item<double>());
    }
  }
  max_series.markers = median_series.markers = true;
  depth.series = {max_series, median_series};
  depth.x_label = "layer";
  depth.y_label = "patch norm";
  depth.log_y = true;
  depth.y_guides = {{report.threshold, threshold_source(report)}};
  depth.x_guides = {{double(layer), ""}};
  figure.at(0, 1) = {"patch norms along the depth", "norms_depth", depth};
  if (prefix_series.empty()) {
    figure.at(1, 0) = {};
  } else {
    median_series.label = "patch median";
    median_series.colour = 7;  // gray
    prefix.series = prefix_series;
    prefix.series.push_back(median_series);
    prefix.x_label = "layer";
    prefix.y_label = "norm";
    prefix.log_y = true;
    prefix.x_guides = {{double(layer), ""}};
    figure.at(1, 0) = {"prefix tokens' norms", "norms_prefix", prefix};
  }
  if (!report.class_mass.empty()) {
    PlotPanel mass;
    Series on_outliers;
    on_outliers.label = "class token on outliers";
    for (size_t l = 0; l < report.class_mass.size(); ++l) {
      on_outliers.x.push_back(double(l));
      on_outliers.y.push_back(report.class_mass[l]);
    }
    on_outliers.markers = true;
    mass.series = {on_outliers};
    mass.x_label = "layer";
    mass.y_label = "attention mass";
    mass.y_guides = {{double(report.last_outliers.size()) / layout.total_tokens(), "uniform"}};
    figure.at(1, 1) = {"class token's attention on the last block's outliers", "norms_class_attention", mass};
  }
  char title[300];
  std::snprintf(title, sizeof title,
                "%zu outliers in the last block above %.3g (%s)%sneighbour cosine %.3f (others %.3f)%s%.1f ms",
                report.last_outliers.size(), report.threshold,
                !report.otsu                 ? "given"
                : report.automatic.by_otsu() ? "Otsu on log norms, above sqrt(10) x median"
                                             : "sqrt(10) x median: Otsu's split is below it",
                kTitleBreak, mean_of(report.neighbours), report.other_neighbours, kTitleBreak, view->milliseconds);
  figure.title = title;
  if (layout.prefix_tokens() == 0)
    figure.title += kTitleBreak + std::string("this model has no prefix tokens: patches only");
  if (report.class_mass.empty() && layout.prefix_tokens() > 0)
    figure.title += kTitleBreak + std::string("no class token: no class attention");
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = float(low);
  scale.vmax = float(high > low ? high : low + 1e-6);
  scale.label = "token norm, layer min..max";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry norms_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-norms", "summary.json", 1},
       "analyze --analysis norms --out OUT",
       R"md(`attnscope analyze --analysis norms`: the L2 norm of every token of every attention block's output.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `threshold.norm` | always | the outlier threshold |
| `threshold.chosen_by` | always | `otsu` (Otsu's split, above the floor), `median` (sqrt(10) x the median, above Otsu's split: no high-norm tokens) or `given` |
| `threshold.rule` | unless given | the rule |
| `threshold.otsu` | unless given | Otsu's threshold on the log norms of the last block's patches |
| `threshold.median_floor` | unless given | sqrt(10) x their median |
| `outliers_per_layer[].layer` | always | the block |
| `outliers_per_layer[].outliers` | always | patches above the threshold |
| `outliers_per_layer[].max_patch_norm` | always | the largest patch norm |
| `outliers_per_layer[].median_patch_norm` | always | the median patch norm |
| `outliers_per_layer[].prefix_norms.*` | when the model has prefix tokens | each prefix token's norm, by name (`cls`, `reg0`) |
| `class_attention_on_outliers` | always | per layer, the class token's attention mass on the last block's outliers, or why there is none |
| `neighbour_cosine.outliers` | always | outliers' mean cosine similarity to their 4 neighbours |
| `neighbour_cosine.other_patches` | always | the same for the other patches |
| `note` | when the model has no prefix tokens | that the norms are the patches' only |)md"});
  entry.name = "norms";
  entry.label = "norms";
  entry.help = "the L2 norm of every block's output tokens and the high-norm outliers (--norm-threshold)";
  entry.options = {norm_threshold_option().spec()};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_norms(context); };
  entry.compute = compute_norms_view;
  entry.figure = norms_figure;
  return entry;
}

}  // namespace attnscope
