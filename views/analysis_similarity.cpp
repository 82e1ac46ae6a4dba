// Patch similarity (analysis/patch_similarity.h): the cosine similarity of the query's descriptor
// (a block's key, query, value or output token, --facet) with every patch of its image, as
// dino-vit-features' extract_descriptors and chunk_cosine_sim compute it; with --image2 the same
// query against a second image and the best buddies (mutual nearest neighbours) of the two.
// In the workbench each panel's model gives its own map; a click moves the query, and only the
// cosine similarity is redone (the descriptors are kept per forward pass, layer and facet).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/patch_similarity.h"
#include "core/value_overlay.h"
#include "figures/render.h"
#include "views/analysis_options.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

const AnalysisOption<Facet>& facet_option() {
  static const auto option = enum_option<Facet>(
      "facet",
      "similarity: the descriptor, a block's key, query or value (its qkv output on norm1, heads side by side) or its "
      "output token",
      Facet::Key);
  return option;
}

using nlohmann::json;

// One map of the view: a panel's model on its image, or panel 1's model on the second image.
struct SimilarityMap {
  std::string title;
  GridMap map;
  RgbImage background;  // the image as the model saw it
  int marked_row = -1, marked_col = -1;
  std::string error;  // why this panel has no map (the others still show)
};

struct SimilarityViewData : AnalysisViewData {
  std::vector<SimilarityMap> maps;  // panel 1, the second image (when given), the other panels
  int image2_map = -1;              // its index in `maps`, -1: none
  std::vector<BestBuddy> buddies;   // between panel 1's image and the second one
  TokenLayout grid, grid2;          // the grids the buddies' indices run over
  std::string heading, note;
  float vmin = -1.0f;
  double milliseconds = 0.0;
};

// The similarity of token `query`'s descriptor with every patch, on the descriptors' grid.
GridMap similarity_map(const TokenRows& descriptors, int query) {
  const torch::Tensor values = cosine_similarity_to(descriptors.rows[query], descriptors.patches());
  return to_grid_map(values.reshape({descriptors.layout.grid_h, descriptors.layout.grid_w}));
}

// A query's descriptor against another image's patches (the query row of `first`, patches of `second`).
GridMap cross_similarity_map(const TokenRows& first, int query, const TokenRows& second) {
  const torch::Tensor values = cosine_similarity_to(first.rows[query], second.patches());
  return to_grid_map(values.reshape({second.layout.grid_h, second.layout.grid_w}));
}

SimilarityMap shown_map(const std::string& title, GridMap map, const RgbImage& background, const TokenLayout& layout,
                        int query) {
  SimilarityMap shown;
  shown.title = title;
  shown.map = std::move(map);
  shown.background = background;
  if (layout.is_patch(query)) {
    shown.marked_row = layout.row_of(query);
    shown.marked_col = layout.col_of(query);
  }
  return shown;
}

std::string facet_heading(Facet facet, const std::string& point, const std::string& query_name) {
  return "cosine similarity to " + query_name + ", " + enum_name(facet) + " of " + point.substr(0, point.find(' '));
}

Figure similarity_figure(const InferenceOutcome& outcome, const AppState& state);

// The second image's descriptors by panel 1's model, and the image as it saw it.
struct SecondImage {
  RgbImage rgb;
  TokenRows descriptors;
};

// The view's smallest value (the colour scale's low end; 1, the query itself, is the high end).
void finish_scale(SimilarityViewData& view) {
  float low = 1.0f;
  for (const SimilarityMap& shown : view.maps)
    for (float value : shown.map.values) low = std::min(low, value);
  view.vmin = low < 1.0f ? low : 0.0f;
}

int analyze_similarity(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  Backbone& model = loaded.model.native("patch similarity");
  const Facet facet = facet_option()(state);
  const int layer = resolve_layer_index(state.layer, model.attention_layers());
  const auto start = std::chrono::steady_clock::now();
  const TokenRows descriptors =
      layer_descriptors(model, model_input(loaded.model, loaded.prepared), state.attention, layer, facet);
  const double first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const TokenLayout& layout = descriptors.layout;
  const ResolvedQuery query = resolve_query(state.query, layout);

  SimilarityViewData view;
  view.grid = layout;
  view.maps.push_back(
      shown_map("image", similarity_map(descriptors, query.token), loaded.prepared, layout, query.token));
  context.files->add_npy("similarity.npy",
                         torch::tensor(view.maps[0].map.values).reshape({layout.grid_h, layout.grid_w}));
  json summary = common_summary(context, "similarity", layout, loaded);
  summary["facet"] = enum_name(facet);
  summary["layer"] = {{"index", layer}, {"point", descriptors.point}};
  summary["descriptor_width"] = descriptors.rows.size(1);
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  if (!descriptors.note.empty()) summary["note"] = descriptors.note;
  std::string written = "summary.json, similarity.npy, similarity_overlay.png";

  const std::string image2 = image2_option()(state);
  if (!image2.empty()) {
    const RgbImage rgb2 = prepared_image(image2, state, loaded.model);
    // A large second image (--resize none) can take minutes: said before its forward starts.
    const std::string cost = second_image_cost_note(
        rgb2.cols, rgb2.rows, int64_t(loaded.prepared.rows) * loaded.prepared.cols, first_seconds);
    if (!cost.empty()) std::cerr << "attnscope analyze similarity: " << cost << "\n" << std::flush;
    const TokenRows descriptors2 =
        layer_descriptors(model, model_input(loaded.model, rgb2), state.attention, layer, facet);
    view.grid2 = descriptors2.layout;
    view.maps.push_back(shown_map("image 2", cross_similarity_map(descriptors, query.token, descriptors2), rgb2,
                                  descriptors2.layout, -1));
    view.image2_map = 1;
    view.buddies = best_buddies(descriptors.patches(), descriptors2.patches());
    context.files->add_npy("similarity_image2.npy",
                           torch::tensor(view.maps[1].map.values).reshape({view.grid2.grid_h, view.grid2.grid_w}));
    std::vector<std::vector<double>> rows;
    for (const BestBuddy& pair : view.buddies)
      rows.push_back({double(pair.first / layout.grid_w), double(pair.first % layout.grid_w),
                      double(pair.second / view.grid2.grid_w), double(pair.second % view.grid2.grid_w)});
    write_csv(context, "best_buddies.csv", "r1,c1,r2,c2", rows);
    summary["image2"] = {
        {"path", image2}, {"grid", {view.grid2.grid_h, view.grid2.grid_w}}, {"best_buddies", view.buddies.size()}};
    written +=
        std::string(", similarity_image2.npy, best_buddies.csv") + (figures_are_drawn() ? ", best_buddies.png" : "");
  }
  finish_scale(view);
  view.heading = facet_heading(facet, descriptors.point, layout.token_name(query.token));
  ValueScale scale;
  scale.colormap = state.colormap;
  scale.vmin = view.vmin;
  scale.vmax = 1.0;
  context.files->add_png("similarity_overlay.png",
                         overlay_values(loaded.prepared, view.maps[0].map.view(), scale, state.opacity, state.alpha));
  if (!image2.empty() && figures_are_drawn()) {
    InferenceOutcome outcome;
    outcome.analysis_view = std::make_shared<SimilarityViewData>(view);
    FigureStyle style;
    style.panel_width = 200;
    context.files->add_bytes("best_buddies.png",
                             render_figure(similarity_figure(outcome, state), style, FigureFormat::Png));
  } else if (!image2.empty()) {
    context.warnings.push_back(std::string("best_buddies.png not drawn: ") + kNoFigures +
                               "; the pairs are in best_buddies.csv");
  }
  write_summary(context, "analyze-similarity", summary);
  context.print() << "attnscope analyze similarity: " << enum_name(facet) << " of " << descriptors.point << ", query "
                  << layout.token_name(query.token);
  if (!image2.empty()) context.print() << ", " << view.buddies.size() << " best buddies with " << image2;
  context.print() << "\nwrote " << context.out.string() << "/{" << written << "}\n";
  return 0;
}

std::string panel_title(const PanelMaps& panel) {
  return std::filesystem::path(panel.model_path).stem().string() + " " + to_string(panel.settings.variant);
}

// The second image read, prepared and described by panel 1's model, kept while nothing it depends on changes.
std::shared_ptr<const SecondImage> second_image(const AnalysisViewInput& input, const PanelForwardView& panel,
                                                int layer, Facet facet, const std::string& path) {
  const std::string key = "image2|" + path + "|" + input.request.InputSelection::key() + "|" + panel.input_key + "|" +
                          settings_key(panel.settings) + "|" + std::to_string(layer) + "|" + enum_name(facet);
  if (auto kept = input.cache.get<SecondImage>(key)) return kept;
  auto second = std::make_shared<SecondImage>();
  second->rgb = prepared_image(path, input.request, *panel.model);
  second->descriptors = layer_descriptors(panel.model->native("patch similarity"),
                                          model_input(*panel.model, second->rgb), panel.settings, layer, facet);
  input.cache.put(key, second);
  return second;
}

void compute_similarity_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<SimilarityViewData>();
  const Facet facet = facet_option()(input.request);
  std::shared_ptr<const TokenRows> first;
  for (size_t index = 0; index < input.panels.size() && index < outcome.panels.size(); ++index) {
    const PanelMaps& maps = outcome.panels[index];
    SimilarityMap shown;
    shown.title = panel_title(maps);
    if (!input.panels[index].result) {
      shown.error = maps.error;
      view->maps.push_back(shown);
      continue;
    }
    try {
      const auto descriptors = panel_descriptors(input, input.panels[index], maps.layer, facet);
      shown = shown_map(shown.title, similarity_map(*descriptors, maps.query_token), maps.input_rgb,
                        descriptors->layout, maps.query_token);
      if (index == 0) {
        first = descriptors;
        view->heading = facet_heading(facet, descriptors->point, descriptors->layout.token_name(maps.query_token));
        view->note = descriptors->note;
      }
    } catch (const std::invalid_argument& e) {
      shown.error = e.what();  // this panel's model has no such facet: said in the view
    }
    view->maps.push_back(shown);
  }
  const std::string path = image2_option()(input.request);
  if (first && !path.empty()) {
    const PanelMaps& panel = outcome.panels.front();
    try {
      const auto second = second_image(input, input.panels.front(), panel.layer, facet, path);
      view->grid = first->layout;
      view->grid2 = second->descriptors.layout;
      const std::string buddies_key = "buddies|" + path + "|" + input.request.InputSelection::key() + "|" +
                                      input.panels.front().input_key + "|" + settings_key(panel.settings) + "|" +
                                      std::to_string(panel.layer) + "|" + enum_name(facet);
      auto buddies = input.cache.get<std::vector<BestBuddy>>(buddies_key);
      if (!buddies) {
        buddies = std::make_shared<const std::vector<BestBuddy>>(
            best_buddies(first->patches(), second->descriptors.patches()));
        input.cache.put(buddies_key, buddies);
      }
      view->buddies = *buddies;
      view->maps.insert(view->maps.begin() + 1,
                        shown_map(std::filesystem::path(path).filename().string(),
                                  cross_similarity_map(*first, panel.query_token, second->descriptors), second->rgb,
                                  second->descriptors.layout, -1));
      view->image2_map = 1;
    } catch (const std::exception& e) {
      view->note += (view->note.empty() ? "" : "; ") + std::string("image 2: ") + e.what();
    }
  }
  finish_scale(*view);
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outcome.analysis_view = view;
}

Figure similarity_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const SimilarityViewData*>(outcome.analysis_view.get());
  if (!view || view->maps.empty()) return Figure(1, 1);
  const int count = int(view->maps.size()), cols = count == 1 ? 1 : 2;
  Figure figure((count + cols - 1) / cols, cols);
  std::string errors;
  for (int index = 0; index < count; ++index) {
    const SimilarityMap& shown = view->maps[size_t(index)];
    if (!shown.error.empty()) {
      errors += kTitleBreak + shown.title + ": " + shown.error;
      continue;
    }
    HeatmapPanel heatmap;
    heatmap.values = shown.map;
    heatmap.background = shown.background;
    heatmap.opacity = float(state.opacity);
    heatmap.alpha = state.alpha;
    heatmap.marked_row = shown.marked_row;
    heatmap.marked_col = shown.marked_col;
    figure.panels[size_t(index)] = {shown.title, "similarity_" + std::to_string(index), heatmap};
  }
  if (view->image2_map >= 0 && std::holds_alternative<HeatmapPanel>(figure.panels[0].content))
    for (const BestBuddy& pair : view->buddies)
      figure.links.push_back({0, pair.first / view->grid.grid_w, pair.first % view->grid.grid_w, view->image2_map,
                              pair.second / view->grid2.grid_w, pair.second % view->grid2.grid_w});
  char timing[120];
  std::snprintf(timing, sizeof timing, "%s%.1f ms", kTitleBreak, view->milliseconds);
  figure.title =
      view->heading +
      (view->image2_map >= 0 ? kTitleBreak + std::to_string(view->buddies.size()) + " best buddies with image 2"
                             : std::string()) +
      (view->milliseconds > 0 ? timing : "") + (view->note.empty() ? "" : kTitleBreak + view->note) + errors;
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = view->vmin;
  scale.vmax = 1.0f;
  scale.label = "cosine similarity";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry similarity_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-similarity", "summary.json", 1},
       "analyze --analysis similarity --query 2,3 --image2 assets/images/sign_8.png --out OUT",
       R"md(`attnscope analyze --analysis similarity`: cosine similarity of a query patch's descriptor to every patch.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `facet` | always | `key`, `query`, `value` or `token` |
| `layer.index` | always | the block the descriptors come from |
| `layer.point` | always | its module name |
| `descriptor_width` | always | channels per descriptor |
| `query.token` | always | the query's token index |
| `query.name` | always | its name |
| `query.note` | when the query moved | why the query is not the one asked for |
| `note` | when the family reads a facet differently | how it was read |
| `image2.path` | with `--image2` | the second image |
| `image2.grid` | with `--image2` | its patch grid `[h, w]` |
| `image2.best_buddies` | with `--image2` | mutual nearest neighbours found |)md"});
  entry.name = "similarity";
  entry.label = "similarity";
  entry.help = "cosine similarity of the query patch's descriptor to every patch (--facet, --layer, --image2)";
  entry.options = {facet_option().spec(), image2_option().spec()};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_similarity(context); };
  entry.compute = compute_similarity_view;
  entry.figure = similarity_figure;
  return entry;
}

}  // namespace attnscope
