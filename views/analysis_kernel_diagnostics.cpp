// The kernel comparison (analysis/kernel_diagnostics.h): per head, every panel's (the workbench) or
// every --variants kernel's (`analyze`) entropy, maximum, local mass, injectivity, divergence from
// softmax, dropped negative products and effective rank, as the papers after FLatten argue by.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "analysis/kernel_diagnostics.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"
#include "views/folder_statistics.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

// Every panel's (or variant's) diagnostics at its selected layer, or why it has none.
struct KernelComparison {
  std::vector<std::string> labels;
  std::vector<std::optional<KernelDiagnostics>> rows;
  std::vector<std::string> errors;
};

// One measure of the comparison: its name in the figure, the CSV and summary.json, and its value
// of a head where it has one.
struct Measure {
  std::string title, key;
  std::optional<double> (*value)(const HeadKernelDiagnostics&);
};

const std::vector<Measure>& measures() {
  static const std::vector<Measure> table = {
      {"row entropy (nats)", "entropy", [](const HeadKernelDiagnostics& h) { return std::optional(h.entropy); }},
      {"row maximum", "row_max", [](const HeadKernelDiagnostics& h) { return std::optional(h.row_max); }},
      {"local mass", "local_mass", [](const HeadKernelDiagnostics& h) { return h.local_mass; }},
      {"shift under query scale", "scale_shift", [](const HeadKernelDiagnostics& h) { return h.scale_shift; }},
      {"KL to softmax (nats)", "kl_to_softmax",
       [](const HeadKernelDiagnostics& h) { return std::optional(h.kl_to_softmax); }},
      {"JS to softmax (nats)", "js_to_softmax",
       [](const HeadKernelDiagnostics& h) { return std::optional(h.js_to_softmax); }},
      {"negative q.k share lost", "lost_negative_share",
       [](const HeadKernelDiagnostics& h) { return h.lost_negative_share; }},
      {"effective rank", "effective_rank",
       [](const HeadKernelDiagnostics& h) { return std::optional(h.spectrum.effective_rank); }},
  };
  return table;
}

json optional_json(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

KernelDiagnosticsSettings settings_of(const CommandLine& line) {
  KernelDiagnosticsSettings settings;
  settings.local_window = line.flag_int("local-window");
  settings.query_scale = line.flag_double("query-scale");
  settings.max_queries = line.flag_int("max-queries");
  if (settings.max_queries < 2) throw std::invalid_argument("--max-queries must be >= 2");
  return settings;
}

Figure comparison_figure(const KernelComparison& comparison) {
  const auto& table = measures();
  Figure figure(2, int(table.size() + 1) / 2);
  // A panel without numbers is named above the plots rather than missing from them silently (the
  // view alone on it gives the reason: compute_kernel_view refuses with it when no panel has numbers).
  for (size_t index = 0; index < comparison.errors.size(); ++index)
    if (!comparison.errors[index].empty())
      figure.title += (figure.title.empty() ? "no numbers for panel " : ", ") + std::to_string(index + 1);
  for (size_t m = 0; m < table.size(); ++m) {
    PlotPanel plot;
    plot.x_label = "head";
    plot.y_label = table[m].title;
    plot.whole_x = true;
    for (size_t index = 0; index < comparison.rows.size(); ++index) {
      if (!comparison.rows[index]) continue;
      // Heads are categories: points, not lines; one legend (the first plot's) for every plot.
      Series series;
      if (m == 0) series.label = comparison.labels[index];
      series.markers = true;
      series.line = false;
      series.colour = int(index);
      // Side by side around each head, so that equal values do not hide each other.
      const double offset = 0.6 * (double(index) + 0.5) / double(comparison.rows.size()) - 0.3;
      for (const auto& head : comparison.rows[index]->heads)
        if (const auto value = table[m].value(head)) {
          series.x.push_back(head.head + offset);
          series.y.push_back(*value);
        }
      if (!series.x.empty()) plot.series.push_back(series);
    }
    figure.at(int(m) / figure.cols, int(m) % figure.cols) = {table[m].title, "kernels_" + table[m].key, plot};
  }
  return figure;
}

int analyze_kernel_diagnostics(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const KernelDiagnosticsSettings settings = settings_of(context.line);
  KernelComparison comparison;
  std::ostringstream csv;
  csv << "variant,head";
  for (const auto& measure : measures()) csv << "," << measure.key;
  csv << ",negative_mass,collisions,pairs,numerical_rank\n" << std::setprecision(9);
  json variants = json::array();
  int layer = 0;
  TokenLayout layout;
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int selected) {
    layer = selected;
    layout = capture.layout;
    const KernelDiagnostics diagnostics = kernel_diagnostics(capture, settings);
    json heads = json::array();
    for (const auto& head : diagnostics.heads) {
      json entry = {{"head", head.head},
                    {"negative_mass", head.negative_mass},
                    {"collisions", head.collisions},
                    {"pairs", head.pairs},
                    {"numerical_rank", head.spectrum.numerical_rank},
                    {"rank_method", head.spectrum.method}};
      csv << to_string(variant) << "," << head.head;
      for (const auto& measure : measures()) {
        const auto value = measure.value(head);
        entry[measure.key] = optional_json(value);
        csv << ",";
        if (value) csv << *value;
      }
      csv << "," << head.negative_mass << "," << head.collisions << "," << head.pairs << ","
          << head.spectrum.numerical_rank << "\n";
      heads.push_back(entry);
    }
    variants.push_back({{"variant", to_string(variant)},
                        {"attention", diagnostics.attention},
                        {"kernel", diagnostics.kernel},
                        {"queries", diagnostics.queries},
                        {"scale_note", diagnostics.scale_note},
                        {"heads", heads}});
    comparison.labels.push_back(to_string(variant));
    comparison.rows.push_back(diagnostics);
  });
  context.files->add_text("kernel_diagnostics.csv", csv.str());
  auto view = std::make_shared<const AnalysisResult<KernelComparison>>(comparison);
  const std::string figure = add_analyze_figure(
      context, analyze_figure(*find_analysis("kernel-diagnostics"), view, loaded.prepared, context.state),
      loaded.prepared, "kernel_diagnostics");
  json summary = common_summary(context, "kernel-diagnostics", layout, loaded);
  summary["layer"] = layer;
  summary["local_window"] = settings.local_window;
  summary["query_scale"] = settings.query_scale;
  summary["variants"] = variants;
  write_summary(context, "analyze-kernel-diagnostics", summary);
  context.print() << "attnscope analyze kernel-diagnostics: layer " << layer << ", means over "
                  << (variants.empty() ? 0 : variants[0]["queries"].get<int64_t>()) << " queries\n"
                  << "| variant | entropy | row max | local mass | scale shift | JS to softmax | eff. rank |\n"
                  << "|---|---|---|---|---|---|---|\n"
                  << std::fixed << std::setprecision(3);
  for (const auto& row : comparison.rows) {
    double entropy = 0, row_max = 0, local = 0, shift = 0, js = 0, rank = 0;
    const double heads = double(row->heads.size());
    for (const auto& head : row->heads) {
      entropy += head.entropy / heads;
      row_max += head.row_max / heads;
      local += head.local_mass.value_or(0) / heads;
      shift += head.scale_shift.value_or(0) / heads;
      js += head.js_to_softmax / heads;
      rank += head.spectrum.effective_rank / heads;
    }
    context.print() << "| " << row->attention << " | " << entropy << " | " << row_max << " | " << local << " | "
                    << shift << " | " << js << " | " << rank << " |\n";
  }
  context.print().unsetf(std::ios::floatfield);
  context.print() << "wrote " << context.out.string() << "/{summary.json, kernel_diagnostics.csv, " << figure << "}\n";
  return 0;
}

// Every panel's diagnostics at the layer it shows.
void compute_kernel_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  KernelComparison comparison;
  for (size_t index = 0; index < outcome.panels.size(); ++index) {
    const PanelMaps& panel = outcome.panels[index];
    comparison.labels.push_back("panel " + std::to_string(index + 1) + ": " + to_string(panel.kernel));
    comparison.rows.emplace_back();
    comparison.errors.emplace_back();
    if (input.cancelled && input.cancelled()) break;
    if (!input.panels[index].result || !panel.error.empty()) {
      comparison.errors.back() = panel.error.empty() ? "no forward pass" : panel.error;
      continue;
    }
    try {
      comparison.rows.back() = kernel_diagnostics(input.panels[index].result->forward.layers[size_t(panel.layer)], {});
    } catch (const std::invalid_argument& e) {
      comparison.errors.back() = e.what();
    }
  }
  bool any = false;
  for (const auto& row : comparison.rows) any = any || row.has_value();
  if (!any)
    for (const std::string& error : comparison.errors)
      if (!error.empty()) throw std::invalid_argument(error);
  outcome.analysis_view = std::make_shared<const AnalysisResult<KernelComparison>>(std::move(comparison));
}

Figure kernel_figure(const InferenceOutcome& outcome, const AppState&) {
  const auto* comparison = analysis_result<KernelComparison>(outcome);
  return comparison ? comparison_figure(*comparison) : Figure(1, 1);
}

}  // namespace

AnalysisEntry kernel_diagnostics_analysis() {
  AnalysisEntry entry;
  std::string table =
      R"md(`attnscope analyze --analysis kernel-diagnostics`: per head of the selected layer, each `--variants` kernel's
rows read as the papers after FLatten argue (analysis/kernel_diagnostics.h). Rows are read as p = |w| / sum |w|
(InLine's and MLLA's weights can be negative). `kernel_diagnostics.csv` holds the same numbers.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer` | always | the layer |
| `local_window` | always | `--local-window` |
| `query_scale` | always | `--query-scale` |
| `variants[].variant` | always | the variant |
| `variants[].attention` | always | the attention it ran |
| `variants[].kernel` | always | its kernel |
| `variants[].queries` | always | the query rows the means are over (`--max-queries` evenly spaced when there are more tokens) |
| `variants[].scale_note` | always | why `scale_shift` is `null`, or empty |
| `variants[].heads[].head` | always | the head |
| `variants[].heads[].entropy` | always | nats, mean over the queries |
| `variants[].heads[].row_max` | always | the largest weight of a row, mean over the queries |
| `variants[].heads[].local_mass` | always | share of a patch query's row within the k x k patches around it; `null` without patch queries |
| `variants[].heads[].scale_shift` | always | mean over queries of (1/2) sum_j \|w(c q) - w(q)\|: 0 = blind to the query's scale (not injective); `null` where not re-evaluated |
| `variants[].heads[].kl_to_softmax` | always | mean KL(p \|\| softmax row of the same q, k), nats |
| `variants[].heads[].js_to_softmax` | always | mean Jensen-Shannon divergence to it, nats (at most ln 2) |
| `variants[].heads[].lost_negative_share` | always | ReLU kernels: the share of sum \|q_c k_c\| in the products they drop; `null` for kernels that keep them |
| `variants[].heads[].effective_rank` | always | exp(entropy of the normalised singular values) |
| `variants[].heads[].negative_mass` | always | share of sum \|w\| in negative weights |
| `variants[].heads[].collisions` | always | pairs of different queries whose rows agree within 1e-5 |
| `variants[].heads[].pairs` | always | pairs compared |
| `variants[].heads[].numerical_rank` | always | singular values above the tolerance |
| `variants[].heads[].rank_method` | always | how the spectrum was computed |)md";
  entry.outputs.push_back({{"analyze-kernel-diagnostics", "summary.json", 1},
                           "analyze --analysis kernel-diagnostics --variants softmax,linear,inline,pola --out OUT",
                           table});
  entry.name = "kernel-diagnostics";
  entry.label = "kernel comparison";
  entry.help =
      "each panel's (--variants') rows per head: entropy, local mass, injectivity, divergence from softmax, "
      "dropped negative products, effective rank";
  entry.flags = {
      kVariantsFlag,
      {"local-window", "K", "kernel-diagnostics: local mass within the K x K patches around the query (odd)", "3"},
      {"query-scale", "C", "kernel-diagnostics: injectivity compares rows of C q with rows of q", "2"},
      {"max-queries", "N", "kernel-diagnostics: at most N query rows, evenly spaced", "256"}};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_kernel_diagnostics(context); };
  entry.compute = compute_kernel_view;
  entry.figure = kernel_figure;
  return entry;
}

}  // namespace attnscope
