// The analysis registry: one entry per analysis, read by `attnscope analyze` (its names, flags and
// files), session files and the option table (its options), the workbench (its button, what its
// view computes on the worker, how it is drawn) and "Export what is on screen" (its figure).
//
// Adding an analysis: a file views/analysis_NAME.cpp that defines `AnalysisEntry NAME_analysis()`,
// and one line in views/analysis_list.h. Its workbench view is the figure the entry draws (the
// same one export writes), unless a panel of its own takes over: a file in viewer/panels/ that
// registers itself under the analysis's name (ATTNSCOPE_ANALYSIS_PANEL).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis_cache.h"
#include "core/output_schemas.h"
#include "figures/figure.h"
#include "session/command_line.h"
#include "views/analysis_context.h"
#include "views/view_model.h"

namespace attnscope {

// One panel's forward pass as an analysis view reads it.
struct PanelForwardView {
  LoadedModel* model = nullptr;                   // null when the panel's model failed
  std::shared_ptr<const InferenceResult> result;  // its forward pass with every layer captured
  AttentionSettings settings;
  std::string input_key;  // its model and prepared input, for cache keys
};

// What an analysis view computes from, on the worker thread.
struct AnalysisViewInput {
  const InferenceRequest& request;
  const std::vector<PanelForwardView>& panels;  // panel 1 carries the analyses with one model
  std::function<bool()> cancelled;              // checked between expensive steps
  AnalysisCache& cache;
  // Long views (statistics over a folder) report how far they are: the worker publishes it to the
  // status line. May be empty.
  std::function<void(int done, int total)> progress;
};

// A view that runs panel 1's model again (the residual-stream views): its report, computed once per
// key of what it depends on and kept in the cache, or why there is none (shown in the view).
template <typename Report>
struct PanelRunView : AnalysisViewData {
  std::shared_ptr<const Report> report;
  std::string error;
  double milliseconds = 0;
};

// Sets `outcome`'s view to `compute(panel 1)` under `key(panel 1)`, or to the reason
// (std::invalid_argument) it could not be computed.
template <typename Report>
void compute_panel_run_view(const AnalysisViewInput& input, InferenceOutcome& outcome,
                            const std::function<std::string(const PanelForwardView&)>& key,
                            const std::function<Report(const PanelForwardView&)>& compute) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<PanelRunView<Report>>();
  const PanelForwardView& panel = input.panels.front();
  try {
    if (!panel.model || !panel.result) throw std::invalid_argument("panel 1 has no model");
    const std::string cache_key = key(panel);
    view->report = input.cache.get<Report>(cache_key);
    if (!view->report) {
      auto report = std::make_shared<const Report>(compute(panel));
      input.cache.put(cache_key, report);
      view->report = report;
    }
  } catch (const std::invalid_argument& e) {
    view->error = e.what();
  }
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  outcome.analysis_view = view;
}

// A versioned file an analysis writes (its summary.json), with one command line that writes it
// and its keys as docs/analysis_outputs.md lists them: `attnscope reference --outputs` prints
// them, and a test runs every example and checks its file against them both ways.
struct AnalysisOutput {
  OutputSchema schema;
  // After "attnscope ": OUT stands for the output folder, DIR for a folder of images, CLIP for a
  // CLIP file and PROMPTS for a prompt file; without --model and --image the bundled demo model and image.
  std::string example;
  // The paragraph under its heading, then its table's rows (docs/output_schemas.md's notation).
  std::string documentation;
};

struct AnalysisEntry {
  std::string name;   // the session's `analysis` value and `analyze --analysis NAME`
  std::string label;  // the workbench's button; empty: `analyze` only
  std::string help;   // a few words for --help
  // More names `analyze --analysis` takes for this analysis (the attribution methods).
  std::vector<std::string> cli_names;
  // Whether `analyze --analysis` lists `name` itself (the attribution view's name is a session's:
  // analyze names its methods instead, though it still runs a session saved with it).
  bool listed_by_name = true;
  // The options the analysis reads besides the input, the attention settings and the layer, head
  // and query selection: `analyze` accepts them, a workbench request carries only these (so
  // changing another analysis's option costs no run) and the view shows their controls.
  std::vector<std::string> reads;
  // Options the analysis defines itself (kept in AnalysisSettings::options by name).
  std::vector<OptionSpec> options;
  std::vector<CommandFlag> flags;         // `analyze` flags of its own
  std::vector<AnalysisOutput> outputs;    // the versioned files `run` writes; the first is the example
  bool needs_computed_attention = false;  // q, k and activations: not TorchScript files
  bool wide_view = false;                 // the workbench gives its column more room (several plots side by side)
  // How the worker's progress reads on the status line; empty: "done/total images" (a folder).
  std::function<std::string(int done, int total)> progress_text;

  // `analyze`: computes and adds its files to context.files; `name` is the one given.
  std::function<int(const AnalyzeContext& context, const std::string& name)> run;
  // The workbench: the view's data, from the panels' forward passes (set into the outcome).
  std::function<void(const AnalysisViewInput& input, InferenceOutcome& outcome)> compute;
  // The view as a figure, from the outcome's data alone: what the workbench draws for analyses
  // without a panel of their own, and what "Export what is on screen" writes for every one.
  std::function<Figure(const InferenceOutcome& outcome, const AppState& state)> figure;
};

// Every analysis, in the order of the workbench's buttons and `analyze --help`.
const std::vector<AnalysisEntry>& analysis_registry();
// The entry named `name` (a session's `analysis`), or null.
const AnalysisEntry* find_analysis(const std::string& name);
// The entry `analyze --analysis NAME` runs (its name or one of its cli_names), or null.
const AnalysisEntry* find_cli_analysis(const std::string& name);
// The worker's progress for the analysis `name` as the status line shows it.
std::string analysis_progress_text(const std::string& name, int done, int total);
// "gradcam, rollout, ..., faithfulness": every name `analyze` takes.
std::string cli_analysis_names();
// The registry's part of the option table (views/option_catalog.h): `analysis` and every
// analysis's own options.
std::vector<OptionSpec> analysis_options();
const std::vector<std::string>& analysis_names();  // "none" first, then the workbench's analyses
std::string analysis_help();                       // "spectrum (matrix, rank), gradcam, ..." for --help

// The schema of output kind `kind`: an analysis's own (AnalysisEntry::outputs) or one of
// core/output_schemas.h's; throws std::logic_error for a kind neither has.
const OutputSchema& summary_schema(const std::string& kind);
// The analyses' output kinds as Markdown sections (docs/analysis_outputs.md).
std::string analysis_outputs_markdown();

}  // namespace attnscope
