// Linear CKA between every block of two models over a folder (analysis/linear_cka.h): `analyze`
// writes cka.npy [LA, LB] (rows: --model's blocks, columns: --compare-model's), the workbench draws
// the heatmap between panel 1 and another panel's model.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/linear_cka.h"
#include "core/excerpt.h"
#include "views/analysis_options.h"
#include "views/folder_statistics.h"

namespace attnscope {

namespace {

using nlohmann::json;

const AnalysisOption<CkaEstimator>& cka_estimator_option() {
  static const auto option = enum_option<CkaEstimator>(
      "cka-estimator",
      "cka: the biased full-batch estimator (every image's block outputs in memory) or Nguyen et al.'s unbiased "
      "minibatch one",
      CkaEstimator::Full);
  return option;
}
const AnalysisOption<int>& cka_batch_option() {
  static const auto option =
      count_option("cka-batch", "N", "cka: images per minibatch of the unbiased estimator (at least 4)", 16, 4, 100000);
  return option;
}
const AnalysisOption<int>& cka_panel_option() {
  static const auto option = count_option(
      "cka-panel", "P", "cka: the workbench panel (2..4) whose model panel 1 is compared with", 2, 2, kMaxPanels);
  return option;
}
CkaEstimator cka_estimator_of(const AnalysisSettings& s) { return cka_estimator_option()(s); }
int cka_batch_of(const AnalysisSettings& s) { return cka_batch_option()(s); }
int cka_panel_of(const AnalysisSettings& s) { return cka_panel_option()(s); }

struct CkaViewData : FolderViewData {
  std::string label_a, label_b;
  int images_left_out = 0;
  CkaEstimator estimator = CkaEstimator::Full;
  int batch = 0;
  torch::Tensor cka;  // [LA, LB] float64
};

// The estimator's name as the outputs give it.
std::string estimator_text(CkaEstimator estimator, int batch) {
  return estimator == CkaEstimator::Full
             ? "biased full-batch linear CKA (Kornblith et al. 2019), centred Gram matrices"
             : "unbiased minibatch linear CKA (Nguyen et al. 2021), HSIC_1 summed over batches of " +
                   std::to_string(batch);
}

struct CkaModel {
  LoadedModel* model;
  AttentionSettings settings;
};

// CKA of every block of `a` against every block of `b` over the images.
std::shared_ptr<const CkaAccumulator> cka_pass(const CkaModel& a, const CkaModel& b, const InputSettings& input,
                                               int64_t max_pixels, const std::vector<std::string>& images,
                                               CkaEstimator estimator, int batch, const FolderProgress& progress,
                                               AnalysisCache* cache, const std::string& key) {
  Backbone& backbone_a = a.model->native("CKA (block outputs)");
  Backbone& backbone_b = b.model->native("CKA (block outputs)");
  return folder_pass(
      cache, key, images.size(), progress, CkaAccumulator(estimator, batch), [&](CkaAccumulator& cka, size_t i) {
        const std::vector<torch::Tensor> outputs_a =
            block_outputs(backbone_a, prepare_image_file(*a.model, input, images[i], max_pixels).input, a.settings);
        const std::vector<torch::Tensor> outputs_b =
            block_outputs(backbone_b, prepare_image_file(*b.model, input, images[i], max_pixels).input, b.settings);
        cka.add(outputs_a, outputs_b);
      });
}

int analyze_cka(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const AnalyzeFolder run = analyze_folder(context);
  if (run.models.size() < 2)
    throw std::invalid_argument(
        "cka compares two models: --model A and --compare-model B (the same file twice gives "
        "a diagonal of 1)");
  const std::vector<std::string>& images = run.images;
  const std::string& compare = run.models[1];
  LoadedModel model_a = load_analyze_model(context, state.model);
  LoadedModel model_b = load_analyze_model(context, compare);
  auto view = std::make_shared<CkaViewData>();
  view->folder = run.folder;
  view->estimator = cka_estimator_of(state);
  view->batch = cka_batch_of(state);
  view->label_a = model_label(state.model, state.attention);
  view->label_b = model_label(compare, AttentionSettings{});
  auto accumulated =
      cka_pass({&model_a, state.attention}, {&model_b, AttentionSettings{}}, state.input_settings(), state.max_pixels,
               images, view->estimator, view->batch, folder_progress(context, images), nullptr, "");
  CkaAccumulator result = *accumulated;
  view->cka = result.result();
  view->images = result.images();
  view->images_left_out = result.images_left_out();
  context.files->add_npy("cka.npy", view->cka);
  const RgbImage first_image =
      prepare_image_file(model_a, state.input_settings(), images.front(), state.max_pixels).rgb;
  const std::string figure =
      add_analyze_figure(context, analyze_figure(*find_analysis("cka"), view, first_image, state), first_image, "cka");
  json summary = {
      {"analysis", "cka"},
      {"estimator", to_string(view->estimator)},
      {"estimator_description", estimator_text(view->estimator, view->batch)},
      {"images", images.size()},
      {"folder", view->folder},
      {"rows",
       {{"model", state.model}, {"attention", to_string(state.attention.variant)}, {"blocks", view->cka.size(0)}}},
      {"columns", {{"model", compare}, {"attention", "native"}, {"blocks", view->cka.size(1)}}},
      {"examples",
       "one per image: the block's residual output, every token (class token included), "
       "flattened over tokens and channels"}};
  if (view->estimator == CkaEstimator::Minibatch) {
    summary["batch"] = view->batch;
    summary["images_left_out"] = view->images_left_out;
  }
  summary.update(folder_images_json(run));
  write_summary(context, "analyze-cka", summary);
  context.print() << "attnscope analyze cka: " << view->label_a << " (" << view->cka.size(0) << " blocks) against "
                  << view->label_b << " (" << view->cka.size(1) << " blocks) over " << images.size() << " images, "
                  << estimator_text(view->estimator, view->batch) << "\n";
  if (view->images_left_out > 0)
    context.print() << "  the last " << view->images_left_out
                    << " images made a batch of fewer than 4 and were left out\n";
  context.print() << "wrote " << context.out.string() << "/{cka.npy, " << figure << ", summary.json}\n";
  return 0;
}

void compute_cka_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<CkaViewData>();
  outcome.analysis_view = view;
  const InferenceRequest& request = input.request;
  const std::vector<std::string> images = open_view_folder(request, "compare the models on", *view);
  try {
    view->estimator = cka_estimator_of(request);
    view->batch = cka_batch_of(request);
    const int other = cka_panel_of(request);
    if (input.panels.size() < 2)
      throw std::invalid_argument("CKA compares panel 1 with another panel's model: add a panel");
    if (other < 2 || other > int(input.panels.size()))
      throw std::invalid_argument("cka-panel " + std::to_string(other) + ": there are panels 2.." +
                                  std::to_string(input.panels.size()));
    if (images.empty()) throw std::invalid_argument(view->error);
    const PanelForwardView &a = input.panels.front(), &b = input.panels[size_t(other - 1)];
    if (!a.model || !b.model)
      throw std::invalid_argument("panel " + std::to_string(a.model ? other : 1) + "'s model did not load");
    view->label_a = panel_label(0, a);
    view->label_b = panel_label(size_t(other - 1), b);
    const std::string settings = to_string(view->estimator) + " " + std::to_string(view->batch);
    const std::string key =
        folder_key("cka", request, a, images, settings) + "#" + folder_key("cka-b", request, b, {}, "");
    CkaAccumulator result =
        *cka_pass({a.model, a.settings}, {b.model, b.settings}, request.input_settings(), request.max_pixels, images,
                  view->estimator, view->batch, view_progress(input), &input.cache, key);
    view->cka = result.result();
    view->images = result.images();
    view->images_left_out = result.images_left_out();
  } catch (const std::invalid_argument& e) {
    view->error = e.what();
  }
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Figure cka_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const CkaViewData*>(outcome.analysis_view.get());
  Figure figure(1, 1);
  if (!view) return figure;
  if (!view->error.empty() || !view->cka.defined()) {
    figure.title = view->error;
    return figure;
  }
  const torch::Tensor values = view->cka.to(torch::kFloat).contiguous();
  HeatmapPanel heatmap;
  heatmap.values = to_grid_map(values);
  heatmap.y_label = "A: " + view->label_a + ", block";
  heatmap.x_label = "B: " + view->label_b + ", block";
  heatmap.colour_bar = true;
  figure.at(0, 0) = {"linear CKA", "cka", heatmap};
  std::ostringstream title;
  title << "linear CKA over " << images_heading(view->images, view->folder) << kTitleBreak
        << (view->estimator == CkaEstimator::Full ? "biased, full batch"
                                                  : "unbiased minibatch, batches of " + std::to_string(view->batch));
  if (view->images_left_out > 0) title << kTitleBreak << view->images_left_out << " images left out (a batch under 4)";
  figure.title = title.str();
  ColorScale scale;
  scale.colormap = state.colormap;
  // From the lowest tenth below the smallest value (or below 0, where the unbiased estimator goes)
  // up to 1: similar models' blocks differ in the second decimal.
  const float lowest = values.min().item<float>();
  scale.vmin = lowest < 0 ? lowest : std::floor(lowest * 10.0f) / 10.0f;
  scale.vmax = 1.0f;
  scale.label = "CKA";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry cka_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-cka", "summary.json", 1},
       "analyze --analysis cka --images DIR --compare-model assets/models/softmax.safetensors --out OUT",
       R"md(`attnscope analyze --analysis cka`: linear CKA between every block of `--model` (rows) and of
`--compare-model` (columns), `cka.npy`.

| key | when | meaning |
|---|---|---|
| `schema_kind` | always | `"analyze-cka"` |
| `schema` | always | 1 |
| `analysis` | always | `cka` |
| `estimator` | always | `full` or `minibatch` (`--cka-estimator`) |
| `estimator_description` | always | the estimator by name |
| `images` | always | images used |
| `folder` | always | `--images` |
| `images_used` | with `--images` | the folder's images the statistic read, by name |
| `images_skipped[].file` | with `--images` | an image that could not be read (the list may be empty): left out, said as a warning |
| `images_skipped[].why` | with `--images` | why |
| `rows.model` | always | `--model` |
| `rows.attention` | always | the attention it ran |
| `rows.blocks` | always | its blocks |
| `columns.model` | always | `--compare-model` |
| `columns.attention` | always | the attention it ran |
| `columns.blocks` | always | its blocks |
| `examples` | always | what one example is |
| `batch` | with the minibatch estimator | `--cka-batch` |
| `images_left_out` | with the minibatch estimator | images of a last batch of fewer than 4 |)md"});
  entry.name = "cka";
  entry.label = "CKA";
  entry.help =
      "linear CKA between every block of --model and --compare-model over a folder (--images DIR, "
      "--cka-estimator full|minibatch, --cka-batch N)";
  entry.options = {images_option(), cka_estimator_option().spec(), cka_batch_option().spec(),
                   cka_panel_option().spec()};
  entry.flags = {kCompareModelFlag};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_cka(context); };
  entry.compute = compute_cka_view;
  entry.figure = cka_figure;
  return entry;
}

}  // namespace attnscope
