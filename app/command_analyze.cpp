// `attnscope analyze`: one analysis of one image, written as NPY, CSV, PNG and a JSON summary. The
// analyses, their names, options, flags and files are the registry's (views/analysis_registry.h).
#include <algorithm>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"

namespace attnscope {

namespace {

// What every analysis reads: the input, the attention it runs, the selection and how maps look.
const std::vector<std::string> kCommonOptions = {
    "model",  "image", "out",    "variant",  "p",     "window",  "anchors",       "dwc",       "norm",
    "layer",  "head",  "query",  "resize",   "size",  "crop",    "interpolation", "mean",      "std",
    "device", "arch",  "config", "colormap", "scale", "opacity", "alpha",         "overwrite", "max-pixels"};

std::vector<std::string> analyze_options() {
  std::vector<std::string> names = kCommonOptions;
  for (const auto& entry : analysis_registry()) {
    for (const auto& name : entry.reads)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    for (const auto& option : entry.options)
      if (std::find(names.begin(), names.end(), option.name) == names.end()) names.push_back(option.name);
  }
  return names;
}

std::vector<CommandFlag> analyze_flags() {
  std::vector<CommandFlag> flags = {
      {"analysis", "NAME", cli_analysis_names(), ""},
      {"glyph-seed", "S", "metrics, all: use the generated glyph sample S as the image and its mask as the object", ""},
  };
  for (const auto& entry : analysis_registry())
    for (const auto& flag : entry.flags)
      if (std::none_of(flags.begin(), flags.end(), [&](const CommandFlag& known) { return known.name == flag.name; }))
        flags.push_back(flag);
  return flags;
}

}  // namespace

int analyze_command(const Args& args) {
  const std::string usage =
      "attnscope analyze --analysis " + cli_analysis_names() + " --model FILE --image FILE --out DIR [options]";
  auto parsed = parse_or_print_help(args, usage, analyze_options(), analyze_flags());
  if (!parsed) return 0;
  AnalyzeContext context;
  context.line = *parsed;
  context.state = context.line.state;
  // A session saved by the workbench names its analysis view; --analysis overrides it.
  std::string analysis = context.line.flags["analysis"];
  if (analysis.empty() && context.state.analysis != "none") analysis = context.state.analysis;
  if (analysis.empty()) throw std::invalid_argument("--analysis is required (" + cli_analysis_names() + ")");
  const AnalysisEntry* entry = find_cli_analysis(analysis);
  if (!entry || !entry->run)
    throw std::invalid_argument("unknown --analysis '" + excerpt(analysis) + "' (expected " + cli_analysis_names() +
                                ")");
  if (context.state.out.empty()) throw std::invalid_argument("--out is required");
  // Bounded before anything is allocated or written.
  const int bins = context.line.flag_int("bins"), top_k = context.line.flag_int("top-k");
  if (bins < 1 || bins > 100000) throw std::invalid_argument("--bins must be from 1 to 100000");
  if (top_k < 1 || top_k > 1000000) throw std::invalid_argument("--top-k must be from 1 to 1000000");
  context.out = context.state.out;
  context.files = std::make_shared<OutputFiles>(context.state.out, context.state.figure.overwrite);
  const int code = entry->run(context, analysis);
  context.files->write();                       // refuses existing outputs (unless --overwrite) before writing any
  print_warnings("analyze", context.warnings);  // an analysis that fails names the tensors in its error
  return code;
}

}  // namespace attnscope
