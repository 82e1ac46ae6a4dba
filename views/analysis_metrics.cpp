// Focus metrics per head (analysis/focus_metrics.h): the entropy, top-k mass and Gini coefficient
// of the query's map, and its mass inside a box of patches or an object mask, per variant.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/focus_metrics.h"
#include "core/output_files.h"
#include "figures/plots.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

int analyze_metrics(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const int top_k = context.line.flag_int("top-k");
  if (top_k < 1) throw std::invalid_argument("--top-k must be >= 1");
  std::ostringstream csv;
  csv << "variant,head,entropy,top_k_mass,gini,box_mass,object_mass\n" << std::setprecision(9);
  json variants = json::array();
  TokenLayout layout;
  int layer = 0;
  ResolvedQuery query;
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int selected) {
    layer = selected;
    layout = capture.layout;  // queries on the layer's grid; its rows lie on its key grid
    const TokenLayout& keys = capture.key_layout;
    query = resolve_query(state.query, layout);
    const torch::Tensor box = state.box.empty() ? torch::Tensor() : box_coverage(parse_patch_box(state.box), keys);
    const torch::Tensor object =
        loaded.object_mask.defined() ? patch_coverage(loaded.object_mask, keys) : torch::Tensor();
    json heads = json::array();
    torch::NoGradGuard no_grad;
    for (int head = 0; head < capture.heads; ++head) {
      const torch::Tensor patch_map = capture.row(0, head, query.token).slice(0, keys.prefix_tokens());
      const FocusSummary focus = summarise_focus(patch_map, top_k, box, object);
      auto optional = [](const std::optional<double>& value) { return value ? json(*value) : json(nullptr); };
      heads.push_back({{"head", head},
                       {"entropy", focus.entropy},
                       {"top_k_mass", focus.top_k_mass},
                       {"gini", focus.gini},
                       {"box_mass", optional(focus.box_mass)},
                       {"object_mass", optional(focus.object_mass)}});
      csv << to_string(variant) << "," << head << "," << focus.entropy << "," << focus.top_k_mass << "," << focus.gini
          << "," << (focus.box_mass ? std::to_string(*focus.box_mass) : "") << ","
          << (focus.object_mass ? std::to_string(*focus.object_mass) : "") << "\n";
    }
    variants.push_back(
        {{"variant", to_string(variant)}, {"attention", capture.attention.describe()}, {"heads", heads}});
  });
  context.files->add_text("metrics.csv", csv.str());
  json summary = common_summary(context, "metrics", layout, loaded);
  summary["layer"] = layer;
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  summary["top_k"] = top_k;
  summary["variants"] = variants;
  write_summary(context, "analyze-metrics", summary);
  context.print() << "attnscope analyze metrics: layer " << layer << ", query " << layout.token_name(query.token)
                  << "\nwrote " << context.out.string() << "/{summary.json, metrics.csv}\n";
  return 0;
}

// Every panel's focus metrics per head, from the maps the panels show (the same numbers), with the
// mass inside the box where one is drawn.
void compute_metrics_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  PanelFocusMetrics metrics;
  PanelFocusMetrics* view = &metrics;
  for (size_t index = 0; index < outcome.panels.size(); ++index) {
    const PanelMaps& panel = outcome.panels[index];
    std::vector<HeadFocusMetrics> heads;
    if (panel.head_maps.empty() || !input.panels[index].result) {
      view->panels.push_back(heads);
      continue;
    }
    const AttentionCapture& capture = input.panels[index].result->forward.layers[size_t(panel.layer)];
    torch::Tensor box;
    if (!input.request.box.empty()) {
      try {
        box = box_coverage(parse_patch_box(input.request.box),
                           map_grid(capture, input.request.direction == MapDirection::In));
      } catch (const std::invalid_argument& e) {
        if (index == 0) view->box_error = e.what();
      }
    }
    for (int head = 0; head < int(panel.head_maps.size()); ++head) {
      const GridMap& map = panel.head_maps[size_t(head)];
      const torch::Tensor values =
          torch::from_blob(const_cast<float*>(map.values.data()), {int64_t(map.values.size())}, torch::kFloat);
      const FocusSummary summary = summarise_focus(values, kFocusTopK, box);
      heads.push_back({head, summary.entropy, summary.top_k_mass, summary.gini, summary.box_mass});
    }
    view->panels.push_back(std::move(heads));
  }
  outcome.analysis_view = std::make_shared<const AnalysisResult<PanelFocusMetrics>>(std::move(metrics));
}

// One plot per metric: each panel a series over its heads (the numbers the view's table shows).
Figure metrics_figure(const InferenceOutcome& outcome, const AppState&) {
  const std::vector<std::pair<std::string, double HeadFocusMetrics::*>> measures = {
      {"entropy", &HeadFocusMetrics::entropy},
      {"top-" + std::to_string(kFocusTopK) + " mass", &HeadFocusMetrics::top_k_mass},
      {"Gini", &HeadFocusMetrics::gini}};
  const auto* view = analysis_result<PanelFocusMetrics>(outcome);
  Figure figure(1, int(measures.size()));
  for (size_t m = 0; m < measures.size(); ++m) {
    PlotPanel plot;
    plot.x_label = "head";
    plot.y_label = measures[m].first;
    for (size_t index = 0; view && index < view->panels.size(); ++index) {
      Series series;
      series.label = "panel " + std::to_string(index + 1);
      series.markers = true;
      for (const auto& head : view->panels[index]) {
        series.x.push_back(head.head);
        series.y.push_back(head.*measures[m].second);
      }
      if (!series.x.empty()) plot.series.push_back(series);
    }
    figure.at(0, int(m)) = {measures[m].first, "metrics_" + std::to_string(m), plot};
  }
  return figure;
}

}  // namespace

AnalysisEntry metrics_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-metrics", "summary.json", 1},
                           "analyze --analysis metrics --out OUT",
                           R"md(`attnscope analyze --analysis metrics`: focus of the query's row per head and variant.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer` | always | the layer |
| `query.token` | always | the query's token index |
| `query.name` | always | its name |
| `top_k` | always | `--top-k` |
| `variants[].variant` | always | the variant |
| `variants[].attention` | always | the attention it ran |
| `variants[].heads[].head` | always | the head |
| `variants[].heads[].entropy` | always | entropy of the row over the patches |
| `variants[].heads[].top_k_mass` | always | the mass of its k largest weights |
| `variants[].heads[].gini` | always | its Gini coefficient |
| `variants[].heads[].box_mass` | always | mass inside `--box`, `null` without one |
| `variants[].heads[].object_mass` | always | mass inside the object mask, `null` without one |)md"});
  entry.name = "metrics";
  entry.label = "metrics";
  entry.help = "focus metrics of the query's map per head (--box, --object-mask, --variants)";
  entry.reads = {"box"};  // the box drawn on the views (ViewSelection): analyze takes it as --box
  entry.flags = {
      kTopKFlag,
      kVariantsFlag,
      {"object-mask", "FILE", "metrics: object mask image (nonzero = object), transformed like the image", ""}};
  entry.compute = compute_metrics_view;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_metrics(context); };
  entry.figure = metrics_figure;
  return entry;
}

}  // namespace attnscope
