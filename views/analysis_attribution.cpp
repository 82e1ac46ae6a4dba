// `attnscope analyze` for the attribution methods: one map per run (the CAM family at a hook point,
// attention relevance, gradient rollout, integrated gradients) written as METHOD.npy at the map's
// grid with its image-size version and a summary; and `--analysis faithfulness`, which measures
// several methods' maps by deletion and insertion against a random order, as a table, CSV curves
// and the `faithfulness` figure.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/cam_methods.h"
#include "analysis/faithfulness_table.h"
#include "analysis/gradcam.h"
#include "analysis/integrated_gradients.h"
#include "analysis/relevance.h"
#include "figures/bundle.h"
#include "figures/faithfulness_figure.h"
#include "views/analysis_context.h"
#include "views/analysis_registry.h"
#include "views/attribution_view.h"
#include "views/option_catalog.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

// The class block of a class (or, without classes, norm) target; the target block says the rest.
void add_target(json& summary, const Loaded& loaded, const AttributionTarget& target) {
  summary["target"] = target_json(target, loaded.model);
  if (target.kind == TargetKind::Class || target.kind == TargetKind::Norm)
    summary["class"] = {{"index", target.index},
                        {"name", output_name(loaded.model, target.index)},
                        {"chosen", target.chosen},
                        {"requested", target.spec.kind == TargetKind::Class ? target.spec.class_index : -1}};
}

std::string target_words(const Loaded& loaded, const AttributionTarget& target) {
  return target.kind == TargetKind::Class ? output_name(loaded.model, target.index) : describe(target);
}

json shape_json(const torch::Tensor& t) { return json(std::vector<int64_t>(t.sizes().begin(), t.sizes().end())); }

void write_map_files(const AnalyzeContext& context, const Loaded& loaded, const std::string& method,
                     const torch::Tensor& map, const torch::Tensor& raw, const torch::Tensor& upsampled, json& files) {
  context.files->add_npy(method + ".npy", map.contiguous());
  context.files->add_npy(method + "_raw.npy", raw.contiguous());
  context.files->add_npy(method + "_upsampled.npy", upsampled.contiguous());
  // In the session's colour map, opacity and alpha mode, as Grad-CAM's overlay.
  context.files->add_png(
      method + "_overlay.png",
      overlay_in_colours(context, loaded.prepared, upsample_map(map, loaded.prepared.rows, loaded.prepared.cols),
                         unit_scale(context, "max = 1")));
  files[method + ".npy"] = shape_json(map);
  files[method + "_raw.npy"] = shape_json(raw);
  files[method + "_upsampled.npy"] = shape_json(upsampled);
  files[method + "_overlay.png"] = "the map over the model's input";
}

int analyze_attribution(const AnalyzeContext& context, AttributionMethod chosen) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const std::string method = to_string(chosen);  // the files' names
  Backbone& model = loaded.model.native(method_title(chosen));
  const torch::Tensor input = image_to_tensor(loaded.prepared, loaded.model.normalization).to(loaded.model.device);
  const int height = loaded.prepared.rows, width = loaded.prepared.cols;
  const AttributionTarget target = session_target(context, loaded);
  const auto progress = [&](int done, int total) {
    context.show_progress(size_t(done), size_t(total), method_title(chosen));
    return true;
  };
  json summary;
  std::string kind;  // of output schema: the keys differ between the three groups of methods
  json files = json::object();
  std::ostringstream line;
  if (reads_hook_point(chosen)) {
    CamOptions options;
    options.method = chosen;
    options.layer = state.gradcam_layer;
    options.target = target;
    options.progress = progress;
    const CamResult result = class_activation_map(model, input, state.attention, options);
    const torch::Tensor upsampled = cam_at_image_size(result.scaled, height, width);
    write_map_files(context, loaded, method, result.scaled, result.cam, upsampled, files);
    if (result.weights.defined()) {
      context.files->add_npy(method + "_weights.npy", result.weights.contiguous());
      files[method + "_weights.npy"] = shape_json(result.weights);
    }
    summary = common_summary(context, method, result.layout, loaded);
    kind = "analyze-cam";
    summary["layer"] = result.layer;
    add_target(summary, loaded, result.target);
    summary["score"] = result.score;
    summary["forward_passes"] = result.forward_passes;
    summary["milliseconds"] = result.milliseconds;
    summary["grid"] = {result.layout.grid_h, result.layout.grid_w};
    summary["normalisation"] = {
        {method + ".npy",
         "at the layer's grid: cam = the method's map (pytorch-grad-cam's get_cam_image on the patch tokens, prefix "
         "tokens dropped); ReLU; then (x - min) / (max + 1e-7), scale_cam_image"},
        {method + "_raw.npy", "cam before ReLU and scaling"},
        {method + "_upsampled.npy",
         "at the image size, what pytorch-grad-cam returns: the scaled map resized bilinearly (cv2.resize, "
         "half-pixel centres), then scaled once more"}};
    if (!result.warning.empty()) summary["warning"] = result.warning;
    line << result.layer << ", target " << target_words(loaded, result.target) << " (score " << result.score << "), "
         << result.forward_passes << " forward pass" << (result.forward_passes == 1 ? "" : "es") << ", "
         << result.milliseconds << " ms";
    if (!result.warning.empty()) context.warnings.push_back(result.warning);
  } else if (chosen == AttributionMethod::Relevance || chosen == AttributionMethod::GradRollout) {
    RelevanceOptions options;
    options.rule = chosen == AttributionMethod::Relevance ? RelevanceRule::Chefer : RelevanceRule::GradientRollout;
    options.target = target;
    options.layer = state.layer;
    options.discard_ratio = state.discard;
    const RelevanceResult result = attention_relevance(model, input, state.attention, options);
    write_map_files(context, loaded, method, result.normalised, result.patch_map,
                    upsample_map(result.normalised, height, width), files);
    context.files->add_npy(method + "_row.npy", result.row.contiguous());
    files[method + "_row.npy"] = shape_json(result.row);
    summary = common_summary(context, method, result.layout, loaded);
    kind = "analyze-relevance";
    summary["layers"] = result.layers;
    summary["readout"] = result.readout;
    add_target(summary, loaded, result.target);
    summary["score"] = result.score;
    summary["milliseconds"] = result.milliseconds;
    summary["grid"] = {result.layout.grid_h, result.layout.grid_w};
    const std::string normalised =
        chosen == AttributionMethod::Relevance ? "(x - min) / (max - min)" : "x / max (vit-explain's mask)";
    summary["normalisation"] = {
        {method + ".npy", "at the patch grid: the " + result.readout + " of the propagated matrix, " + normalised},
        {method + "_raw.npy", "the same before normalisation"},
        {method + "_row.npy", "the whole row, prefix tokens first"},
        {method + "_upsampled.npy", "the normalised map resized bilinearly to the image (half-pixel centres)"}};
    if (chosen == AttributionMethod::GradRollout) summary["discard"] = state.discard;
    line << result.layers.size() << " layers, " << result.readout << ", target " << target_words(loaded, result.target)
         << " (score " << result.score << "), " << result.milliseconds << " ms";
  } else if (chosen == AttributionMethod::IntegratedGradients) {
    IntegratedGradientsOptions options;
    options.steps = state.ig_steps;
    options.baseline = state.ig_baseline;
    options.target = target;
    options.progress = progress;
    const IntegratedGradientsResult result =
        integrated_gradients(model, input, state.attention, loaded.model.normalization, options);
    write_map_files(context, loaded, method, result.scaled, result.patch_map, result.pixel_map, files);
    context.files->add_npy("ig_attributions.npy", result.attributions.contiguous());
    files["ig_attributions.npy"] = shape_json(result.attributions);
    summary = common_summary(context, method, result.layout, loaded);
    kind = "analyze-ig";
    add_target(summary, loaded, result.target);
    summary["score"] = result.score;
    summary["baseline"] = {{"kind", to_string(state.ig_baseline)}, {"score", result.baseline_score}};
    summary["steps"] = result.steps;
    summary["rule"] = "riemann_trapezoid (Captum)";
    summary["completeness_gap"] = result.completeness_gap;
    summary["milliseconds"] = result.milliseconds;
    summary["grid"] = {result.layout.grid_h, result.layout.grid_w};
    summary["layer"] = "input (--gradcam-layer is not used)";
    summary["normalisation"] = {
        {"ig_attributions.npy", "(input - baseline) x the path-averaged gradient, per channel and pixel"},
        {"ig_upsampled.npy", "at the image size: sum over channels of |attribution|, not normalised"},
        {"ig_raw.npy", "at the patch grid: ig_upsampled summed over each patch"},
        {"ig.npy", "ig_raw scaled (x - min) / (max + 1e-7)"}};
    line << result.steps << " steps from the " << to_string(state.ig_baseline) << " baseline, target "
         << target_words(loaded, result.target) << " (score " << result.score << ", baseline " << result.baseline_score
         << ", completeness gap " << result.completeness_gap << "), " << result.milliseconds << " ms";
  } else {
    throw std::invalid_argument(method + " is not a method analyze writes as a map of its own");
  }
  summary["method"] = method_title(chosen);
  summary["size"] = {{"grid", summary["grid"]}, {"image", {height, width}}};
  summary["files"] = files;
  write_summary(context, kind, summary);
  context.print() << "attnscope analyze " << method << ": " << line.str() << "\nwrote " << context.out.string()
                  << "/{summary.json";
  for (const auto& [name, _] : files.items()) context.print() << ", " << name;
  context.print() << "}\n";
  return 0;
}

int analyze_faithfulness(const AnalyzeContext& context) {
  const AppState& state = context.state;
  FaithfulnessTableRequest request = faithfulness_request(state);  // option errors before the model loads
  Loaded loaded = load_inputs(context);
  request.faithfulness.target = session_target(context, loaded);
  const torch::Tensor input = image_to_tensor(loaded.prepared, loaded.model.normalization).to(loaded.model.device);
  request.progress = [&](const std::string& method, size_t done, size_t total) {
    context.show_progress(done, total + 1, method);
  };
  const FaithfulnessTable table = faithfulness_table(loaded.model.native("faithfulness"), input, state.attention,
                                                     loaded.model.normalization, request);
  context.show_progress(request.methods.size() + 1, request.methods.size() + 1, "done");

  std::ostringstream csv;
  // The curves follow a class's probability, or another target's score.
  const std::string recorded = table.target_class >= 0 ? "probability" : "score";
  csv << "method,curve,step,fraction," << recorded << "\n" << std::setprecision(9);
  const auto add_curves = [&](const std::string& name, const Faithfulness& curves) {
    for (const auto& [kind, curve] :
         {std::make_pair("deletion", &curves.deletion), std::make_pair("insertion", &curves.insertion)})
      for (size_t i = 0; i < curve->fraction.size(); ++i)
        csv << name << "," << kind << "," << i << "," << curve->fraction[i] << "," << curve->probability[i] << "\n";
  };
  json rows = json::array();
  context.print() << "attnscope analyze faithfulness: ";
  if (table.target_class >= 0)
    context.print() << "class " << table.target_class << " (" << output_name(loaded.model, table.target_class)
                    << ", p = " << std::fixed << std::setprecision(3) << table.probability << "), ";
  else
    context.print() << describe(table.target) << " (" << std::fixed << std::setprecision(3) << table.probability
                    << "), ";
  context.print() << to_string(request.faithfulness.replacement) << " replacement, "
                  << to_string(request.faithfulness.replacement) << " replacement, " << request.faithfulness.steps
                  << " steps\n\n| method | read at | deletion AUC | insertion AUC |\n|---|---|---|---|\n";
  for (const MethodFaithfulness& row : table.methods) {
    const std::string method = to_string(row.map.method);
    add_curves(method, row.curves);
    context.files->add_npy("map_" + method + ".npy", row.map.map.contiguous());
    rows.push_back({{"method", method},
                    {"where", row.map.where},
                    {"grid", {row.map.layout.grid_h, row.map.layout.grid_w}},
                    {"normalisation", row.map.normalisation},
                    {"deletion_auc", row.curves.deletion.auc},
                    {"insertion_auc", row.curves.insertion.auc},
                    {"milliseconds", row.map.milliseconds}});
    context.print() << "| " << method << " | " << row.map.where << " | " << row.curves.deletion.auc << " | "
                    << row.curves.insertion.auc << " |\n";
  }
  add_curves("random", table.random);
  context.print() << "| random (mean of " << request.faithfulness.random_orders << " orders) | | "
                  << table.random.deletion.auc << " | " << table.random.insertion.auc << " |\n";
  context.files->add_text("faithfulness_curves.csv", csv.str());

  // The figure, from the same table.
  FigureOutput output;
  output.layout = "faithfulness";
  output.overwrite = state.figure.overwrite;
  AppState session = state;
  session.figure.layout = "faithfulness";
  const Figure figure =
      faithfulness_figure(table, loaded.prepared, state.colormap, float(state.opacity),
                          std::filesystem::path(state.image.empty() ? "glyph" : state.image).filename().string());
  // Added to the other outputs: refused with them unless --overwrite, written together.
  const ExportedFigure exported = add_figure_bundle(*context.files, figure, output, to_json(session), loaded.prepared,
                                                    context.out.string(), "faithfulness");
  warn_if_undrawn(context, exported);

  json summary = common_summary(context, "faithfulness", table.methods.front().map.layout, loaded);
  summary["target"] = target_json(table.target, loaded.model);
  summary["target_value"] = table.probability;
  if (table.target_class >= 0)
    summary["class"] = {{"index", table.target_class},
                        {"name", output_name(loaded.model, table.target_class)},
                        {"probability", table.probability},
                        {"chosen", table.target.chosen}};
  summary["curves"] = {
      {"steps", request.faithfulness.steps},
      {"order", "the map's cells, largest first (equal values in row-major order)"},
      {"replacement", to_string(request.faithfulness.replacement)},
      {"replacement_meaning",
       request.faithfulness.replacement == Replacement::Blur
           ? "removed cells show the image blurred by a Gaussian of sigma = one patch (radius 3 sigma, reflect border)"
           : "removed cells show the " + to_string(request.faithfulness.replacement) + " image"},
      {"deletion", "cells replaced, largest first; the " +
                       std::string(table.target_class >= 0 ? "probability of the class" : "target's score") +
                       " after each step"},
      {"insertion", "cells of the image put back onto the replacement, largest first"},
      {"auc", "trapezoid rule over the fraction of cells"},
      {"random", {{"orders", request.faithfulness.random_orders}, {"seed", request.faithfulness.seed}}}};
  summary["methods"] = rows;
  summary["random"] = {{"deletion_auc", table.random.deletion.auc}, {"insertion_auc", table.random.insertion.auc}};
  summary["figure"] = exported.figure_path;
  write_summary(context, "analyze-faithfulness", summary);
  context.print() << "\nwrote " << context.out.string() << "/{summary.json, faithfulness_curves.csv, map_<method>.npy, "
                  << (exported.figure_path.empty() ? "" : "faithfulness.png, ") << "faithfulness_data/}\n";
  return 0;
}

// Every panel's map by the request's method, each with its own model, variant and forward pass;
// reused from the cache while only the selections change.
void compute_attribution_views(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  auto views = std::make_shared<AttributionViews>();
  views->method = input.request.method;
  for (size_t index = 0; index < input.panels.size(); ++index) {
    const PanelForwardView& forward = input.panels[index];
    PanelMaps& panel = outcome.panels[index];
    if (!forward.result) {
      AttributionView failed;
      failed.method = input.request.method;
      failed.error = panel.error;
      views->panels.push_back(std::move(failed));
      continue;
    }
    const std::string key = "attribution|" + forward.input_key + "|" + settings_key(forward.settings) + "|" +
                            attribution_key(input.request, panel.layer);
    auto view = input.cache.get<AttributionView>(key);
    if (!view) {
      view = std::make_shared<const AttributionView>(
          build_attribution_view(*forward.model, forward.result->input_rgb, forward.settings,
                                 forward.result->forward.layers, input.request, panel.layer, input.cancelled));
      input.cache.put(key, view);
    }
    views->panels.push_back(*view);
    panel.description = attribution_caption(*view) + "  \u00b7  " + panel.description;
  }
  for (const AttributionView& view : views->panels) views->maps.push_back(view.map);
  outcome.analysis_view = std::move(views);
}

// One column per panel: its map over the image it saw, on [0, 1].
Figure attribution_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* views = analysis_view_as<AttributionViews>(outcome);
  const std::vector<AttributionView> none;
  const std::vector<AttributionView>& shown = views ? views->panels : none;
  Figure figure(1, int(std::max<size_t>(1, shown.size())));
  for (size_t index = 0; index < shown.size() && index < outcome.panels.size(); ++index) {
    const AttributionView& view = shown[index];
    Panel& panel = figure.at(0, int(index));
    panel.title = view.error.empty() ? attribution_caption(view) : view.error;
    if (view.map.values.empty()) continue;
    HeatmapPanel heatmap;
    heatmap.values = view.map;
    heatmap.background = outcome.panels[index].input_rgb;
    heatmap.opacity = float(state.opacity);
    heatmap.alpha = state.alpha;
    panel.data_name = "attribution_panel" + std::to_string(index + 1);
    panel.content = heatmap;
  }
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.label = "attribution, max = 1";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry attribution_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-cam", "summary.json", 1},
                           "analyze --analysis gradcam++ --out OUT",
                           R"md(`attnscope analyze --analysis gradcam++|xgradcam|layercam|eigencam|hirescam|scorecam`.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| block `attribution` | always | |
| `layer` | always | the hooked module |
| `forward_passes` | always | forward passes the method needed (Score-CAM: one per channel batch) |
| `warning` | when the gradients vanish | the same warning printed on stderr |)md"});
  entry.outputs.push_back({{"analyze-relevance", "summary.json", 1},
                           "analyze --analysis gradrollout --out OUT",
                           R"md(`attnscope analyze --analysis relevance|gradrollout`.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| block `attribution` | always | |
| `layers` | always | the layers propagated through |
| `readout` | always | which row of the propagated matrix is the map |
| `discard` | `gradrollout` | `--discard` |)md"});
  entry.outputs.push_back({{"analyze-ig", "summary.json", 1},
                           "analyze --analysis ig --ig-steps 4 --out OUT",
                           R"md(`attnscope analyze --analysis ig`: integrated gradients.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| block `attribution` | always | |
| `baseline.kind` | always | `--ig-baseline` |
| `baseline.score` | always | the class's score on the baseline image |
| `steps` | always | `--ig-steps` |
| `rule` | always | the integration rule |
| `completeness_gap` | always | sum of attributions minus (score - baseline score) |
| `layer` | always | says that IG works on the input |)md"});
  entry.name = "attribution";
  entry.label = "attribution";
  entry.help =
      "every panel's map by --method (gradcam++, xgradcam, layercam, eigencam, hirescam, scorecam, "
      "relevance, gradrollout, ig: NAME.npy at the layer's grid)";
  entry.cli_names = {"gradcam++", "xgradcam",  "layercam",    "eigencam", "hirescam",
                     "scorecam",  "relevance", "gradrollout", "ig"};
  entry.listed_by_name = false;
  entry.reads = {"class",  "target", "gradcam-layer", "fusion",   "discard",
                 "method", "steps",  "replacement",   "ig-steps", "ig-baseline"};
  entry.run = [](const AnalyzeContext& context, const std::string& name) {
    // `analyze --analysis METHOD`, or a session saved by the workbench's attribution view: its
    // --method, run by the analysis that writes it (gradcam and rollout have their own).
    const AttributionMethod* named = find_enum<AttributionMethod>(name);
    const AttributionMethod method = named ? *named : context.state.method;
    const AnalysisEntry* runs = find_cli_analysis(to_string(method));
    if (!runs)
      throw std::invalid_argument("--method " + to_string(method) + " has no analyze run of its own (expected " +
                                  cli_analysis_names() + ")");
    const bool own =
        std::find(runs->cli_names.begin(), runs->cli_names.end(), to_string(method)) != runs->cli_names.end();
    return own ? analyze_attribution(context, method) : runs->run(context, to_string(method));
  };
  entry.compute = compute_attribution_views;
  entry.figure = attribution_figure;
  return entry;
}

AnalysisEntry faithfulness_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-faithfulness", "summary.json", 1},
       "analyze --analysis faithfulness --methods gradcam,rollout --steps 4 --out OUT",
       R"md(`attnscope analyze --analysis faithfulness`: deletion and insertion curves of each `--methods` map.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| block `target` | always | |
| `target_value` | always | the class's probability on the whole image (another target: its score) |
| `class.index` | a class target | the class whose probability the curves follow |
| `class.name` | a class target | its name |
| `class.probability` | a class target | its probability on the whole image |
| `class.chosen` | a class target | `given` or `top-1` |
| `curves.steps` | always | `--steps` |
| `curves.order` | always | the order cells are removed in |
| `curves.replacement` | always | `--replacement` |
| `curves.replacement_meaning` | always | what removed cells show |
| `curves.deletion` | always | what the deletion curve is |
| `curves.insertion` | always | what the insertion curve is |
| `curves.auc` | always | how the AUCs are integrated |
| `curves.random.orders` | always | random orders averaged for the baseline |
| `curves.random.seed` | always | their seed |
| `methods[].method` | always | the method |
| `methods[].where` | always | where its map was read |
| `methods[].grid` | always | its map's `[h, w]` |
| `methods[].normalisation` | always | how its map was scaled |
| `methods[].deletion_auc` | always | area under its deletion curve |
| `methods[].insertion_auc` | always | area under its insertion curve |
| `methods[].milliseconds` | always | time to compute its map |
| `random.deletion_auc` | always | the random orders' deletion AUC |
| `random.insertion_auc` | always | their insertion AUC |
| `figure` | always | the figure's path (empty where the build draws no figures: the engine-only build) |)md"});
  entry.name = "faithfulness";
  entry.help = "deletion and insertion curves of --methods against a random order (table, CSV, figure)";
  entry.reads = {"class",   "target", "gradcam-layer", "fusion",   "discard",
                 "methods", "steps",  "replacement",   "ig-steps", "ig-baseline"};
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_faithfulness(context); };
  return entry;
}

}  // namespace attnscope
