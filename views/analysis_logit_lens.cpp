// The patch logit lens (analysis/residual_stream.h, as ViT-Prisma's get_patch_logit_directions):
// the residual at the input of every block and after the last, at every token, read out through
// the final LayerNorm's scale at that token and the folded head. `analyze` writes the whole stack;
// the workbench draws, after the selected block, the top class of every patch and the predicted
// class's lens logit over the image.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/residual_stream.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

struct LensReport {
  torch::Tensor lens;  // [layers + 1, tokens, K]
  TokenLayout layout;
  int predicted = 0;  // the model's top-1 output of the real forward
  std::vector<std::string> class_names;
};

LensReport lens_report(LoadedModel& loaded, const torch::Tensor& image, const AttentionSettings& settings) {
  VisionTransformerImpl& model = residual_stream_model(loaded.native("the logit lens"));
  LensReport report;
  report.layout = model.arch().layout_for(int(image.size(2)), int(image.size(3)));
  StreamRecording recording;
  recording.resid_pre = true;
  torch::NoGradGuard no_grad;
  const ResidualRun run = record_residual_stream(model, image, settings, recording);
  report.lens = patch_logit_lens(model, run);
  report.predicted = int(run.output.logits[0].argmax().item<int64_t>());
  report.class_names = loaded.class_names;
  return report;
}

int analyze_logit_lens(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const LensReport report =
      lens_report(loaded.model, model_input(loaded.model, loaded.prepared), context.state.attention);
  context.files->add_npy("logit_lens.npy", report.lens);
  json summary = common_summary(context, "logit-lens", report.layout, loaded);
  summary["shape"] = {report.lens.size(0), report.lens.size(1), report.lens.size(2)};
  summary["rows"] = "the input of each block 0..L-1, then the final residual (the last block's output)";
  summary["outputs"] = loaded.model.output_kind() == OutputKind::Logits ? "classes" : "output dimensions";
  summary["ablated_heads"] = head_list_text(context.state.attention.ablation.heads);
  summary["conventions"] =
      "each token centred and divided by its own final-LayerNorm scale in the real forward, times norm.weight, "
      "through head.weight (a distilled model: the mean of head and head_dist), no bias";
  write_summary(context, "analyze-logit-lens", summary);
  context.print() << "attnscope analyze logit-lens: " << report.lens.size(0) << " residuals x " << report.lens.size(1)
                  << " tokens x " << report.lens.size(2) << " outputs\nwrote " << context.out.string()
                  << "/{summary.json, logit_lens.npy}\n";
  return 0;
}

using LensView = PanelRunView<LensReport>;

void compute_lens_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  compute_panel_run_view<LensReport>(
      input, outcome,
      [](const PanelForwardView& panel) { return "lens|" + panel.input_key + "|" + knobs_key(panel.settings); },
      [](const PanelForwardView& panel) {
        return lens_report(*panel.model, model_input(*panel.model, panel.result->input_rgb), panel.settings);
      });
}

std::string class_label(const LensReport& report, int index) {
  return index < int(report.class_names.size()) ? report.class_names[size_t(index)] : std::to_string(index);
}

Figure lens_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const LensView*>(outcome.analysis_view.get());
  Figure figure(1, 2);
  if (!view) return figure;
  if (!view->report) {
    figure.title = view->error;
    return figure;
  }
  const LensReport& report = *view->report;
  const int blocks = int(report.lens.size(0)) - 1;
  // The layer slider's block, read after it: its output is the next block's input (the last: the
  // final residual).
  const int block = resolve_layer_index(state.layer, blocks);
  const TokenLayout& layout = report.layout;
  const torch::Tensor patches =
      report.lens[block + 1].narrow(0, layout.prefix_tokens(), layout.patch_tokens()).to(torch::kFloat);
  const torch::Tensor top = patches.argmax(1).to(torch::kFloat).reshape({layout.grid_h, layout.grid_w}).contiguous();
  const torch::Tensor predicted =
      patches.select(1, report.predicted).reshape({layout.grid_h, layout.grid_w}).contiguous();
  HeatmapPanel classes;
  classes.values = to_grid_map(top);
  classes.background = outcome.input_rgb;
  classes.opacity = float(state.opacity);
  classes.colour_bar = true;
  classes.scale = 0;
  HeatmapPanel logit;
  logit.values = to_grid_map(predicted);
  logit.background = outcome.input_rgb;
  logit.opacity = float(state.opacity);
  logit.colour_bar = true;
  logit.scale = 1;
  figure.at(0, 0) = {"top class per patch", "lens_top_class", classes};
  figure.at(0, 1) = {"lens logit of " + class_label(report, report.predicted), "lens_predicted", logit};
  // The most common top class over the patches, in words.
  const torch::Tensor counts = torch::bincount(top.reshape({-1}).to(torch::kLong), {}, report.lens.size(2));
  const int common = int(counts.argmax().item<int64_t>());
  std::ostringstream title;
  title << std::setprecision(3) << "patch logit lens after block " << block << " of " << blocks << kTitleBreak
        << "most patches read " << class_label(report, common) << " ("
        << 100.0 * counts[common].item<double>() / double(layout.patch_tokens()) << "%)" << kTitleBreak
        << "the model predicts " << class_label(report, report.predicted);
  figure.title = title.str();
  ColorScale class_scale;
  class_scale.colormap = Colormap::Turbo;
  class_scale.vmin = 0;
  class_scale.vmax = std::max(1.0f, float(report.lens.size(2) - 1));
  class_scale.label = "class index";
  figure.scales.push_back(class_scale);
  ColorScale logit_scale;
  logit_scale.colormap = state.colormap;
  logit_scale.vmin = predicted.min().item<float>();
  logit_scale.vmax = std::max(logit_scale.vmin + 1e-6f, predicted.max().item<float>());
  logit_scale.label = "lens logit";
  figure.scales.push_back(logit_scale);
  return figure;
}

}  // namespace

AnalysisEntry logit_lens_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-logit-lens", "summary.json", 1},
                           "analyze --analysis logit-lens --out OUT",
                           R"md(`attnscope analyze --analysis logit-lens`: the patch logit lens, `logit_lens.npy`
[layers + 1, tokens, classes] (every token in the model's order, prefix tokens first).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `shape` | always | the array's shape |
| `rows` | always | what its first axis holds |
| `outputs` | always | `classes`, or `output dimensions` on a model without classes |
| `ablated_heads` | always | `--ablate` (none: `none`) |
| `conventions` | always | how each token is read out |)md"});
  entry.name = "logit-lens";
  entry.label = "logit lens";
  entry.help = "the patch logit lens: every token's residual read out at every depth (ViT-shaped models)";
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_logit_lens(context); };
  entry.compute = compute_lens_view;
  entry.figure = lens_figure;
  return entry;
}

}  // namespace attnscope
