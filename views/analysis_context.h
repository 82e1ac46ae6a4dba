// What the analyses' headless runs (`attnscope analyze`) share: the parsed command line, the loaded
// model and prepared image, and how summaries, CSV and JSON are written.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/attribution_target.h"
#include "core/output_files.h"
#include "core/value_scale.h"
#include "figures/bundle.h"
#include "models/model_loader.h"
#include "session/command_line.h"

namespace attnscope {

// What an analysis's `analyze` run works with and returns: it computes and adds its files, its
// report and its warnings here; the CLI (app/command_analyze.cpp) writes the files, then prints.
struct AnalyzeContext {
  AppState state;
  CommandLine line;
  std::filesystem::path out;
  mutable std::vector<std::string> warnings;  // the model's and the analysis's, printed once it succeeded
  // Every output, written together once the analysis is done: existing files are refused first.
  std::shared_ptr<OutputFiles> files;
  // What the CLI prints once the files are written: what was found and where it went.
  std::shared_ptr<std::ostringstream> report = std::make_shared<std::ostringstream>();
  // Progress of a long step (the CLI's bar; may be empty), and whether it redraws in place (a
  // terminal) rather than printing a line a step.
  std::function<void(size_t done, size_t total, const std::string& label)> progress;
  bool progress_on_terminal = false;

  std::ostream& print() const { return *report; }
  void show_progress(size_t done, size_t total, const std::string& label) const {
    if (progress) progress(done, total, label);
  }
};

// The model, the prepared image and (for --glyph-seed or --object-mask) the object mask at the
// model's input size.
struct Loaded {
  LoadedModel model;
  RgbImage prepared;
  torch::Tensor object_mask;  // uint8 [rows, cols] at the prepared size, 1 on the object; undefined when none
};

// `analyze` flags that several analyses read (declared by each in its registry entry).
extern const CommandFlag kVariantsFlag;  // --variants: spectrum and metrics compare variants
extern const CommandFlag kTopKFlag;      // --top-k: f_p and metrics

Loaded load_inputs(const AnalyzeContext& context);
// --target against the loaded model, another image prepared as --image was (resolve_target_spec).
AttributionTarget session_target(const AnalyzeContext& context, Loaded& loaded);
// The summaries' block `target` (docs/output_schemas.md): its kind, --target, its description,
// and what the kind adds (a class's name, a prompt's tokens, the other image's file).
nlohmann::json target_json(const AttributionTarget& target, const LoadedModel& model);
nlohmann::json common_summary(const AnalyzeContext& context, const std::string& analysis, const TokenLayout& layout,
                              const Loaded& loaded);
// Adds summary.json to the context's outputs, with the schema of output kind `kind`
// ("analyze-gradcam", ...: core/output_schemas.h, docs/output_schemas.md).
void write_summary(const AnalyzeContext& context, const std::string& kind, const nlohmann::json& summary);
void write_csv(const AnalyzeContext& context, const std::string& name, const std::string& header,
               const std::vector<std::vector<double>>& rows);
// A map over the model's input image in the session's colour map, opacity and alpha mode, on `scale`.
RgbImage overlay_in_colours(const AnalyzeContext& context, const RgbImage& rgb, const torch::Tensor& map,
                            const ValueScale& scale);
// Where the build draws no figures (the engine-only build has no cairo), a warning that `exported`'s
// figure was not drawn and where its numbers are.
void warn_if_undrawn(const AnalyzeContext& context, const ExportedFigure& exported);
// The session's colour map over [0, 1], labelled.
ValueScale unit_scale(const AnalyzeContext& context, const std::string& label);
std::vector<std::string> split_list(const std::string& text);
// --variants (a comma-separated list), else the session's variant alone.
std::vector<Variant> variants_to_compare(const AnalyzeContext& context);
// One forward pass per variant to compare (--variants), each handed the selected layer's capture.
void for_each_variant_layer(const AnalyzeContext& context, Loaded& loaded,
                            const std::function<void(Variant, const AttentionCapture&, int layer)>& visit);

}  // namespace attnscope
