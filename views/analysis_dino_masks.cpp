// DINO's attention masks of one image (analysis/dino_masks.h): `analyze` writes dino_masks.npy,
// uint8 [heads, gh, gw], as visualize_attention.py computes th_attn (the class token's row of the
// layer, patch keys only, renormalised; sorted ascending; 1 where the cumulative sum passes
// 1 - mass); the workbench draws every head's mask over the image in its own colour. Their Jaccard
// index over a folder with ground-truth masks is `eval --methods dino-masks`.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <sstream>

#include "analysis/dino_masks.h"
#include "core/excerpt.h"
#include "models/inference.h"
#include "views/analysis_options.h"
#include "views/folder_statistics.h"

namespace attnscope {

namespace {

using nlohmann::json;

const AnalysisOption<double>& dino_mass_option() {
  static const AnalysisOption<double> option(
      "mass", "M", "dino-masks: the share of the class token's attention each head's mask holds", kDefaultDinoMass,
      [](const std::string& text) {
        const double mass = parse_double_option("mass", text);
        if (!(mass > 0.0 && mass <= 1.0)) throw std::invalid_argument("--mass must be in (0, 1]");
        return mass;
      },
      [](const double& mass) { return format_double(mass); });
  return option;
}

double dino_mass_of(const AnalysisSettings& settings) { return dino_mass_option()(settings); }

struct DinoMasksViewData : AnalysisViewData {
  DinoMasks masks;
  double mass = kDefaultDinoMass;
  std::string layer_name;
  std::string error;  // why there are no masks (no class token)
};

// The colour scale of the masks: head h is drawn with the value H + h + 1 over [0, 2H], so every
// head takes its own colour from the upper half of the map and the patches of no head stay clear.
float dino_head_value(int head, int heads) { return float(heads + head + 1); }

// Each patch in the colour of the head that gives it the largest share among the heads whose mask
// holds it; 0 where no mask does.
// A map of zeros over the masks' grid.
GridMap zero_map(const DinoMasks& masks) {
  GridMap map;
  map.grid_h = masks.grid_h;
  map.grid_w = masks.grid_w;
  map.values.assign(size_t(masks.grid_h) * size_t(masks.grid_w), 0.0f);
  return map;
}

GridMap dino_every_head_values(const DinoMasks& masks) {
  GridMap values = zero_map(masks);
  const torch::Tensor share = masks.attention.contiguous(), kept = masks.masks.contiguous();
  for (int r = 0; r < masks.grid_h; ++r)
    for (int c = 0; c < masks.grid_w; ++c) {
      double best = -1.0;
      for (int h = 0; h < masks.heads; ++h) {
        const double weight = share[h][r][c].item<double>();
        if (kept[h][r][c].item<uint8_t>() && weight > best) {
          best = weight;
          values.values[size_t(r) * size_t(masks.grid_w) + size_t(c)] = dino_head_value(h, masks.heads);
        }
      }
    }
  return values;
}

GridMap dino_one_head_values(const DinoMasks& masks, int head) {
  GridMap values = zero_map(masks);
  const torch::Tensor kept = masks.masks[head].contiguous();
  for (int r = 0; r < masks.grid_h; ++r)
    for (int c = 0; c < masks.grid_w; ++c)
      if (kept[r][c].item<uint8_t>())
        values.values[size_t(r) * size_t(masks.grid_w) + size_t(c)] = dino_head_value(head, masks.heads);
  return values;
}

Figure dino_masks_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const DinoMasksViewData*>(outcome.analysis_view.get());
  Figure empty(1, 1);
  if (!view) return empty;
  if (!view->error.empty()) {
    empty.title = view->error;
    return empty;
  }
  const DinoMasks& masks = view->masks;
  const int cols = std::min(4, masks.heads + 1);
  const int rows = (masks.heads + 1 + cols - 1) / cols;
  Figure figure(rows, cols);
  auto overlay = [&](GridMap values) {
    HeatmapPanel heatmap;
    heatmap.values = std::move(values);
    heatmap.background = outcome.input_rgb;
    heatmap.opacity = float(state.opacity);
    heatmap.alpha = OverlayAlpha::Value;
    return heatmap;
  };
  figure.panels[0] = {"every head", "dino_masks_every_head", overlay(dino_every_head_values(masks))};
  for (int h = 0; h < masks.heads; ++h)
    figure.panels[size_t(h + 1)] = {"head " + std::to_string(h), "dino_mask_head" + std::to_string(h),
                                    overlay(dino_one_head_values(masks, h))};
  char heading[200];
  std::snprintf(heading, sizeof heading, "DINO masks of %s: patches holding %.0f %% of the class token's attention",
                view->layer_name.c_str(), 100.0 * view->mass);
  figure.title = heading;
  ColorScale scale;
  scale.colormap = Colormap::Turbo;
  scale.vmin = 0.0f;
  scale.vmax = float(2 * masks.heads);
  scale.label = "head h at " + std::to_string(masks.heads) + " + h + 1";
  figure.scales.push_back(scale);
  return figure;
}

int analyze_dino_masks(const AnalyzeContext& context) {
  const AppState& state = context.state;
  if (!images_folder(state).empty())
    throw std::invalid_argument(
        "dino-masks takes one --image; over a folder with masks: attnscope eval --images DIR "
        "--masks DIR --methods dino-masks");
  Loaded loaded = load_inputs(context);
  const InferenceResult inference = run_inference(loaded.model, loaded.prepared, state.attention);
  const int layer = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
  const AttentionCapture& capture = inference.forward.layers[size_t(layer)];
  auto view = std::make_shared<DinoMasksViewData>();
  view->mass = dino_mass_of(state);
  view->masks = dino_masks(capture, 0, view->mass);
  view->layer_name = capture.placement.name;
  context.files->add_npy("dino_masks.npy", view->masks.masks);
  context.files->add_npy("dino_attention.npy", view->masks.attention.to(torch::kFloat));
  const RgbImage& image = loaded.prepared;
  const std::string figure = add_analyze_figure(
      context, analyze_figure(*find_analysis("dino-masks"), view, image, state), image, "dino_masks");
  json summary = common_summary(context, "dino-masks", capture.layout, loaded);
  summary["layer"] = {{"index", layer}, {"name", capture.placement.name}};
  summary["mass"] = view->mass;
  summary["masks"] = {{"file", "dino_masks.npy"},
                      {"shape", {view->masks.heads, view->masks.grid_h, view->masks.grid_w}},
                      {"rule",
                       "the class token's row over the patch keys (prefix tokens dropped), renormalised, "
                       "sorted ascending: 1 where the cumulative sum > 1 - mass"}};
  json patches = json::array();
  for (int h = 0; h < view->masks.heads; ++h) patches.push_back(view->masks.masks[h].sum().item<int64_t>());
  summary["patches_per_head"] = patches;
  if (loaded.object_mask.defined()) {
    summary["jaccard_per_head"] = mask_jaccard(view->masks, loaded.object_mask);
  }
  write_summary(context, "analyze-dino-masks", summary);
  context.print() << "attnscope analyze dino-masks: " << capture.placement.name << ", " << view->masks.heads
                  << " heads, mass " << view->mass << "\nwrote " << context.out.string()
                  << "/{dino_masks.npy, dino_attention.npy, " << figure << ", summary.json}\n";
  return 0;
}

void compute_dino_masks_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  auto view = std::make_shared<DinoMasksViewData>();
  outcome.analysis_view = view;
  const AttentionCapture& capture = input.panels.front().result->forward.layers[size_t(outcome.layer)];
  view->layer_name = capture.placement.name;
  try {
    view->mass = dino_mass_of(input.request);
    view->masks = dino_masks(capture, 0, view->mass);
  } catch (const std::invalid_argument& e) {
    view->error = e.what();
  }
}

}  // namespace

AnalysisEntry dino_masks_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-dino-masks", "summary.json", 1},
       "analyze --analysis dino-masks --out OUT",
       R"md(`attnscope analyze --analysis dino-masks`: DINO's masks of the class token's attention (`dino_masks.npy`).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer.index` | always | the layer |
| `layer.name` | always | its module |
| `mass` | always | `--mass` |
| `masks.file` | always | `dino_masks.npy` |
| `masks.shape` | always | `[heads, gh, gw]` |
| `masks.rule` | always | how a patch is kept |
| `patches_per_head` | always | patches in each head's mask |
| `jaccard_per_head` | with `--mask` | each head's Jaccard index against the object mask |)md"});
  entry.name = "dino-masks";
  entry.label = "DINO masks";
  entry.help =
      "DINO's attention masks of the class token per head (--layer, --mass); Jaccard: eval --methods dino-masks";
  entry.options = {dino_mass_option().spec(0.05, 1.0)};
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_dino_masks(context); };
  entry.compute = compute_dino_masks_view;
  entry.figure = dino_masks_figure;
  return entry;
}

}  // namespace attnscope
