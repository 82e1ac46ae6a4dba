// The attention matrix and its spectrum (analysis/spectrum.h): the selected head's equivalent
// T x T matrix, its singular values, numerical rank (numpy's tolerance) and effective rank, from
// the factors where the kernel is low-rank. `analyze` compares --variants; the workbench shows
// every panel's matrix of the selected head beside its spectrum.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/spectrum.h"
#include "core/output_files.h"
#include "core/value_overlay.h"
#include "figures/plots.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"
#include "views/plot_views.h"

namespace attnscope {

namespace {

using nlohmann::json;

json spectrum_json(const AttentionSpectrum& result) {
  return {{"rank", result.spectrum.numerical_rank}, {"effective_rank", result.spectrum.effective_rank},
          {"tolerance", result.spectrum.tolerance}, {"method", result.method},
          {"rank_bound", result.rank_bound},        {"dwc", result.dwc},
          {"milliseconds", result.milliseconds},    {"singular_values", result.spectrum.singular_values.numel()}};
}

int analyze_spectrum(const AnalyzeContext& context) {
  const AppState& state = context.state;
  if (state.ranks == RankMode::None)
    throw std::invalid_argument(
        "--ranks none: analyze --analysis spectrum is the spectrum; give auto or exact (every singular value) or "
        "leading (the 32 leading values with bounds, where the exact path is a full SVD of more than 400 tokens)");
  Loaded loaded = load_inputs(context);
  json variants = json::array();
  std::ostringstream csv;  // long format: one row per singular value
  csv << "variant,dwc,index,singular_value\n" << std::setprecision(9);
  TokenLayout layout;
  int layer = 0;
  context.print() << "attnscope analyze spectrum:\n";
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int selected) {
    layer = selected;
    layout = capture.layout;  // the layer's own query grid (hierarchical stages differ)
    check_head_index(state.head, capture.heads);
    const std::string name = to_string(variant);

    torch::NoGradGuard no_grad;
    const int64_t smallest = std::min(capture.layout.total_tokens(), capture.key_layout.total_tokens());
    {  // held only for its files: the spectra below form their own (never two T x T at once)
      // FLatten's equivalent matrix (with the DWC term when it ran): the one the spectrum is of.
      const torch::Tensor matrix = capture.equivalent_matrix(0, state.head).to(torch::kCPU, torch::kFloat).contiguous();
      // Keep files of a reasonable size: the matrix as NPY up to 2048 tokens, the picture always.
      if (matrix.size(0) <= 2048) context.files->add_npy(("matrix_" + name + ".npy"), matrix);
      ValueRange range;
      range.include(matrix.data_ptr<float>(), size_t(matrix.numel()));
      ScaleSpec spec = state.scale;
      if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;  // the PNG shows the NPY's weights
      context.files->add_png("matrix_" + name + ".png",
                             colour_values({matrix.data_ptr<float>(), int(matrix.size(0)), int(matrix.size(1))},
                                           resolve_value_scale(spec, state.colormap, range)));
    }

    json entry = {{"variant", name}, {"attention", capture.attention.describe()}, {"head_dim", capture.head_dim}};
    std::vector<bool> dwc_sides = {capture.attention.dwc};
    if (capture.attention.dwc) dwc_sides.push_back(false);
    for (const bool with_dwc : dwc_sides) {
      const std::string suffix = with_dwc ? "_dwc" : "";
      const std::string key = with_dwc ? "with_dwc" : (capture.attention.dwc ? "without_dwc" : "matrix");
      const std::string label = std::string(with_dwc ? "+DWC " : "     ");
      // What singular_values_*.npy and spectrum.csv hold: every value, or the leading lower bounds.
      torch::Tensor values;
      // Nothing O(T^3) unless asked: --ranks leading takes the leading values where the exact path
      // is a full SVD of more than 400 tokens.
      if (state.ranks == RankMode::Leading && !exact_spectrum_is_cheap(capture, state.head, with_dwc)) {
        const HeadSpectrum leading = head_spectrum(capture, state.head, RankMode::Leading, {}, with_dwc);
        values = torch::tensor(leading.singular_values, torch::kFloat);
        context.files->add_npy("singular_value_upper_bounds_" + name + suffix + ".npy",
                               torch::tensor(leading.upper_bounds, torch::kFloat));
        entry[key] = rank_ranges_json(leading);
        entry[key].update({{"method", leading.method},
                           {"tolerance", leading.tolerance},
                           {"dwc", with_dwc},
                           {"singular_values", leading.singular_values.size()}});
        context.print() << "  " << std::left << std::setw(9) << name << label << "rank " << leading.numerical_rank
                        << " to " << leading.rank_at_most << " of " << smallest << ", effective rank "
                        << leading.effective_rank << " to " << leading.effective_rank_high << ", " << leading.method
                        << "\n";
      } else {
        // A full SVD of thousands of tokens takes seconds to minutes: a bar follows it on a
        // terminal, a line a tenth of it in logs (as `run --ranks exact` prints a line a head).
        SvdProgress progress;
        if (!exact_spectrum_is_cheap(capture, state.head, with_dwc)) {
          const std::string step = "full SVD of " + name + label + "(" + std::to_string(smallest) + " tokens)";
          if (context.progress_on_terminal) {
            progress.report = [&, step](double fraction) {
              context.show_progress(size_t(100.0 * fraction), 100, step);
            };
          } else {
            context.show_progress(0, 10, step);
            progress.report = [&, step, tenths = 0](double fraction) mutable {
              const int done = int(10.0 * fraction);
              if (done <= tenths || done >= 10) return;
              tenths = done;
              context.show_progress(size_t(done), 10, step);
            };
          }
        }
        const AttentionSpectrum result = attention_spectrum(capture, state.head, with_dwc, 0, progress);
        values = result.spectrum.singular_values;
        entry[key] = spectrum_json(result);
        context.print() << "  " << std::left << std::setw(9) << name << label << "rank "
                        << result.spectrum.numerical_rank << " of " << smallest << " (bound " << result.rank_bound
                        << (capture.head_dim > 0 ? ", d = " + std::to_string(capture.head_dim) : std::string())
                        << "), effective rank " << result.spectrum.effective_rank << ", " << result.method << " "
                        << result.milliseconds << " ms\n";
      }
      context.files->add_npy("singular_values_" + name + suffix + ".npy", values);
      const auto values_at = values.accessor<float, 1>();
      for (int64_t i = 0; i < values.numel(); ++i)
        csv << name << "," << (with_dwc ? "on" : "off") << "," << i << "," << values_at[i] << "\n";
    }
    variants.push_back(entry);
  });
  context.files->add_text("spectrum.csv", csv.str());
  json summary = common_summary(context, "spectrum", layout, loaded);
  summary["layer"] = layer;
  summary["head"] = state.head;
  summary["tolerance_rule"] = "s_max * max(T, T) * eps(float32), as numpy.linalg.matrix_rank";
  summary["variants"] = variants;
  write_summary(context, "analyze-spectrum", summary);
  context.print() << "wrote " << context.out.string()
                  << "/{summary.json, spectrum.csv, singular_values_*.npy, matrix_*.png}\n";
  return 0;
}

// Every panel's matrix view of the selected head, from its own forward pass and layer; the
// overview and spectra are cached per forward and layer, so a click on another query re-uses them.
void compute_spectrum_views(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  c10::InferenceMode inference_mode;
  std::vector<PanelMatrix> views(input.panels.size());
  for (size_t index = 0; index < input.panels.size(); ++index) {
    const PanelForwardView& forward = input.panels[index];
    const PanelMaps& panel = outcome.panels[index];
    if (!forward.result) continue;
    const AttentionCapture& capture = forward.result->forward.layers[size_t(panel.layer)];
    const bool after_lcm = input.request.lcm == LcmView::After && capture.has_lcm();
    const MatrixViewCache cache{&input.cache, forward.input_key + "|" + settings_key(forward.settings) + "|layer " +
                                                  std::to_string(panel.layer)};
    // The spectra's progress over all panels, in thousandths (a full SVD a head takes seconds).
    std::function<void(double)> spectrum_progress;
    if (input.progress)
      spectrum_progress = [&, index](double share) {
        input.progress(int(1000.0 * (double(index) + share)), int(1000 * input.panels.size()));
      };
    views[index] = panel_matrix(forward.result, panel.layer, std::clamp(input.request.head, 0, capture.heads - 1),
                                after_lcm, input.request.ranks, cache, input.cancelled, spectrum_progress);
  }
  outcome.analysis_view = std::make_shared<const AnalysisResult<std::vector<PanelMatrix>>>(std::move(views));
}

// Each panel's matrix on its own scale (in the session's mode; the uniform mode shows weights
// here) beside the selected head's spectrum.
Figure spectrum_figure(const InferenceOutcome& outcome, const AppState& state) {
  Figure figure(int(std::max<size_t>(1, outcome.panels.size())), 2);
  const auto* views = analysis_result<std::vector<PanelMatrix>>(outcome);
  for (size_t index = 0; views && index < outcome.panels.size() && index < views->size(); ++index) {
    const PanelMaps& panel = outcome.panels[index];
    const PanelMatrix& view = (*views)[index];
    if (view.matrix.empty()) continue;
    HeatmapPanel heatmap;
    heatmap.values = {view.rows, view.cols, view.matrix};
    heatmap.scale = int(figure.scales.size());
    heatmap.colour_bar = true;
    heatmap.marked_row = panel.query_token / view.block;
    heatmap.x_label = "key token";
    heatmap.y_label = "query token";
    const std::string name = "panel" + std::to_string(index + 1);
    // Above kMatrixTexels tokens the figure shows the overview the screen shows, and says so.
    const std::string blocks =
        view.block > 1 ? ", " + std::to_string(view.block) + "x" + std::to_string(view.block) + " block means" : "";
    figure.at(int(index), 0) = {
        panel.description + ", layer " + std::to_string(panel.layer) + ", head " + std::to_string(view.head) + blocks,
        name + "_matrix", heatmap};
    ValueRange range;
    range.include(view.matrix.data(), view.matrix.size());
    ScaleSpec spec = state.scale;
    if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;
    figure.scales.push_back(figure_scale(resolve_value_scale(spec, state.colormap, range), "attention weight"));
    if (size_t(view.head) < view.spectra.size())
      figure.at(int(index), 1) = head_spectrum_panel(view.spectra[size_t(view.head)], name + "_spectrum");
  }
  if (figure.scales.empty()) figure.scales.push_back(ColorScale{});
  return figure;
}

}  // namespace

AnalysisEntry spectrum_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-spectrum", "summary.json", 2},
       "analyze --analysis spectrum --out OUT",
       R"md(`attnscope analyze --analysis spectrum`: one matrix per variant. `--ranks auto` and `exact` give every
singular value; `--ranks leading` the 32 leading ones with bounds where the exact path is a full SVD
of more than 400 tokens (`singular_values_*.npy` and `spectrum.csv` then hold the lower bounds,
`singular_value_upper_bounds_*.npy` the upper ones); `none` is refused.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer` | always | the layer |
| `head` | always | the head |
| `tolerance_rule` | always | how the numerical rank's tolerance is set |
| `variants[].variant` | always | the variant |
| `variants[].attention` | always | the attention it ran |
| `variants[].head_dim` | always | d of the head (the rank bound of a linear kernel) |
| `variants[].matrix` | when the layer has no DWC | block `spectrum` |
| `variants[].with_dwc` | when the layer has a DWC | block `spectrum`, of the matrix with the DWC term |
| `variants[].without_dwc` | when the layer has a DWC | block `spectrum`, of the matrix without it |)md"});
  entry.name = "spectrum";
  entry.label = "matrix";
  entry.help = "the attention matrix of --head, its singular values and ranks (--variants to compare)";
  entry.flags = {kVariantsFlag};
  entry.reads = {"ranks"};
  // Reported in thousandths of the panels' heads (views/outcome_views.cpp).
  entry.progress_text = [](int done, int total) {
    return "spectra " + std::to_string(total > 0 ? 100 * done / total : 0) + "% (a full SVD a head: cancel stops it)";
  };
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_spectrum(context); };
  entry.compute = compute_spectrum_views;
  entry.figure = spectrum_figure;
  return entry;
}

}  // namespace attnscope
