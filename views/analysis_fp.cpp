// FLatten's focusing function f_p (analysis/focusing.h, focus_projection.h): the paper's Fig. 4
// vectors and scores without a model; with one, the selected head's keys or queries before and
// after f_p, the query-key similarity histograms and entropy and top-k mass over p.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/focusing.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"
#include "views/option_catalog.h"
#include "views/panel_maps.h"
#include "views/plot_views.h"

namespace attnscope {

namespace {

using nlohmann::json;

// Fig. 4: toy vectors and the score example need no model; with --model the layer study runs too.
int analyze_fp(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const double p = state.attention.p;
  json summary = {{"analysis", "fp"},
                  {"p", p},
                  {"variant", to_string(state.attention.variant)},
                  {"query", {{"spec", state.query.text()}}},
                  {"state", to_json(state)}};
  // The model first: a file f_p cannot study fails before anything is written.
  std::optional<Loaded> model_inputs;
  if (!state.model.empty()) {
    model_inputs.emplace(load_inputs(context));
    model_inputs->model.native("f_p on a model's layer");
  }
  for (const auto& [name, vectors] : {std::make_pair(std::string("2d"), quarter_circle_vectors(9)),
                                      std::make_pair(std::string("3d"), octant_vectors(40))}) {
    const auto focused = focus_rows(vectors, p);
    const auto cos_before = nearest_axis_cosine(vectors), cos_after = nearest_axis_cosine(focused);
    std::vector<std::vector<double>> rows;
    const int64_t dim = vectors.size(1);
    for (int64_t i = 0; i < vectors.size(0); ++i) {
      std::vector<double> row;
      for (int64_t c = 0; c < dim; ++c) row.push_back(vectors[i][c].item<double>());
      for (int64_t c = 0; c < dim; ++c) row.push_back(focused[i][c].item<double>());
      row.push_back(cos_before[i].item<double>());
      row.push_back(cos_after[i].item<double>());
      rows.push_back(row);
    }
    const std::string header =
        dim == 2 ? "x,y,fx,fy,axis_cos_before,axis_cos_after" : "x,y,z,fx,fy,fz,axis_cos_before,axis_cos_after";
    write_csv(context, ("fp_vectors_" + name + ".csv"), header, rows);
    summary["vectors_" + name] = {{"count", vectors.size(0)},
                                  {"mean_axis_cos_before", cos_before.mean().item<double>()},
                                  {"mean_axis_cos_after", cos_after.mean().item<double>()}};
  }
  const ScoreExample example = example_focus_scores(p);
  std::vector<std::vector<double>> score_rows;
  for (int64_t j = 0; j < example.keys.size(0); ++j)
    score_rows.push_back({double(j), example.before[j].item<double>(), example.after[j].item<double>()});
  write_csv(context, "fp_scores.csv", "key,before,after", score_rows);
  auto as_vector = [](const torch::Tensor& t) {
    auto values = t.to(torch::kDouble).contiguous();
    return std::vector<double>(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  };
  summary["score_example"] = {{"before", as_vector(example.before)}, {"after", as_vector(example.after)}};
  context.print() << "attnscope analyze fp: p = " << p << ", example scores " << json(as_vector(example.before)).dump()
                  << " -> " << json(as_vector(example.after)).dump() << "\n";

  std::string written = "fp_vectors_2d.csv, fp_vectors_3d.csv, fp_scores.csv";
  if (model_inputs) {
    Loaded& loaded = *model_inputs;
    const InferenceResult inference = run_inference(loaded.model, loaded.prepared, state.attention);
    const int layer = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
    check_head_index(state.head, inference.forward.layers[size_t(layer)].heads);
    FocusStudyOptions options;
    options.p = p;
    options.top_k = context.line.flag_int("top-k");
    options.histogram_bins = context.line.flag_int("bins");
    const FocusStudy study = study_focusing(inference.forward.layers[size_t(layer)], state.head, options);
    std::vector<std::vector<double>> curve, histogram, axes;
    for (size_t i = 0; i < study.curve_ps.size(); ++i)
      curve.push_back({study.curve_ps[i], study.entropy[i], study.top_k_mass[i]});
    for (int b = 0; b < options.histogram_bins; ++b)
      histogram.push_back({double(b) / options.histogram_bins, double(b + 1) / options.histogram_bins,
                           double(study.histogram_before[b].item<int64_t>()),
                           double(study.histogram_after[b].item<int64_t>())});
    for (int64_t c = 0; c < study.axis_counts.size(0); ++c)
      axes.push_back({double(c), double(study.axis_counts[c].item<int64_t>()),
                      study.axis_cosine_before[c].item<double>(), study.axis_cosine_after[c].item<double>()});
    write_csv(context, "fp_curves.csv", "p,entropy,top_k_mass", curve);
    write_csv(context, "fp_histogram.csv", "cos_low,cos_high,before,after", histogram);
    write_csv(context, "fp_axes.csv", "axis,count,axis_cos_before,axis_cos_after", axes);
    summary["layer"] = layer;
    summary["head"] = state.head;
    summary["preprocessing"] = preprocessing_json(loaded.model, state.input_settings(), loaded.prepared);
    summary["features"] = study.source;
    summary["attention"] = inference.forward.layers[size_t(layer)].attention.describe();
    summary["top_k"] = options.top_k;
    summary["curves"] = {{"p", study.curve_ps}, {"entropy", study.entropy}, {"top_k_mass", study.top_k_mass}};
    written += ", fp_curves.csv, fp_histogram.csv, fp_axes.csv";
    context.print() << "  layer " << layer << " head " << state.head << ": mean row entropy " << study.entropy.front()
                    << " (p = " << study.curve_ps.front() << ") -> " << study.entropy.back()
                    << " (p = " << study.curve_ps.back() << ")\n";
  }
  write_summary(context, "analyze-fp", summary);
  context.print() << "wrote " << context.out.string() << "/{summary.json, " << written << "}\n";
  return 0;
}

FocusView build_focus_view(const AttentionCapture& capture, int head, double p, bool queries,
                           FocusProjectionKind projection) {
  FocusStudyOptions options;
  options.p = p;
  const FocusStudy study = study_focusing(capture, head, options);
  FocusView view;
  view.head = head;
  view.p = p;
  view.source = study.source;
  view.histogram_before = float_values(study.histogram_before);
  view.histogram_after = float_values(study.histogram_after);
  view.curve_ps.assign(study.curve_ps.begin(), study.curve_ps.end());
  view.entropy.assign(study.entropy.begin(), study.entropy.end());
  view.top_k_mass.assign(study.top_k_mass.begin(), study.top_k_mass.end());
  const ScoreExample example = example_focus_scores(p);
  view.example_before = float_values(example.before);
  view.example_after = float_values(example.after);
  view.projection = project_focusing(capture, head, p, queries, projection);
  return view;
}

void compute_focus_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  check_head_index(input.request.head, outcome.heads);
  const AttentionCapture& selected = input.panels.front().result->forward.layers[size_t(outcome.layer)];
  outcome.analysis_view = std::make_shared<const AnalysisResult<FocusView>>(
      build_focus_view(selected, input.request.head, input.panels.front().settings.p,
                       input.request.fp_vectors == FocusVectors::Queries, input.request.fp_projection));
}

Figure focus_figure(const InferenceOutcome& outcome, const AppState&) {
  const FocusView* view = analysis_result<FocusView>(outcome);
  return view ? focus_view_figure(*view) : Figure(1, 1);
}

}  // namespace

AnalysisEntry fp_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-fp", "summary.json", 1},
       "analyze --analysis fp --out OUT",
       R"md(`attnscope analyze --analysis fp`: FLatten's f_p on toy vectors, and with `--model` on a layer's
features.

| key | when | meaning |
|---|---|---|
| `schema_kind` | always | `"analyze-fp"` |
| `schema` | always | 1 |
| `analysis` | always | `fp` |
| `p` | always | the focusing factor |
| `variant` | always | `--variant` |
| `query.spec` | always | `--query` |
| `state.*` | always | every option, as a `--session` file holds them |
| `vectors_2d.count` | always | toy vectors on the quarter circle |
| `vectors_2d.mean_axis_cos_before` | always | mean cosine to the nearest axis before f_p |
| `vectors_2d.mean_axis_cos_after` | always | the same after |
| `vectors_3d.count` | always | toy vectors in the octant |
| `vectors_3d.mean_axis_cos_before` | always | mean cosine to the nearest axis before f_p |
| `vectors_3d.mean_axis_cos_after` | always | the same after |
| `score_example.before` | always | the example's attention scores before f_p |
| `score_example.after` | always | the same after |
| `layer` | with `--model` | the layer studied |
| `head` | with `--model` | the head |
| `preprocessing` | with `--model` | block `preprocessing` |
| `features` | with `--model` | which features f_p was applied to |
| `attention` | with `--model` | the attention the layer ran |
| `top_k` | with `--model` | `--top-k` |
| `curves.p` | with `--model` | the p of each curve point |
| `curves.entropy` | with `--model` | mean row entropy at each p |
| `curves.top_k_mass` | with `--model` | mean top-k mass at each p |)md"});
  entry.name = "fp";
  entry.label = "f_p";
  entry.help = "FLatten's f_p: Fig. 4 vectors and scores; with --model the head's features over p";
  entry.reads = {"fp-vectors", "fp-projection"};
  entry.flags = {kTopKFlag, {"bins", "N", "fp: histogram bins over cosine similarity [0, 1]", "50"}};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_fp(context); };
  entry.compute = compute_focus_view;
  entry.figure = focus_figure;
  return entry;
}

}  // namespace attnscope
