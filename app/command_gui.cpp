// `attnscope gui` (also `attnscope` alone): the live attention workbench, optionally driven
// headlessly to write a screenshot after N frames, or to benchmark slider-to-pixels latency.
#include <array>
#include <cctype>
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "viewer/workbench.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace {

// "a,b;c,d": groups of N finite numbers, separated by ';' (--click, --wheel, --drag).
template <size_t N>
std::vector<std::array<float, N>> number_groups(const std::string& text, const char* flag, const char* form) {
  std::vector<std::array<float, N>> groups;
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ';');) {
    std::array<float, N> numbers{};
    std::istringstream in(item);
    bool good = true;
    for (size_t i = 0; i < N && good; ++i) {
      char comma = ',';
      good = (i == 0 || (in >> comma && comma == ',')) && (in >> numbers[i]) && std::isfinite(numbers[i]);
    }
    char extra = 0;
    if (!good || (in >> extra))
      throw std::invalid_argument(std::string(flag) + " expects " + form + ", got '" + excerpt(item) + "'");
    groups.push_back(numbers);
  }
  return groups;
}

}  // namespace

CommandSyntax gui_syntax() {
  const std::string usage = "attnscope gui [--session FILE] [options]";
  std::vector<std::string> state_options;
  for (const auto& option : app_options())
    if (option.name != "out") state_options.push_back(option.name);
  const std::vector<CommandFlag> flags = {
      {"frames", "N", "render N frames once the result is in, then write --screenshot and exit (0: interactive)", "0"},
      {"screenshot", "FILE", "PNG of the window written after --frames frames (plus FILE.json: where views are)", ""},
      {"width", "PX", "window width", "1600"},
      {"height", "PX", "window height", "1000"},
      {"bench", "N",
       "benchmark: N slider changes each with the pointer moving where nothing changes, moving across a map, and at "
       "rest; median change-to-pixels vs one forward; frames drawn, skipped and held back",
       "0"},
      {"video", "FILE|camera:N", "live input from a video file or a camera instead of --image", ""},
      {"click", "X,Y;..", "with --frames: left clicks at window coordinates once the views are settled", ""},
      {"wheel", "X,Y,N;..",
       "with --frames: N mouse-wheel notches at window coordinates (N > 0 zooms in), before the clicks", ""},
      {"drag", "X0,Y0,X1,Y1;..", "with --frames: right-button drags at window coordinates, after the clicks", ""},
      {"export-on-screen", "DIR",
       "with --frames: press \"Export what is on screen\" into DIR once the views are settled, wait for it", ""},
      {"export-kept", "DIR",
       "with --frames: press every kept folder job's \"Export figure\" into DIR once all is settled, wait for them",
       ""},
      {"print-preview", "", "with --frames: press \"Preview at print size\" once the views are settled, wait for it",
       ""},
      {"open-model", "FILE",
       "with --frames: open FILE as the model once the panels are settled (a folder job may still run), as the model "
       "field does",
       ""},
      {"job-choice", "keep|cancel|ask",
       "with --frames: the answer to the question a model change asks while a folder job runs (ask: the screenshot "
       "shows the question)",
       ""},
      {"choose-folder", "NAME=DIR",
       "with --frames: press the folder option NAME's Browse... once settled, after --open-model, and choose DIR", ""},
      {"keys", "CHORD;..",
       "with --frames: key chords pressed once settled, after --open-model (ctrl+z, ctrl+shift+z, f1)", ""},
  };
  return {usage, state_options, flags};
}

int gui_command(const Args& args) {
  auto parsed = parse_or_print_help(args, gui_syntax());
  if (!parsed) return 0;
  WorkbenchOptions options;
  options.frames = parsed->flag_int("frames");
  options.screenshot = parsed->flags.at("screenshot");
  options.width = parsed->flag_int("width");
  options.height = parsed->flag_int("height");
  options.bench_changes = parsed->flag_int("bench");
  options.video = parsed->flags.at("video");
  options.export_on_screen = parsed->flags.at("export-on-screen");
  options.export_kept = parsed->flags.at("export-kept");
  options.print_preview = !parsed->flags.at("print-preview").empty();
  options.open_model = parsed->flags.at("open-model");
  options.choose_folder = parsed->flags.at("choose-folder");
  options.job_choice = parsed->flags.at("job-choice");
  if (!options.job_choice.empty() && options.job_choice != "keep" && options.job_choice != "cancel" &&
      options.job_choice != "ask") {
    std::cerr << "attnscope gui: --job-choice is keep, cancel or ask, not " << options.job_choice << "\n";
    return 2;
  }
  std::istringstream chords(parsed->flags.at("keys"));
  for (std::string text; std::getline(chords, text, ';');) {
    WorkbenchOptions::KeyChord chord;
    std::string rest = text;
    for (const auto& [prefix, flag] : {std::pair<std::string, bool*>{"ctrl+", &chord.ctrl}, {"shift+", &chord.shift}})
      if (rest.rfind(prefix, 0) == 0) {
        *flag = true;
        rest = rest.substr(prefix.size());
      }
    if (rest.size() == 1 && std::isalpha(static_cast<unsigned char>(rest[0])))
      chord.key = std::toupper(static_cast<unsigned char>(rest[0]));  // GLFW's letter codes are ASCII capitals
    else if (rest.size() >= 2 && rest.size() <= 3 && rest[0] == 'f' &&
             std::isdigit(static_cast<unsigned char>(rest[1])) && std::stoi(rest.substr(1)) >= 1 &&
             std::stoi(rest.substr(1)) <= 12)
      chord.key = 289 + std::stoi(rest.substr(1));  // GLFW_KEY_F1 is 290
    else
      throw std::invalid_argument("--keys expects chords like ctrl+z;ctrl+shift+z;f1, got '" + excerpt(text) + "'");
    options.keys.push_back(chord);
  }
  for (const auto& click : number_groups<2>(parsed->flags.at("click"), "--click", "X,Y;X,Y..."))
    options.clicks.emplace_back(click[0], click[1]);
  options.wheels = number_groups<3>(parsed->flags.at("wheel"), "--wheel", "X,Y,N;...");
  options.drags = number_groups<4>(parsed->flags.at("drag"), "--drag", "X0,Y0,X1,Y1;...");
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--session") options.session_path = args[i + 1];
  if (options.frames < 0 || options.bench_changes < 0) throw std::invalid_argument("--frames and --bench must be >= 0");
  if (options.width < 320 || options.height < 240) throw std::invalid_argument("the window needs at least 320x240");
  // X11 and GL sizes are 16-bit: a larger request wrapped round (100000 became 34464) in silence.
  if (options.width > 16384 || options.height > 16384)
    throw std::invalid_argument("--width and --height are at most 16384 pixels (got " + std::to_string(options.width) +
                                "x" + std::to_string(options.height) + ")");
  if (!options.screenshot.empty() && options.frames == 0)
    throw std::invalid_argument("--screenshot needs --frames N (how many frames to render first)");
  return run_workbench(parsed->state, options);
}

}  // namespace attnscope
