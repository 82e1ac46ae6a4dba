// `attnscope export`: paper figures for one image or a folder of images, with the numbers behind
// every panel and the session that reproduces each figure; the same code as the GUI's Export button.

#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/progress_bar.h"
#include "figures/export.h"
#include "models/inference.h"

namespace attnscope {

namespace {

const std::vector<std::string> kExportOptions = {
    "model", "image", "out", "layout", "format", "dpi", "png-width", "width-pt", "transparent", "overwrite", "variants",
    "layers", "heads", "layer", "head", "query", "view", "direction", "colormap", "scale", "opacity", "alpha",
    "variant", "p", "window", "anchors", "dwc", "norm", "resize", "size", "crop", "interpolation", "mean", "std",
    "device", "arch", "config", "gradcam-layer", "class", "fusion", "discard", "fp-vectors", "fp-projection",
    // the faithfulness layout
    "methods", "steps", "replacement", "ig-steps", "ig-baseline", "max-pixels"};

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

int export_command(const Args& args) {
  auto parsed = parse_or_print_help(args, usage(), kExportOptions, kExportFlags);
  if (!parsed) return 0;
  const CommandLine& line = *parsed;
  const AppState& state = line.state;
  const std::string& folder = line.flags.at("images");
  if (state.model.empty()) throw std::invalid_argument("--model is required");
  if (state.out.empty()) throw std::invalid_argument("--out is required");
  if (folder.empty() == state.image.empty())
    throw std::invalid_argument(folder.empty() ? "--image FILE or --images DIR is required"
                                               : "give --image or --images, not both");
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
  std::cout << "attnscope export: " << batch.written.size() << " " << state.figure.layout << " figure"
            << (batch.written.size() == 1 ? "" : "s") << " (" << state.figure.format << ") in " << state.out;
  if (!batch.failed.empty()) std::cout << "; " << batch.failed.size() << " of " << images.size() << " images failed";
  std::cout << "\n";
  return batch.failed.empty() ? 0 : 1;
}

}  // namespace attnscope
