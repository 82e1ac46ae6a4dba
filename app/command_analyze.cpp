// `attnscope analyze`: one analysis of one image, written as NPY, CSV, PNG and a JSON summary. The
// analyses, their names, options, flags and files are the registry's (views/analysis_registry.h).
#include <algorithm>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "core/output_files.h"
#include "core/progress_bar.h"
#include "views/analysis_registry.h"
#include "views/folder_statistics.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace {

std::vector<std::string> analyze_options() {
  // What every analysis reads: the input, the attention it runs, the selection and how maps look.
  std::vector<std::string> names = option_names(
      {OptionGroup::Input, OptionGroup::Attention, OptionGroup::Selection, OptionGroup::Display, OptionGroup::Output});
  // The figure an analysis draws beside its numbers (always a PNG): its width, resolution, background.
  for (const char* figure : {"width-pt", "dpi", "png-width", "transparent"}) names.push_back(figure);
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

CommandSyntax analyze_syntax() {
  std::string notes =
      "an example of each (OUT: the output folder, DIR: a folder of images, CLIP: a CLIP file, PROMPTS: a prompt "
      "file):\n";
  for (const AnalysisEntry& entry : analysis_registry())
    for (const AnalysisOutput& output : entry.outputs)
      notes += std::string("  ") + output.schema.kind + ": attnscope " + output.example + "\n";
  return {"attnscope analyze --analysis " + cli_analysis_names() +
              " [--model FILE] [--image FILE] --out DIR [options]\n"
              "  (without --model and --image: the bundled demo model and sample image)",
          analyze_options(), analyze_flags(), notes};
}

int analyze_command(const Args& args) {
  auto parsed = parse_or_print_help(args, analyze_syntax());
  if (!parsed) return 0;
  AnalyzeContext context;
  context.line = *parsed;
  context.state = context.line.state;
  // A session saved by the workbench names its analysis view; --analysis overrides it.
  std::string analysis = context.line.flags["analysis"];
  if (analysis.empty() && find_analysis(context.state.analysis)) analysis = context.state.analysis;
  if (analysis.empty()) throw std::invalid_argument("--analysis is required (" + cli_analysis_names() + ")");
  const AnalysisEntry* entry = find_cli_analysis(analysis);
  if (!entry || !entry->run)
    throw std::invalid_argument("unknown --analysis '" + excerpt(analysis) + "' (expected " + cli_analysis_names() +
                                ")");
  if (context.state.out.empty()) throw std::invalid_argument("--out is required");
  // The bundled model, and the bundled image unless the input is a glyph sample or a folder.
  const bool single_image = context.line.flags["glyph-seed"].empty() && images_folder(context.state).empty();
  use_bundled_defaults(context.state, single_image);
  // Bounded before anything is allocated or written.
  const int bins = context.line.flag_int("bins"), top_k = context.line.flag_int("top-k");
  if (bins < 1 || bins > 100000) throw std::invalid_argument("--bins must be from 1 to 100000");
  if (top_k < 1 || top_k > 1000000) throw std::invalid_argument("--top-k must be from 1 to 1000000");
  context.out = context.state.out;
  context.files = std::make_shared<OutputFiles>(context.state.out, context.state.figure.overwrite);
  ProgressBar bar;
  context.progress = [&bar](size_t done, size_t total, const std::string& label) { bar.show(done, total, label); };
  context.progress_on_terminal = bar.terminal();
  const int code = entry->run(context, analysis);
  context.files->write();  // refuses existing outputs (unless --overwrite) before writing any
  // What the analysis found and wrote, said once it is written.
  std::cout << context.report->str();
  print_warnings("analyze", context.warnings);  // an analysis that fails names the tensors in its error
  return code;
}

}  // namespace attnscope
