// Mean attention distance and entropy per head over a folder of images (analysis/head_statistics.h):
// `analyze` writes head_stats.csv (one row per attention layer and head) and the scatter against
// depth of ViT's figure 7; the workbench runs the folder on its worker for every panel's model and
// draws the same scatter, with each head's mean map on hover (viewer/panels/head_stats_panel.cpp).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/excerpt.h"
#include "models/inference.h"
#include "views/analysis_options.h"
#include "views/folder_statistics.h"
#include "views/head_stats_view.h"

namespace attnscope {

const std::vector<EnumEntry<HeadOrder>>& EnumTable<HeadOrder>::entries() {
  static const std::vector<EnumEntry<HeadOrder>> table = {
      {HeadOrder::Index, "index"}, {HeadOrder::Distance, "distance"}, {HeadOrder::Entropy, "entropy"}};
  return table;
}

HeadOrder parse_head_order(const std::string& name) { return parse_enum<HeadOrder>("head-order", name); }

std::string to_string(HeadOrder order) { return enum_name(order); }

std::vector<HeadPoint> head_points(const HeadStatsModel& model, HeadOrder order) {
  std::vector<HeadPoint> points;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const std::vector<HeadStatistic>& heads = model.layers[l].heads;
    std::vector<int> ranked(heads.size());
    std::iota(ranked.begin(), ranked.end(), 0);
    auto statistic = [&](int head) {
      return order == HeadOrder::Distance ? heads[size_t(head)].mean_distance : heads[size_t(head)].entropy;
    };
    if (order != HeadOrder::Index)
      std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) { return statistic(a) < statistic(b); });
    std::vector<int> rank_of(heads.size());
    for (size_t r = 0; r < ranked.size(); ++r) rank_of[size_t(ranked[r])] = int(r);
    for (size_t h = 0; h < heads.size(); ++h) {
      HeadPoint point;
      point.layer = l;
      point.head = int(h);
      const double spread = heads.size() > 1 ? -0.3 + 0.6 * rank_of[h] / double(heads.size() - 1) : 0.0;
      point.x = model.layers[l].layer + spread;
      point.statistic = heads[h];
      points.push_back(point);
    }
  }
  return points;
}

namespace {

using nlohmann::json;

const AnalysisOption<HeadOrder>& head_order_option() {
  static const auto option = enum_option<HeadOrder>(
      "head-order",
      "headstats: how heads spread within their layer in the scatter (by index, or sorted by a statistic)",
      HeadOrder::Index);
  return option;
}

HeadOrder head_order_of(const AnalysisSettings& settings) { return head_order_option()(settings); }

// One model's statistics over the images: a pass with the given progress, kept in `cache` when given.
std::vector<LayerHeadStatistics> model_head_statistics(LoadedModel& model, const AttentionSettings& settings,
                                                       const InputSettings& input, int64_t max_pixels,
                                                       const std::vector<std::string>& images,
                                                       const FolderProgress& progress, AnalysisCache* cache,
                                                       const std::string& key) {
  ForwardOptions options;
  options.cancelled = progress.cancelled;
  const auto mean =
      folder_pass(cache, key, images.size(), progress, HeadStatisticsMean{}, [&](HeadStatisticsMean& sum, size_t i) {
        const PreparedImage image = prepare_image_file(model, input, images[i], max_pixels);
        const InferenceResult result = run_inference(model, image.rgb, settings, options);
        sum.add(head_statistics(result.forward.layers, 0));
      });
  return mean->mean();
}

std::string head_stats_csv(const std::vector<LayerHeadStatistics>& layers) {
  std::ostringstream csv;
  csv << "layer,head,mean_distance,entropy\n" << std::setprecision(10);
  for (const auto& layer : layers)
    for (size_t h = 0; h < layer.heads.size(); ++h)
      csv << layer.layer << "," << h << "," << layer.heads[h].mean_distance << "," << layer.heads[h].entropy << "\n";
  return csv.str();
}

int analyze_head_stats(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const AnalyzeFolder run = analyze_folder(context);
  auto view = std::make_shared<HeadStatsViewData>();
  view->folder = run.folder;
  view->images = int(run.images.size());
  view->order = head_order_of(state);
  json summary = {{"analysis", "headstats"},
                  {"images", run.images.size()},
                  {"folder", run.folder},
                  {"mean_distance",
                   "pixels: sum over patch keys of A times the distance between patch centres "
                   "(patch size x grid distance), mean over patch queries, then over images; prefix "
                   "tokens dropped from rows and columns, rows not renormalised"},
                  {"entropy",
                   "nats: -sum_k A ln A over every key, mean over every query (prefix tokens included), "
                   "then over images"},
                  {"models", json::array()}};
  const RgbImage first_image = for_each_analyze_model(
      context, run, [&](size_t m, LoadedModel& model, const AttentionSettings& settings, const std::string& label) {
        HeadStatsModel stats;
        stats.label = label;
        stats.layers = model_head_statistics(model, settings, state.input_settings(), state.max_pixels, run.images,
                                             folder_progress(context, run.images), nullptr, "");
        context.files->add_text(model_file("head_stats", m, ".csv"), head_stats_csv(stats.layers));
        json layers = json::array();
        context.print() << "attnscope analyze headstats: " << label << " over " << run.images.size()
                        << " images\n| layer | module | mean distance (px), mean of heads | entropy (nats) |\n"
                        << "|---|---|---|---|\n"
                        << std::fixed << std::setprecision(3);
        for (const auto& layer : stats.layers) {
          double distance = 0, entropy = 0;
          for (const auto& head : layer.heads) distance += head.mean_distance / double(layer.heads.size());
          for (const auto& head : layer.heads) entropy += head.entropy / double(layer.heads.size());
          context.print() << "| " << layer.layer << " | " << layer.name << " | " << distance << " | " << entropy
                          << " |\n";
          layers.push_back({{"layer", layer.layer},
                            {"name", layer.name},
                            {"heads", layer.heads.size()},
                            {"patch_size", layer.patch_size}});
        }
        context.print().unsetf(std::ios::floatfield);
        summary["models"].push_back({{"model", run.models[m]},
                                     {"label", label},
                                     {"attention", to_string(settings.variant)},
                                     {"family", model.family()},
                                     {"file", model_file("head_stats", m, ".csv")},
                                     {"layers", layers}});
        view->models.push_back(std::move(stats));
      });
  const std::string figure = add_analyze_figure(
      context, analyze_figure(*find_analysis("headstats"), view, first_image, state), first_image, "headstats");
  summary.update(folder_images_json(run));
  write_summary(context, "analyze-headstats", summary);
  context.print() << "wrote " << context.out.string() << "/{head_stats.csv"
                  << (run.models.size() > 1 ? ", head_stats_compare.csv" : "") << ", " << figure << ", summary.json}\n";
  return 0;
}

void compute_head_stats_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<HeadStatsViewData>();
  outcome.analysis_view = view;
  const InferenceRequest& request = input.request;
  view->order = head_order_of(request);
  const std::vector<std::string> images = open_view_folder(request, "run the statistics over", *view);
  if (images.empty()) return;
  panel_passes(input, view->models,
               [&](HeadStatsModel& stats, const PanelForwardView& panel, const FolderProgress& progress, size_t) {
                 stats.layers = model_head_statistics(*panel.model, panel.settings, request.input_settings(),
                                                      request.max_pixels, images, progress, &input.cache,
                                                      folder_key("headstats", request, panel, images, ""));
               });
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Figure head_stats_figure(const InferenceOutcome& outcome, const AppState&) {
  const auto* view = dynamic_cast<const HeadStatsViewData*>(outcome.analysis_view.get());
  Figure figure(1, 2);
  if (!view) return figure;
  if (!view->error.empty()) {
    figure.title = view->error;
    return figure;
  }
  PlotPanel distance, entropy;
  std::string notes;
  for (size_t m = 0; m < view->models.size(); ++m) {
    const HeadStatsModel& model = view->models[m];
    if (!model.error.empty()) notes += kTitleBreak + model.label + ": " + model.error;
    Series distances, entropies;
    distances.label = entropies.label = model.label;
    distances.markers = entropies.markers = true;
    distances.line = entropies.line = false;
    distances.colour = entropies.colour = int(m);
    for (const HeadPoint& point : head_points(model, view->order)) {
      distances.x.push_back(point.x);
      distances.y.push_back(point.statistic.mean_distance);
      entropies.x.push_back(point.x);
      entropies.y.push_back(point.statistic.entropy);
    }
    distance.series.push_back(distances);
    entropy.series.push_back(entropies);
  }
  const std::string x_label =
      view->order == HeadOrder::Index ? "layer" : "layer (heads by " + to_string(view->order) + ")";
  distance.x_label = entropy.x_label = x_label;
  distance.y_label = "mean attention distance (px)";
  entropy.y_label = "attention entropy (nats)";
  figure.at(0, 0) = {"mean attention distance per head", "mean_distance", distance};
  figure.at(0, 1) = {"entropy per head", "entropy", entropy};
  figure.title = "heads over " + images_heading(view->images, view->folder) + notes;
  return figure;
}

}  // namespace

AnalysisEntry headstats_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-headstats", "summary.json", 1},
       "analyze --analysis headstats --images DIR --out OUT",
       R"md(`attnscope analyze --analysis headstats`: mean attention distance and entropy per head over `--images DIR`
(the numbers are in `head_stats.csv`, and `head_stats_compare.csv` with `--compare-model`).

| key | when | meaning |
|---|---|---|
| `schema_kind` | always | `"analyze-headstats"` |
| `schema` | always | 1 |
| `analysis` | always | `headstats` |
| `images` | always | images averaged over |
| `folder` | always | `--images` (or the one `--image`) |
| `images_used` | with `--images` | the folder's images the statistic read, by name |
| `images_skipped[].file` | with `--images` | an image that could not be read (the list may be empty): left out, said as a warning |
| `images_skipped[].why` | with `--images` | why |
| `mean_distance` | always | how the mean distance is computed |
| `entropy` | always | how the entropy is computed |
| `models[].model` | always | the checkpoint's path (`--model`, then `--compare-model`) |
| `models[].label` | always | its name in the figure |
| `models[].attention` | always | the attention it ran |
| `models[].family` | always | its backbone family |
| `models[].file` | always | its CSV file |
| `models[].layers[].layer` | always | the attention layer's index (the CSV's `layer`) |
| `models[].layers[].name` | always | its module |
| `models[].layers[].heads` | always | its heads |
| `models[].layers[].patch_size` | always | pixels per step of its query grid |)md"});
  entry.name = "headstats";
  entry.label = "head stats";
  entry.help = "mean attention distance and entropy per head over a folder (--images DIR, --head-order)";
  entry.options = {images_option(), head_order_option().spec()};
  entry.flags = {kCompareModelFlag};
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_head_stats(context); };
  entry.compute = compute_head_stats_view;
  entry.figure = head_stats_figure;
  return entry;
}

}  // namespace attnscope
