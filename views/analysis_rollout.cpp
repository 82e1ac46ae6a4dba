// Attention rollout (Abnar & Zuidema 2020; analysis/rollout.h): the query's attention carried
// through the layers that share the selected layer's grid, each fused over heads, with the identity
// added and rows renormalised. `analyze` writes the map; the workbench draws it over the image on
// its own min..max scale (its values are products through the layers, not one layer's weights).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/rollout.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

// The view's data: the rolled-out map of the query over its layer's grid.
struct RolloutViewData : AnalysisViewData {
  GridMap map;
  float vmin = 0, vmax = 0;
  std::string query_name;
  int layers = 0;     // how many layers were multiplied
  std::string note;   // which layers, when not every layer could take part
  std::string error;  // why there is no rollout for this layer (the map is then empty)
  HeadFusion fusion = HeadFusion::Mean;
  double discard = 0.0;
  double milliseconds = 0.0;
};

int analyze_rollout(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const InferenceResult inference = run_inference(loaded.model, loaded.prepared, state.attention);
  // The blocks that share the selected layer's token grid (a hierarchical stage; every block of a ViT).
  const int selected = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
  std::vector<AttentionCapture> chain;
  for (int index : rollout_layers(inference.forward.layers, selected))
    chain.push_back(inference.forward.layers[size_t(index)]);
  const TokenLayout& layout = chain.front().layout;
  const ResolvedQuery query = resolve_query(state.query, layout);
  RolloutOptions options;
  options.fusion = state.fusion;
  options.discard_ratio = state.discard;
  options.query = query.token;
  const RolloutResult result = attention_rollout(chain, options);
  context.files->add_npy("rollout.npy", result.patch_map);
  context.files->add_npy("rollout_normalised.npy", result.normalised);
  context.files->add_npy("rollout_row.npy", result.row);
  context.files->add_png("rollout_overlay.png", overlay_in_colours(context, inference.input_rgb, result.normalised,
                                                                   unit_scale(context, "max = 1")));
  json summary = common_summary(context, "rollout", layout, loaded);
  summary["fusion"] = to_string(state.fusion);
  summary["discard"] = state.discard;
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  summary["layers"] = inference.forward.layers.size();
  summary["attention"] = inference.forward.layers.back().attention.describe();
  write_summary(context, "analyze-rollout", summary);
  context.print() << "attnscope analyze rollout: " << inference.forward.layers.size() << " layers, fusion "
                  << to_string(state.fusion) << ", discard " << state.discard << ", query "
                  << layout.token_name(query.token) << "\nwrote " << context.out.string()
                  << "/{summary.json, rollout.npy, rollout_normalised.npy, rollout_row.npy, rollout_overlay.png}\n";
  return 0;
}

void compute_rollout_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<AttentionCapture>& layers = input.panels.front().result->forward.layers;
  auto view = std::make_shared<RolloutViewData>();
  view->fusion = input.request.fusion;
  view->discard = input.request.discard;
  try {
    const std::vector<int> indices = rollout_layers(layers, outcome.layer);
    std::vector<AttentionCapture> chosen;
    for (int index : indices) chosen.push_back(layers[size_t(index)]);
    RolloutOptions options;
    options.fusion = input.request.fusion;
    options.discard_ratio = input.request.discard;
    options.query = outcome.query_token;
    const RolloutResult result = attention_rollout(chosen, options);
    view->map = to_grid_map(result.patch_map);
    const auto [low, high] = std::minmax_element(view->map.values.begin(), view->map.values.end());
    view->vmin = *low;
    view->vmax = *high > *low ? *high : *low + 1e-6f;
    view->query_name = layers[size_t(outcome.layer)].layout.token_name(outcome.query_token);
    view->layers = int(indices.size());
    if (indices.size() < layers.size())
      view->note = "layers " + std::to_string(indices.front()) + ".." + std::to_string(indices.back()) + " (stage " +
                   std::to_string(layers[size_t(outcome.layer)].placement.stage) + "): other stages have other grids";
  } catch (const std::invalid_argument& e) {
    view->error = e.what();  // e.g. spatial reduction: shown in the view, the rest stands
  }
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outcome.analysis_view = view;
}

Figure rollout_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const RolloutViewData*>(outcome.analysis_view.get());
  Figure figure(1, 1);
  if (!view) return figure;
  if (!view->error.empty()) {
    figure.title = view->error;
    return figure;
  }
  char heading[200];
  std::snprintf(heading, sizeof heading, "query %s through %d layers, %s fusion, discard %.2f; %.1f ms",
                view->query_name.c_str(), view->layers, to_string(view->fusion).c_str(), view->discard,
                view->milliseconds);
  figure.title = heading + (view->note.empty() ? std::string() : "\n" + view->note);
  HeatmapPanel heatmap;
  heatmap.values = view->map;
  heatmap.background = outcome.input_rgb;
  heatmap.opacity = float(state.opacity);
  heatmap.alpha = state.alpha;
  heatmap.colour_bar = true;
  if (outcome.layout.is_patch(outcome.query_token)) {
    heatmap.marked_row = outcome.layout.row_of(outcome.query_token);
    heatmap.marked_col = outcome.layout.col_of(outcome.query_token);
  }
  figure.at(0, 0) = {outcome.panels.empty() ? "" : outcome.panels.front().description, "rollout", heatmap};
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = view->vmin;
  scale.vmax = view->vmax;
  scale.label = "rollout min..max";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry rollout_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-rollout", "summary.json", 1},
                           "analyze --analysis rollout --out OUT",
                           R"md(`attnscope analyze --analysis rollout`.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `fusion` | always | `--fusion` over heads (`mean`, `max`, `min`) |
| `discard` | always | `--discard`, the fraction of lowest weights dropped |
| `query.token` | always | the query's token index |
| `query.name` | always | its name |
| `query.note` | when the query moved | why the query is not the one asked for |
| `layers` | always | the layers rolled out |
| `attention` | always | the attention the last layer ran |)md"});
  entry.name = "rollout";
  entry.label = "rollout";
  entry.help = "attention rollout of the query through the layers of its grid (--fusion, --discard)";
  entry.reads = {"fusion", "discard"};
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_rollout(context); };
  entry.compute = compute_rollout_view;
  entry.figure = rollout_figure;
  return entry;
}

}  // namespace attnscope
