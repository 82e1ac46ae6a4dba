// `attnscope gui` (also `attnscope` alone): the live attention workbench, optionally driven
// headlessly to write a screenshot after N frames, or to benchmark slider-to-pixels latency.
#include <array>
#include <cctype>
#include <cmath>
#include <iostream>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "viewer/workbench.h"
#include "views/option_catalog.h"

namespace attnscope {

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
      {"bench", "N", "benchmark: N slider changes, median change-to-pixels vs one forward; frame times", "0"},
      {"video", "FILE|camera:N", "live input from a video file or a camera instead of --image", ""},
      {"click", "X,Y;..", "with --frames: left clicks at window coordinates once the views are settled", ""},
      {"wheel", "X,Y,N;..",
       "with --frames: N mouse-wheel notches at window coordinates (N > 0 zooms in), before the clicks", ""},
      {"drag", "X0,Y0,X1,Y1;..", "with --frames: right-button drags at window coordinates, after the clicks", ""},
      {"export-on-screen", "DIR",
       "with --frames: press \"Export what is on screen\" into DIR once the views are settled, wait for it", ""},
      {"open-model", "FILE",
       "with --frames: open FILE as the model once the views are settled, as the model field does", ""},
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
  options.open_model = parsed->flags.at("open-model");
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
  std::istringstream clicks(parsed->flags.at("click"));
  for (std::string click; std::getline(clicks, click, ';');) {
    float x = 0, y = 0;
    char comma = 0, extra = 0;
    std::istringstream in(click);
    if (!(in >> x >> comma >> y) || comma != ',' || (in >> extra))
      throw std::invalid_argument("--click expects X,Y;X,Y..., got '" + excerpt(click) + "'");
    options.clicks.emplace_back(x, y);
  }
  std::istringstream wheels(parsed->flags.at("wheel"));
  for (std::string wheel; std::getline(wheels, wheel, ';');) {
    std::array<float, 3> step{};
    char commas[2] = {}, extra = 0;
    std::istringstream in(wheel);
    if (!(in >> step[0] >> commas[0] >> step[1] >> commas[1] >> step[2]) || commas[0] != ',' || commas[1] != ',' ||
        (in >> extra) || !std::isfinite(step[2]))
      throw std::invalid_argument("--wheel expects X,Y,N;..., got '" + excerpt(wheel) + "'");
    options.wheels.push_back(step);
  }
  std::istringstream drags(parsed->flags.at("drag"));
  for (std::string drag; std::getline(drags, drag, ';');) {
    std::array<float, 4> ends{};
    char commas[3] = {}, extra = 0;
    std::istringstream in(drag);
    if (!(in >> ends[0] >> commas[0] >> ends[1] >> commas[1] >> ends[2] >> commas[2] >> ends[3]) || commas[0] != ',' ||
        commas[1] != ',' || commas[2] != ',' || (in >> extra))
      throw std::invalid_argument("--drag expects X0,Y0,X1,Y1;..., got '" + excerpt(drag) + "'");
    options.drags.push_back(ends);
  }
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--session") options.session_path = args[i + 1];
  if (options.frames < 0 || options.bench_changes < 0) throw std::invalid_argument("--frames and --bench must be >= 0");
  if (options.width < 320 || options.height < 240) throw std::invalid_argument("the window needs at least 320x240");
  if (!options.screenshot.empty() && options.frames == 0)
    throw std::invalid_argument("--screenshot needs --frames N (how many frames to render first)");
  return run_workbench(parsed->state, options);
}

}  // namespace attnscope
