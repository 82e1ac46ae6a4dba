// Direct logit attribution (analysis/residual_stream.h, as TransformerLens and ViT-Prisma compute it
// with the LayerNorms folded): what every head and every layer writes straight into the read-out of
// one class. `analyze` writes the heads' grid and the components that sum to the logit; the
// workbench draws the grid (its own panel lets a click ablate a head: viewer/panels/dla_panel.cpp).
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/residual_stream.h"
#include "views/analysis_registry.h"
#include "views/dla_view.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

std::string target_name(const ReadoutTarget& target, const std::vector<std::string>& class_names) {
  if (target.kind == ReadoutTarget::Kind::Class && target.class_index < int(class_names.size()))
    return target.describe() + " (" + class_names[size_t(target.class_index)] + ")";
  return target.describe();
}

DlaReport dla_report(LoadedModel& loaded, const torch::Tensor& image, const AttentionSettings& settings,
                     const AttributionTarget& requested) {
  VisionTransformerImpl& model = residual_stream_model(loaded.native("direct logit attribution"));
  const TokenLayout layout = model.arch().layout_for(int(image.size(2)), int(image.size(3)));
  torch::NoGradGuard no_grad;
  const ResidualRun run = record_residual_stream(model, image, settings, readout_recording(model, layout));
  DlaReport report;
  report.target = readout_for(requested, loaded.output_kind() == OutputKind::Logits, run.output.logits[0].detach());
  report.target.check(run.output.logits.size(1));
  report.attribution = direct_logit_attribution(model, run, report.target);
  report.target_name = target_name(report.target, loaded.class_names);
  report.layers = model.arch().depth;
  report.heads = model.arch().heads;
  report.ablation = settings.ablation;
  return report;
}

std::string components_csv(const LogitAttribution& attribution) {
  std::ostringstream csv;
  csv << "component,value\n" << std::setprecision(17);
  for (size_t i = 0; i < attribution.labels.size(); ++i)
    csv << attribution.labels[i] << "," << attribution.values[i] << "\n";
  return csv.str();
}

json readout_json(const DlaReport& report) {
  json target = {{"kind", report.target.kind == ReadoutTarget::Kind::Class       ? "class"
                          : report.target.kind == ReadoutTarget::Kind::Direction ? "direction"
                                                                                 : "norm"},
                 {"description", report.target_name}};
  if (report.target.kind == ReadoutTarget::Kind::Class) target["index"] = report.target.class_index;
  return target;
}

int analyze_dla(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const torch::Tensor image = model_input(loaded.model, loaded.prepared);
  const DlaReport report = dla_report(loaded.model, image, state.attention, session_target(context, loaded));
  const LogitAttribution& dla = report.attribution;
  context.files->add_npy("dla_heads.npy", dla.heads);
  context.files->add_text("dla_components.csv", components_csv(dla));
  const TokenLayout layout = loaded.model.vit().arch().layout_for(loaded.prepared.rows, loaded.prepared.cols);
  json summary = common_summary(context, "dla", layout, loaded);
  summary["target"] = readout_json(report);
  summary["output"] = dla.output;
  double sum = 0;
  for (double value : dla.values) sum += value;
  summary["components_sum"] = sum;
  summary["residual"] = dla.residual;
  summary["layers"] = report.layers;
  summary["heads"] = report.heads;
  summary["ablated_heads"] = head_list_text(state.attention.ablation.heads);
  summary["conventions"] =
      "ViT-Prisma's folding defaults: each component centred and divided by the final LayerNorm's scale at the "
      "read-out token in the real forward, dotted with norm.weight * head.weight[C]; heads without value bias (it "
      "belongs to the layer's attn_out with the output projection's bias); head_bias = head.bias[C] + "
      "head.weight[C] . norm.bias";
  write_summary(context, "analyze-dla", summary);
  context.print() << "attnscope analyze dla: " << report.target_name << ", output " << dla.output
                  << ", components sum to it within " << std::abs(dla.residual) << "\nwrote " << context.out.string()
                  << "/{summary.json, dla_heads.npy, dla_components.csv}\n";
  return 0;
}

void compute_dla_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  compute_panel_run_view<DlaReport>(
      input, outcome,
      [&](const PanelForwardView& panel) {
        return "dla|" + panel.input_key + "|" + knobs_key(panel.settings) + "|" + to_string(input.request.target);
      },
      [&](const PanelForwardView& panel) {
        const AttributionTarget target = resolve_target_spec(
            input.request.target,
            {*panel.model, input.request.input_settings(), panel.settings, input.request.max_pixels});
        return dla_report(*panel.model, model_input(*panel.model, panel.result->input_rgb), panel.settings, target);
      });
}

Figure dla_figure(const InferenceOutcome& outcome, const AppState&) {
  const auto* view = dynamic_cast<const DlaView*>(outcome.analysis_view.get());
  Figure figure(1, 1);
  if (!view) return figure;
  if (!view->report) {
    figure.title = view->error;
    return figure;
  }
  const LogitAttribution& dla = view->report->attribution;
  const torch::Tensor values = dla.heads.to(torch::kFloat).contiguous();
  HeatmapPanel heatmap;
  heatmap.values = to_grid_map(values);
  heatmap.y_label = "layer";
  heatmap.x_label = "head";
  heatmap.colour_bar = true;
  figure.at(0, 0) = {"heads' direct contributions", "dla_heads", heatmap};
  std::ostringstream title;
  title << std::setprecision(4) << "direct logit attribution to " << view->report->target_name << ": output "
        << dla.output << ", components sum to it within " << std::abs(dla.residual);
  const HeadAblationSetting& ablation = view->report->ablation;
  if (!ablation.empty())
    title << kTitleBreak << "with heads " << head_list_text(ablation.heads) << " ablated (" << enum_name(ablation.kind)
          << ")";
  figure.title = title.str();
  // Symmetric about 0: red writes toward the target, blue against it.
  const float extreme = std::max(1e-12f, values.abs().max().item<float>());
  ColorScale scale;
  scale.colormap = Colormap::RdBu;
  scale.vmin = -extreme;
  scale.vmax = extreme;
  scale.label = "direct contribution";
  figure.scales.push_back(scale);
  return figure;
}

}  // namespace

AnalysisEntry dla_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back({{"analyze-dla", "summary.json", 1},
                           "analyze --analysis dla --out OUT",
                           R"md(`attnscope analyze --analysis dla`: direct logit attribution, `dla_heads.npy`
[layers, heads] and `dla_components.csv` (`embed`, `L_attn_out`, `L_mlp_out`, ..., `head_bias`), which sum to
the target's output.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `target.kind` | always | `class`, `direction` (`--target text:PROMPT` or `image:FILE`, read along its unit embedding) or `norm` (`--class -1` on a model without classes, `--target norm`) |
| `target.index` | for a class | `--class`, or the top-1 class for -1 |
| `target.description` | always | the target in words |
| `output` | always | the target read off the model's output |
| `components_sum` | always | the sum of `dla_components.csv` |
| `residual` | always | `output` minus that sum: float32 rounding of the forward |
| `layers` | always | blocks |
| `heads` | always | heads a block |
| `ablated_heads` | always | `--ablate` (none: `none`): the attribution is the ablated model's |
| `conventions` | always | how the components are read out |)md"});
  entry.name = "dla";
  entry.label = "DLA";
  entry.help = "direct logit attribution of every head and layer to --target (--class; ViT-shaped models)";
  entry.reads = {"class", "target"};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_dla(context); };
  entry.compute = compute_dla_view;
  entry.figure = dla_figure;
  return entry;
}

}  // namespace attnscope
