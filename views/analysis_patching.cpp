// Activation patching (analysis/residual_stream.h, as TransformerLens's patching.py): from a clean
// image into a corrupt one (--image2), each head's z at every token and each block's input at one
// token, scored by how much of the logit difference logit[C] - logit[C2] it restores. Each patch
// resumes the forward at the block it changes; the workbench shows the worker's progress and can
// cancel it.
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/residual_stream.h"
#include "views/analysis_options.h"
#include "views/analysis_registry.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

// --class2: the baseline class of the logit difference.
const AnalysisOption<int>& class2_option() {
  static const auto option =
      count_option("class2", "C2",
                   "patching: the class the logit difference is measured against (-1: the corrupt image's top-1 "
                   "class)",
                   -1, -1, 1000000);
  return option;
}

struct PatchingReport {
  ActivationPatching patching;
  LogitDifference difference;
  TokenLayout layout;
  std::string clean_class, corrupt_class;
};

std::string class_text(const LoadedModel& model, const ReadoutTarget& target) {
  if (target.kind == ReadoutTarget::Kind::Class && target.class_index < int(model.class_names.size()))
    return target.describe() + " (" + model.class_names[size_t(target.class_index)] + ")";
  return target.describe();
}

PatchingReport patching_report(LoadedModel& loaded, const torch::Tensor& clean, const torch::Tensor& corrupt,
                               const AttentionSettings& settings, const AttributionTarget& requested,
                               int baseline_class, const ProgressReport& progress, const CancelCheck& cancelled) {
  VisionTransformerImpl& model = residual_stream_model(loaded.native("activation patching"));
  if (clean.sizes() != corrupt.sizes())
    throw std::invalid_argument("patching: the clean image is " + std::to_string(clean.size(3)) + "x" +
                                std::to_string(clean.size(2)) + " once prepared, --image2 " +
                                std::to_string(corrupt.size(3)) + "x" + std::to_string(corrupt.size(2)) +
                                ": patching swaps activations token by token, so both must have one size");
  const bool classes = loaded.output_kind() == OutputKind::Logits;
  const bool default_class = requested.kind == TargetKind::Class && requested.index < 0;
  if (!classes && (default_class || baseline_class < 0))
    throw std::invalid_argument(
        "patching on a model without classes needs --target (or --class) and --class2 (an output dimension)");
  PatchingReport report;
  report.layout = model.arch().layout_for(int(clean.size(2)), int(clean.size(3)));
  {
    // The default classes: each image's top-1 (one forward each, without captures).
    torch::NoGradGuard no_grad;
    ForwardOptions plain;
    plain.capture = false;
    const torch::Tensor clean_row = default_class ? model.forward(clean, settings, plain).logits[0] : torch::Tensor();
    const torch::Tensor corrupt_row =
        baseline_class < 0 ? model.forward(corrupt, settings, plain).logits[0] : torch::Tensor();
    report.difference.target = readout_for(requested, classes, clean_row);
    report.difference.baseline = readout_for(class_target(baseline_class), classes, corrupt_row);
  }
  report.clean_class = class_text(loaded, report.difference.target);
  report.corrupt_class = class_text(loaded, *report.difference.baseline);
  torch::NoGradGuard no_grad;
  report.patching = activation_patching(model, clean, corrupt, settings, report.difference, progress, cancelled);
  return report;
}

json patching_json(const PatchingReport& report) {
  const ActivationPatching& patching = report.patching;
  return {{"class", report.clean_class},
          {"class2", report.corrupt_class},
          {"metric", "(ld_patched - ld_corrupt) / (ld_clean - ld_corrupt), ld = logit[class] - logit[class2]"},
          {"ld_clean", patching.clean},
          {"ld_corrupt", patching.corrupt},
          {"forwards", patching.forwards},
          {"blocks_run", patching.blocks_run},
          {"blocks_of_full_forwards", patching.forwards * int64_t(patching.heads.size(0))}};
}

// What the run will cost, said on stderr before it starts (issue 60: at 448 px it planned 12,556
// partial forwards, half an hour, in silence): one full forward timed, and the blocks the patches
// run, each resuming at the block it changes.
void say_patching_plan(LoadedModel& loaded, const torch::Tensor& clean, const AttentionSettings& settings) {
  VisionTransformerImpl& model = residual_stream_model(loaded.native("activation patching"));
  const TokenLayout layout = model.arch().layout_for(int(clean.size(2)), int(clean.size(3)));
  const int64_t depth = model.arch().depth, per_block = model.arch().heads + layout.total_tokens();
  const int64_t forwards = depth * per_block, blocks = per_block * depth * (depth + 1) / 2;
  ForwardOptions plain;
  plain.capture = false;
  torch::NoGradGuard no_grad;
  // The first forward of a process pays its allocations and thread start-up: the second is timed.
  double forward_ms = 0;
  for (int run = 0; run < 2; ++run) {
    const auto start = std::chrono::steady_clock::now();
    model.forward(clean, settings, plain);
    forward_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  const double seconds = forward_ms / 1000.0 * double(blocks) / double(depth);
  std::ostringstream line;
  line << std::fixed << std::setprecision(0) << "attnscope analyze patching: " << forwards
       << " partial forwards (every head and every token of every block), " << blocks << " blocks in all, the work of "
       << double(blocks) / double(depth) << " forwards: about "
       << (seconds < 120 ? std::to_string(int(std::ceil(seconds))) + " s"
                         : std::to_string(int(std::ceil(seconds / 60))) + " min")
       << " at " << std::setprecision(1) << forward_ms << " ms a forward\n";
  std::cerr << line.str() << std::flush;
}

int analyze_patching(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const std::string image2 = image2_option()(state);
  if (image2.empty()) throw std::invalid_argument("patching needs --image2 FILE: the corrupt image");
  const RgbImage corrupt_rgb = prepared_image(image2, state, loaded.model);
  say_patching_plan(loaded.model, model_input(loaded.model, loaded.prepared), state.attention);
  const PatchingReport report = patching_report(
      loaded.model, model_input(loaded.model, loaded.prepared), model_input(loaded.model, corrupt_rgb), state.attention,
      session_target(context, loaded), class2_option()(state),
      [&](int64_t done, int64_t total) { context.show_progress(size_t(done), size_t(total), "patching"); }, {});
  context.files->add_npy("patching_heads.npy", report.patching.heads);
  context.files->add_npy("patching_resid.npy", report.patching.residual);
  json summary = common_summary(context, "patching", report.layout, loaded);
  summary["image2"] = image2;
  summary["patching"] = patching_json(report);
  summary["ablated_heads"] = head_list_text(state.attention.ablation.heads);
  write_summary(context, "analyze-patching", summary);
  context.print() << "attnscope analyze patching: " << report.clean_class << " against " << report.corrupt_class
                  << ", ld clean " << report.patching.clean << ", corrupt " << report.patching.corrupt << "; "
                  << report.patching.forwards << " partial forwards ran " << report.patching.blocks_run
                  << " blocks\nwrote " << context.out.string()
                  << "/{summary.json, patching_heads.npy, patching_resid.npy}\n";
  return 0;
}

using PatchingView = PanelRunView<PatchingReport>;

void compute_patching_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const std::string path = image2_option()(input.request);
  const int class2 = class2_option()(input.request);
  compute_panel_run_view<PatchingReport>(
      input, outcome,
      [&](const PanelForwardView& panel) {
        return "patching|" + path + "|" + input.request.InputSelection::key() + "|" + panel.input_key + "|" +
               knobs_key(panel.settings) + "|" + to_string(input.request.target) + "|" + std::to_string(class2);
      },
      [&](const PanelForwardView& panel) {
        if (path.empty())
          throw std::invalid_argument(
              "patching needs a second image, the corrupt input: set \"image2\" above (the similarity view's "
              "second image)");
        const RgbImage corrupt = prepared_image(path, input.request, *panel.model);
        return patching_report(
            *panel.model, model_input(*panel.model, panel.result->input_rgb), model_input(*panel.model, corrupt),
            panel.settings,
            resolve_target_spec(input.request.target, {*panel.model, input.request.input_settings(), panel.settings,
                                                       input.request.max_pixels}),
            class2,
            [&](int64_t done, int64_t total) {
              if (input.progress) input.progress(int(done), int(total));
            },
            input.cancelled);
      });
}

Figure patching_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const PatchingView*>(outcome.analysis_view.get());
  Figure figure(1, 2);
  if (!view) return figure;
  if (!view->report) {
    figure.title = view->error;
    return figure;
  }
  const PatchingReport& report = *view->report;
  const TokenLayout& layout = report.layout;
  HeatmapPanel heads;
  heads.values = to_grid_map(report.patching.heads);
  heads.x_label = "head";
  heads.y_label = "layer";
  // The block inputs of the layer slider's block, patch by patch over the clean image.
  const int block = resolve_layer_index(state.layer, int(report.patching.residual.size(0)));
  const torch::Tensor row = report.patching.residual[block];
  HeatmapPanel patches;
  patches.values =
      to_grid_map(row.narrow(0, layout.prefix_tokens(), layout.patch_tokens()).reshape({layout.grid_h, layout.grid_w}));
  patches.background = outcome.input_rgb;
  patches.opacity = float(state.opacity);
  figure.at(0, 0) = {"each head's z patched", "patching_heads", heads};
  figure.at(0, 1) = {"block " + std::to_string(block) + "'s input patched at one patch", "patching_resid_block",
                     patches};
  std::ostringstream title;
  title << std::setprecision(3) << "activation patching, clean into corrupt: " << report.clean_class << " against "
        << report.corrupt_class << kTitleBreak << "ld clean " << report.patching.clean << ", corrupt "
        << report.patching.corrupt << kTitleBreak << "1 restores the clean difference, 0 changes nothing";
  if (layout.prefix_tokens() > 0)
    title << kTitleBreak << "block " << block << " at the class token: " << row[0].item<double>();
  figure.title = title.str();
  const float extreme = std::max(1.0f, std::max(report.patching.heads.abs().max().item<float>(),
                                                report.patching.residual.abs().max().item<float>()));
  ColorScale scale;
  scale.colormap = Colormap::RdBu;
  scale.vmin = -extreme;
  scale.vmax = extreme;
  scale.label = "restored fraction";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry patching_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-patching", "summary.json", 1},
                           "analyze --analysis patching --image assets/images/sign_4.png --image2 "
                           "assets/images/sign_1.png --out OUT",
                           R"md(`attnscope analyze --analysis patching`: activation patching from `--image` (clean)
into `--image2` (corrupt), `patching_heads.npy` [layers, heads] and `patching_resid.npy` [layers, tokens].

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `image2` | always | the corrupt image |
| `patching.class` | always | `--class`, or the clean image's top-1 class |
| `patching.class2` | always | `--class2`, or the corrupt image's top-1 class |
| `patching.metric` | always | what each entry measures |
| `patching.ld_clean` | always | the logit difference of the clean run |
| `patching.ld_corrupt` | always | the same of the corrupt run |
| `patching.forwards` | always | partial forwards run |
| `patching.blocks_run` | always | blocks they ran in all |
| `patching.blocks_of_full_forwards` | always | blocks as many full forwards would run |
| `ablated_heads` | always | `--ablate` (none: `none`) |)md"});
  entry.name = "patching";
  entry.label = "patching";
  entry.help = "activation patching of every head and every block input from --image into --image2";
  entry.reads = {"class", "target", "image2"};
  entry.options = {class2_option().spec()};
  entry.needs_computed_attention = true;
  entry.progress_text = [](int done, int total) {
    return "patching: " + std::to_string(done) + "/" + std::to_string(total) + " partial forwards";
  };
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_patching(context); };
  entry.compute = compute_patching_view;
  entry.figure = patching_figure;
  return entry;
}

}  // namespace attnscope
