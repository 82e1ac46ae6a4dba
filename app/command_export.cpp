// `attnscope export`: paper figures for one image or a folder of images, with the numbers behind
// every panel and the session that reproduces each figure; the same code as the GUI's Export button.

#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/output_files.h"
#include "core/progress_bar.h"
#include "exports/export.h"
#include "models/inference.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace {

std::vector<std::string> export_options() {
  std::vector<std::string> names = option_names({OptionGroup::Input, OptionGroup::Attention, OptionGroup::Selection,
                                                 OptionGroup::Display, OptionGroup::Output, OptionGroup::Figure});
  for (const char* name :
       {"view", "direction", "gradcam-layer", "class", "fusion", "discard", "fp-vectors", "fp-projection",
        // the faithfulness layout
        "methods", "steps", "replacement", "ig-steps", "ig-baseline"})
    names.push_back(name);
  return names;
}

const std::vector<CommandFlag> kExportFlags = {
    {"images", "DIR", "a folder of images (sorted; .png .jpg .jpeg .bmp .tif .tiff .webp): one figure each", ""},
};

std::string usage() {
  std::string text =
      "attnscope export --model FILE (--image FILE | --images DIR) --out DIR [--layout NAME] [--format png|svg|pdf] "
      "[options]\n\nlayouts:\n";
  for (const auto& layout : figure_layouts()) {
    std::string name = layout.name;
    name.resize(18, ' ');
    text += "  " + name + layout.description + "\n";
  }
  text +=
      "\nEach figure FIG = <image stem>_<layout> gets FIG.<format>, FIG.<format>.json (geometry, colour scales),\n"
      "FIG.<format>.session.json (reproduces it: attnscope export --session FILE) and FIG_data/ with the NPY or CSV\n"
      "behind every panel. Existing files are an error unless --overwrite.\n"
      "--variants rows are panel specs: VARIANT[:model=F][:p=P][:window=W][:anchors=M][:dwc=on|off][:norm=..];\n"
      "a row with model=F runs that checkpoint (panels of the workbench that hold other checkpoints).";
  return text;
}

}  // namespace

CommandSyntax export_syntax() { return {usage(), export_options(), kExportFlags}; }

int export_command(const Args& args) {
  auto parsed = parse_or_print_help(args, export_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  AppState& state = line.state;
  const std::string& folder = line.flags.at("images");
  if (state.out.empty()) throw std::invalid_argument("--out is required");
  check_output_folder(state.out);
  if (!folder.empty() && !state.image.empty()) throw std::invalid_argument("give --image or --images, not both");
  use_bundled_defaults(state, folder.empty());
  FigureRequest::from_state(state);  // option errors before the model loads

  const std::vector<std::string> images = folder.empty() ? std::vector<std::string>{state.image} : list_images(folder);
  if (images.empty()) throw std::invalid_argument("no images in " + folder);

  configure_threads();
  LoadedModel model = load_model(state.model, state.arch_overrides(), resolve_device(state.device));
  configure_input(model, state.input_settings());
  ProgressBar bar;
  const BatchExport batch =
      export_figures(state, model, images, state.out, [&](size_t done, size_t total, const std::string& image) {
        bar.show(done, total, image);
        return true;
      });
  for (const auto& failure : batch.failed)
    bar.error("attnscope export: error: " + failure.image + ": " + failure.message);
  if (!batch.written.empty()) print_warnings("export", model.report.warnings);
  for (const ExportedFigure& figure : batch.written)
    if (!figure.note.empty()) std::cout << "attnscope export: note: " << figure.stem << ": " << figure.note << "\n";
  std::cout << "attnscope export: " << batch.written.size() << " " << state.figure.layout << " figure"
            << (batch.written.size() == 1 ? "" : "s") << " (" << to_string(state.figure.format) << ") in " << state.out;
  if (!batch.failed.empty()) std::cout << "; " << batch.failed.size() << " of " << images.size() << " images failed";
  std::cout << "\n";
  return batch.failed.empty() ? 0 : 1;
}

}  // namespace attnscope
