// Feature PCA, the features view (analysis/feature_pca.h): one image's patch features projected on
// their first three principal axes and shown as RGB, as DINOv2's figure 1 and its issue #23 do it.
// The features are the model's final normed patch tokens (DINOv2's x_norm_patchtokens, timm's
// forward_features without its prefix tokens), or with --layer (the workbench: "layer") block L's
// output. `analyze` writes the scores, the display colours and the variance ratios; the workbench
// shows each panel's model over its image. On live video the basis of the first frame is frozen.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/feature_pca.h"
#include "core/excerpt.h"
#include "views/analysis_options.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

// Which features: the model's output tokens after its final norm, or a block's output.
struct FeatureSource {
  std::string point;  // a hook point spec
  std::string note;   // the output's point when the model has no final norm
};

FeatureSource feature_source(const Backbone& model, bool from_layer, int layer) {
  if (from_layer) return {block_point(layer), ""};
  try {
    return {model.resolve_hook_point("norm"), ""};
  } catch (const std::invalid_argument&) {
    // timm's forward_features with fc_norm: the norm comes after pooling, the tokens are the last block's.
    return {block_point(-1), "this model has no norm before its pooling: its output tokens are the last block's"};
  }
}

// Which features the PCA is of.
enum class PcaFeatures { Output, Layer };

}  // namespace

template <>
struct EnumTable<PcaFeatures> {
  static const std::vector<EnumEntry<PcaFeatures>>& entries() {
    static const std::vector<EnumEntry<PcaFeatures>> table = {{PcaFeatures::Output, "output"},
                                                              {PcaFeatures::Layer, "layer"}};
    return table;
  }
};

namespace {

const AnalysisOption<PcaFeatures>& pca_features_option() {
  static const auto option = enum_option<PcaFeatures>(
      "pca-features",
      "pca: the model's final normed patch tokens (output), or the layer's block output (layer; `analyze --layer L` "
      "picks it)",
      PcaFeatures::Output);
  return option;
}

// The foreground threshold (dinov2 issue #23's second pass): off, otsu or a number in [0, 1].
const AnalysisOption<PcaOptions>& pca_foreground_option() {
  static const AnalysisOption<PcaOptions> option(
      "pca-foreground", "T",
      "pca: a second PCA on the foreground, the patches whose min-max scaled first component exceeds T in [0, 1] "
      "(otsu: Otsu's threshold; off: none)",
      PcaOptions{}, [](const std::string& text) { return parse_pca_foreground(text, false); },
      [](const PcaOptions& options) {
        return !options.foreground ? std::string("off")
               : options.otsu      ? std::string("otsu")
                                   : format_double(options.threshold);
      });
  return option;
}

const AnalysisOption<bool>& pca_flip_option() {
  static const auto option = switch_option(
      "pca-flip", "pca: the foreground is the other side of the first component (its sign is arbitrary)", false);
  return option;
}

bool layer_option(const AnalysisSettings& settings) { return pca_features_option()(settings) == PcaFeatures::Layer; }

PcaOptions pca_options(const AnalysisSettings& settings) {
  PcaOptions options = pca_foreground_option()(settings);
  options.flip = pca_flip_option()(settings);
  return options;
}

// [gh, gw, 3] float32 from patch rows [N, 3].
torch::Tensor on_grid(const torch::Tensor& rows, const TokenLayout& layout) {
  return rows.to(torch::kFloat).reshape({layout.grid_h, layout.grid_w, 3}).contiguous();
}

// The colours over the image: each patch's RGB blended over its pixels with `opacity`.
RgbImage colours_over_image(const torch::Tensor& rgb, const TokenLayout& layout, const RgbImage& image,
                            double opacity) {
  const torch::Tensor bytes = (on_grid(rgb, layout) * 255.0).round().clamp(0, 255).to(torch::kUInt8).contiguous();
  RgbImage cells(layout.grid_h, layout.grid_w);
  std::copy(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + cells.bytes(), cells.data());
  return overlay_cells(image, cells, opacity);
}

void write_explained(const AnalyzeContext& context, const std::string& name, const torch::Tensor& explained) {
  std::vector<std::vector<double>> rows;
  for (int64_t i = 0; i < explained.size(0); ++i) rows.push_back({double(i + 1), explained[i].item<double>()});
  write_csv(context, name, "component,explained_variance_ratio", rows);
}

int analyze_pca(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  Backbone& model = loaded.model.native("feature PCA");
  // Naming --layer asks for that block's output; otherwise --pca-features says which features.
  const bool from_layer = context.line.given.count("layer") > 0 || layer_option(state);
  const int layer = from_layer ? resolve_layer_index(state.layer, model.attention_layers()) : -1;
  const FeatureSource source = feature_source(model, from_layer, layer);
  const PcaOptions options = pca_options(state);
  const TokenRows features =
      read_token_rows(model, model_input(loaded.model, loaded.prepared), state.attention, {source.point}).front();
  const TokenLayout& layout = features.layout;
  const FeaturePca pca = feature_pca(features.patches(), options);

  context.files->add_npy("pca_scores.npy", on_grid(pca.scores, layout));
  context.files->add_npy("pca.npy", on_grid(pca.rgb, layout));
  write_explained(context, "pca_explained.csv", pca.basis.explained);
  std::string written = "summary.json, pca_scores.npy, pca.npy, pca_explained.csv, pca_overlay.png";
  json summary = common_summary(context, "pca", layout, loaded);
  summary["features"] = {{"point", features.point},
                         {"source", from_layer ? "block output" : "final norm"},
                         {"width", features.rows.size(1)},
                         {"patches", layout.patch_tokens()},
                         {"prefix_tokens_dropped", layout.prefix_tokens()}};
  if (!source.note.empty()) summary["features"]["note"] = source.note;
  summary["explained_variance_ratio"] = std::vector<double>(
      pca.basis.explained.data_ptr<double>(), pca.basis.explained.data_ptr<double>() + pca.basis.explained.numel());
  summary["pca"] =
      "sklearn PCA(3).fit_transform of the patch features (centred, not whitened); pca.npy: each "
      "component min-max scaled to [0, 1] over the patches";
  torch::Tensor shown = pca.rgb;
  if (pca.foreground) {
    shown = pca.foreground_rgb;
    context.files->add_npy("pca_foreground.npy", on_grid(pca.foreground_rgb, layout));
    context.files->add_npy("pca_foreground_scores.npy", on_grid(pca.foreground_scores, layout));
    context.files->add_npy("pca_foreground_mask.npy",
                           pca.foreground_mask.to(torch::kUInt8).reshape({layout.grid_h, layout.grid_w}));
    write_explained(context, "pca_foreground_explained.csv", pca.foreground_basis.explained);
    summary["foreground"] = {{"threshold", pca.threshold},
                             {"chosen_by", options.otsu ? "otsu" : "given"},
                             {"flip", options.flip},
                             {"patches", pca.foreground_mask.sum().item<int64_t>()},
                             {"rule",
                              "first component min-max scaled to [0, 1] (negated with --pca-flip) above the "
                              "threshold; the background is 0 (dinov2 issue #23)"}};
    written += ", pca_foreground.npy, pca_foreground_scores.npy, pca_foreground_mask.npy, pca_foreground_explained.csv";
  }
  context.files->add_png("pca_overlay.png", colours_over_image(shown, layout, loaded.prepared, state.opacity));
  write_summary(context, "analyze-pca", summary);
  context.print() << "attnscope analyze pca: " << features.point << " (" << layout.patch_tokens() << " patches x "
                  << features.rows.size(1) << "), explained " << pca.basis.explained[0].item<double>() << ", "
                  << pca.basis.explained[1].item<double>() << ", " << pca.basis.explained[2].item<double>();
  if (pca.foreground) context.print() << "; foreground " << pca.foreground_mask.sum().item<int64_t>() << " patches";
  context.print() << "\nwrote " << context.out.string() << "/{" << written << "}\n";
  return 0;
}

// One panel's PCA as the view shows it.
struct PanelPca {
  std::string title, point, note, error;
  TokenLayout layout;
  RgbImage image;     // the image as the model saw it
  torch::Tensor rgb;  // [N, 3] float32 in [0, 1] (the foreground pass's when it is on)
  std::vector<double> explained;
  bool foreground = false, frozen = false;
  double threshold = 0.0;
  int64_t foreground_patches = 0;
};

struct PcaViewData : AnalysisViewData {
  std::vector<PanelPca> panels;
  double milliseconds = 0.0;
};

// Live frames keep the PCA of their first frame: its key leaves out the frame (its size stays in,
// so another camera or video of another size starts afresh).
std::string frozen_basis_key(const InferenceRequest& request, const PanelForwardView& panel, const std::string& point) {
  return "pca-basis|" + panel.model->path + "|" + request.image + "|" + to_string(request.input_settings()) + "|" +
         settings_key(panel.settings) + "|" + point + "|" + std::to_string(request.frame->cols) + "x" +
         std::to_string(request.frame->rows) + "|" + pca_foreground_option().text(request) + "|" +
         pca_flip_option().text(request);
}

PanelPca panel_pca(const AnalysisViewInput& input, const PanelForwardView& panel, const PanelMaps& maps) {
  PanelPca shown;
  shown.title = std::filesystem::path(maps.model_path).stem().string() + " " + to_string(maps.settings.variant);
  shown.image = maps.input_rgb;
  if (!panel.result) {
    shown.error = maps.error;
    return shown;
  }
  try {
    const Backbone& model = panel.model->native("feature PCA");
    const FeatureSource source = feature_source(model, layer_option(input.request), maps.layer);
    const auto features = panel_token_rows(input, panel, source.point);
    const PcaOptions options = pca_options(input.request);
    std::shared_ptr<const FeaturePca> frozen;
    std::string frozen_key;
    if (input.request.frame) {
      frozen_key = frozen_basis_key(input.request, panel, features->point);
      frozen = input.cache.get<FeaturePca>(frozen_key);
    }
    const FeaturePca pca = feature_pca(features->patches(), options, frozen.get());
    if (input.request.frame && !frozen) input.cache.put(frozen_key, std::make_shared<const FeaturePca>(pca));
    shown.point = features->point;
    shown.note = source.note;
    shown.layout = features->layout;
    shown.rgb = pca.foreground ? pca.foreground_rgb : pca.rgb;
    const torch::Tensor& explained = pca.foreground ? pca.foreground_basis.explained : pca.basis.explained;
    shown.explained.assign(explained.data_ptr<double>(), explained.data_ptr<double>() + explained.numel());
    shown.foreground = pca.foreground;
    shown.threshold = pca.threshold;
    shown.frozen = frozen != nullptr;
    if (pca.foreground) shown.foreground_patches = pca.foreground_mask.sum().item<int64_t>();
  } catch (const std::invalid_argument& e) {
    shown.error = e.what();
  }
  return shown;
}

void compute_pca_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<PcaViewData>();
  for (size_t index = 0; index < input.panels.size() && index < outcome.panels.size(); ++index)
    view->panels.push_back(panel_pca(input, input.panels[index], outcome.panels[index]));
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outcome.analysis_view = view;
}

// One panel: its colours over its image and each component's display channel, in a 2 x 2 grid;
// several panels: a row each.
Figure pca_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const PcaViewData*>(outcome.analysis_view.get());
  if (!view || view->panels.empty()) return Figure(1, 1);
  const bool one = view->panels.size() == 1;
  Figure figure(one ? 2 : int(view->panels.size()), one ? 2 : 4);
  const std::vector<std::string> names = {"PCA as RGB", "component 1", "component 2", "component 3"};
  if (!one) figure.col_labels = names;
  std::string notes;
  for (size_t row = 0; row < view->panels.size(); ++row) {
    const PanelPca& shown = view->panels[row];
    if (!one) figure.row_labels.push_back(shown.title);
    if (!shown.error.empty()) {
      notes += kTitleBreak + shown.title + ": " + shown.error;
      continue;
    }
    char line[200];
    std::snprintf(line, sizeof line, "%s%s: explained %.3f, %.3f, %.3f", kTitleBreak, shown.point.c_str(),
                  shown.explained[0], shown.explained[1], shown.explained[2]);
    notes += line;
    if (shown.foreground) {
      std::snprintf(line, sizeof line, "; foreground: %lld patches above %.3f", (long long)shown.foreground_patches,
                    shown.threshold);
      notes += line;
    }
    if (shown.frozen) notes += "; basis of the first frame";
    if (!shown.note.empty()) notes += " (" + shown.note + ")";
    const std::string suffix = one ? "" : "_" + std::to_string(row + 1);
    for (int cell = 0; cell < 4; ++cell) {
      HeatmapPanel heatmap;
      heatmap.values = patch_grid_values(shown.rgb, shown.layout, std::max(cell - 1, 0));
      if (cell == 0) {
        heatmap.background = colours_over_image(shown.rgb, shown.layout, shown.image, state.opacity);
        heatmap.opacity = 0.0f;  // the background is the picture: PCA colours blended over the image
      }
      const std::string data = cell == 0 ? "pca_rgb" : "pca_component" + std::to_string(cell);
      Panel& panel = one ? figure.at(cell / 2, cell % 2) : figure.at(int(row), cell);
      panel = {one ? names[size_t(cell)] : "", data + suffix, heatmap};
    }
  }
  char timing[60];
  std::snprintf(timing, sizeof timing, "; %.1f ms", view->milliseconds);
  figure.title = "patch features' first 3 principal components as RGB" + std::string(timing) + notes;
  ColorScale scale;
  scale.colormap = Colormap::Gray;
  scale.label = "component, min-max scaled";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry pca_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-pca", "summary.json", 1},
       "analyze --analysis pca --pca-foreground otsu --out OUT",
       R"md(`attnscope analyze --analysis pca`: the first three principal components of one image's patch features.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `features.point` | always | where the features were read (`norm`, `blocks.5`, `layers.3.blocks.1`) |
| `features.source` | always | `final norm` (the default) or `block output` (`--layer`) |
| `features.width` | always | channels per patch |
| `features.patches` | always | patches fitted |
| `features.prefix_tokens_dropped` | always | class, distillation and register tokens left out |
| `features.note` | when the model has no final norm | the output point read instead |
| `explained_variance_ratio` | always | each component's share of the variance |
| `pca` | always | how the scores and `pca.npy` are computed |
| `foreground.threshold` | with `--pca-foreground` | the threshold on the first component |
| `foreground.chosen_by` | with `--pca-foreground` | `otsu` or `given` |
| `foreground.flip` | with `--pca-foreground` | whether the first component was negated |
| `foreground.patches` | with `--pca-foreground` | patches kept as foreground |
| `foreground.rule` | with `--pca-foreground` | the foreground rule |)md"});
  entry.name = "pca";
  entry.label = "features";
  entry.help = "PCA of the patch features as RGB (--layer, --pca-foreground, --pca-flip)";
  entry.options = {pca_features_option().spec(), pca_foreground_option().spec(), switch_spec(pca_flip_option())};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_pca(context); };
  entry.compute = compute_pca_view;
  entry.figure = pca_figure;
  return entry;
}

}  // namespace attnscope
