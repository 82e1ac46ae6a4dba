// The effective receptive field over a folder (analysis/effective_receptive_field.h): `analyze`
// writes erf.npy (the mean over images of the input-gradient map of block L's centre) and
// erf_ratios.csv (the area ratios of analyze_erf.py), the workbench draws log10(map + 1) of every
// panel's model side by side, each scaled to its maximum as analyze_erf.py does.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/effective_receptive_field.h"
#include "core/excerpt.h"
#include "views/folder_statistics.h"

namespace attnscope {

namespace {

using nlohmann::json;

struct ErfOfModel : PanelPass {
  std::string block;   // whose centre is differentiated
  torch::Tensor mean;  // [H, W] float64: the mean over images of ReLU(gradient) summed over colours
  std::vector<ErfArea> areas;
};

struct ErfViewData : FolderViewData {
  std::vector<ErfOfModel> models;  // one per panel (or --model and --compare-model)
};

// Sums of per-image maps, added out of place (a stopped pass's copy keeps its own).
struct ErfSum {
  torch::Tensor total;
  int images = 0;
};

// One model's mean map over the images at block `block` ("blocks.L").
torch::Tensor mean_input_gradient(LoadedModel& model, const AttentionSettings& settings, const InputSettings& input,
                                  int64_t max_pixels, const std::vector<std::string>& images, const std::string& block,
                                  const FolderProgress& progress, AnalysisCache* cache, const std::string& key) {
  Backbone& backbone = model.native("the ERF (gradients through the model)");
  const auto sum = folder_pass(cache, key, images.size(), progress, ErfSum{}, [&](ErfSum& acc, size_t i) {
    const PreparedImage image = prepare_image_file(model, input, images[i], max_pixels);
    const torch::Tensor map = input_gradient_map(backbone, image.input, settings, block);
    if (acc.total.defined() && !acc.total.sizes().equals(map.sizes()))
      throw std::invalid_argument(std::filesystem::path(images[i]).filename().string() +
                                  " is another size than the first image after preprocessing: the ERF averages "
                                  "maps of one size (use --size or --resize)");
    acc.total = acc.total.defined() ? acc.total + map : map;
    ++acc.images;
  });
  return sum->total / double(sum->images);
}

std::string ratios_csv(const std::vector<ErfArea>& areas) {
  std::ostringstream csv;
  csv << "threshold,area_ratio\n" << std::setprecision(10);
  for (const ErfArea& area : areas) {
    csv << area.threshold << ",";
    if (std::isnan(area.ratio))
      csv << "nan\n";
    else
      csv << area.ratio << "\n";
  }
  return csv.str();
}

// "20 %: 0.012, 30 %: 0.03, ..." and the thresholds no square reaches.
std::string areas_text(const std::vector<ErfArea>& areas, std::string* unreached = nullptr) {
  std::ostringstream text;
  text << std::setprecision(3);
  for (const ErfArea& area : areas) {
    text << (&area == &areas.front() ? "" : ", ") << 100 * area.threshold << " %: ";
    if (std::isnan(area.ratio)) {
      text << "nan";
      if (unreached) *unreached += (unreached->empty() ? "" : ", ") + std::to_string(int(100 * area.threshold)) + " %";
    } else {
      text << area.ratio;
    }
  }
  return text.str();
}

int analyze_erf(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const AnalyzeFolder run = analyze_folder(context);
  auto view = std::make_shared<ErfViewData>();
  view->folder = run.folder;
  view->images = int(run.images.size());
  json summary = {{"analysis", "erf"},
                  {"images", run.images.size()},
                  {"folder", run.folder},
                  {"map",
                   "mean over images of ReLU(d sum_c ReLU(F_c(gh // 2, gw // 2)) / d input) summed over the "
                   "colour channels, F the block's output, the input normalised (RepLKNet's get_input_grad)"},
                  {"ratios",
                   "analyze_erf.py's get_rectangle on log10(map + 1): the first centred square of side "
                   "2i + 1 holding more than the threshold; nan where none does"},
                  {"models", json::array()}};
  const RgbImage first_image = for_each_analyze_model(
      context, run, [&](size_t m, LoadedModel& model, const AttentionSettings& settings, const std::string& label) {
        // --layer on --model; the compare model takes its last where it has fewer blocks.
        const int depth = model.backbone->attention_layers();
        const int layer = m == 0 || state.layer < 0 ? resolve_layer_index(std::max(state.layer, -depth), depth)
                                                    : std::min(state.layer, depth - 1);
        if (m == 0) resolve_layer_index(state.layer, depth);  // --layer out of range is an error
        ErfOfModel erf;
        erf.label = label;
        erf.block = model.backbone->resolve_hook_point("blocks." + std::to_string(layer));
        erf.mean =
            mean_input_gradient(model, settings, state.input_settings(), state.max_pixels, run.images,
                                "blocks." + std::to_string(layer), folder_progress(context, run.images), nullptr, "");
        erf.areas = erf_area_ratios(erf.mean);
        context.files->add_npy(model_file("erf", m, ".npy"), erf.mean.to(torch::kFloat));
        context.files->add_text(model_file("erf_ratios", m, ".csv"), ratios_csv(erf.areas));
        std::string unreached;
        const std::string ratios = areas_text(erf.areas, &unreached);
        context.print() << "attnscope analyze erf: " << label << ", block " << layer << " (" << erf.block << "), "
                        << run.images.size() << " images; area ratios " << ratios << "\n";
        json entry = {{"model", run.models[m]},
                      {"label", label},
                      {"block", {{"index", layer}, {"name", erf.block}}},
                      {"sum", erf.mean.sum().item<double>()},
                      {"files", {model_file("erf", m, ".npy"), model_file("erf_ratios", m, ".csv")}}};
        if (!unreached.empty()) {
          const std::string note = "no centred square holds more than " + unreached +
                                   " of log10(map + 1): nan written (analyze_erf.py fails there)";
          context.print() << "  " << note << "\n";
          entry["note"] = note;
        }
        summary["models"].push_back(entry);
        view->models.push_back(std::move(erf));
      });
  const std::string figure =
      add_analyze_figure(context, analyze_figure(*find_analysis("erf"), view, first_image, state), first_image, "erf");
  summary.update(folder_images_json(run));
  write_summary(context, "analyze-erf", summary);
  context.print() << "wrote " << context.out.string() << "/{erf.npy, erf_ratios.csv"
                  << (run.models.size() > 1 ? ", erf_compare.npy, erf_ratios_compare.csv" : "") << ", " << figure
                  << ", summary.json}\n";
  return 0;
}

void compute_erf_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<ErfViewData>();
  outcome.analysis_view = view;
  const InferenceRequest& request = input.request;
  const std::vector<std::string> images = open_view_folder(request, "average the ERF over", *view);
  if (images.empty()) return;
  panel_passes(input, view->models,
               [&](ErfOfModel& erf, const PanelForwardView& panel, const FolderProgress& progress, size_t p) {
                 // Each panel's own layer: the selected one, or its model's last where it has fewer.
                 const std::string block = "blocks." + std::to_string(outcome.panels.at(p).layer);
                 erf.block = panel.model->backbone->resolve_hook_point(block);
                 erf.mean = mean_input_gradient(*panel.model, panel.settings, request.input_settings(),
                                                request.max_pixels, images, block, progress, &input.cache,
                                                folder_key("erf", request, panel, images, block));
                 erf.areas = erf_area_ratios(erf.mean);
               });
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Figure erf_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const ErfViewData*>(outcome.analysis_view.get());
  if (!view) return Figure(1, 1);
  if (!view->error.empty()) {
    Figure figure(1, 1);
    figure.title = view->error;
    return figure;
  }
  Figure figure(1, std::max<int>(1, int(view->models.size())));
  std::string notes;
  for (size_t m = 0; m < view->models.size(); ++m) {
    const ErfOfModel& erf = view->models[m];
    Panel& panel = figure.panels[m];
    panel.title = erf.label;
    if (!erf.error.empty() || !erf.mean.defined()) {
      notes += kTitleBreak + erf.label + ": " + erf.error;
      continue;
    }
    // analyze_erf.py's picture: log10(map + 1), scaled to its maximum for comparability.
    torch::Tensor shown = torch::log10(erf.mean + 1.0);
    const double peak = shown.max().item<double>();
    if (peak > 0) shown = shown / peak;
    shown = shown.to(torch::kFloat).contiguous();
    HeatmapPanel heatmap;
    heatmap.values = to_grid_map(shown);
    notes += kTitleBreak + erf.label + " at " + erf.block + ", area ratios " + areas_text(erf.areas);
    panel.data_name = "erf_" + std::to_string(m);
    panel.content = heatmap;
  }
  figure.title = "effective receptive field over " + images_heading(view->images, view->folder) + notes;
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.label = "log10(ERF + 1) / its max";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry erf_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-erf", "summary.json", 1},
       "analyze --analysis erf --images DIR --out OUT",
       R"md(`attnscope analyze --analysis erf`: the effective receptive field over `--images DIR` (`erf.npy`,
`erf_ratios.csv`; `erf_compare.npy`, `erf_ratios_compare.csv` with `--compare-model`).

| key | when | meaning |
|---|---|---|
| `schema_kind` | always | `"analyze-erf"` |
| `schema` | always | 1 |
| `analysis` | always | `erf` |
| `images` | always | images averaged over |
| `folder` | always | `--images` (or the one `--image`) |
| `images_used` | with `--images` | the folder's images the statistic read, by name |
| `images_skipped[].file` | with `--images` | an image that could not be read (the list may be empty): left out, said as a warning |
| `images_skipped[].why` | with `--images` | why |
| `map` | always | what the map is |
| `ratios` | always | how the area ratios are computed |
| `models[].model` | always | the checkpoint's path |
| `models[].label` | always | its name in the figure |
| `models[].block.index` | always | the block whose centre is followed |
| `models[].block.name` | always | its hook point |
| `models[].sum` | always | the map's sum |
| `models[].files` | always | its `.npy` and `.csv` files |
| `models[].note` | when a threshold is not reached | which, and that `nan` was written |)md"});
  entry.name = "erf";
  entry.label = "ERF";
  entry.help = "effective receptive field of block --layer's centre over a folder (--images DIR, --compare-model)";
  entry.options = {images_option()};
  entry.flags = {kCompareModelFlag};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_erf(context); };
  entry.compute = compute_erf_view;
  entry.figure = erf_figure;
  return entry;
}

}  // namespace attnscope
