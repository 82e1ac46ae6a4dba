// attnscope's entry point: dispatches to a command; any error becomes one line on stderr and a
// non-zero exit code.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <c10/util/Exception.h>

#include "app/commands.h"
#include "core/excerpt.h"

namespace attnscope {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"run", "run one image through a model and write attention, matrices, overlays and a summary", run_command,
       run_syntax},
      {"analyze", "one analysis of one image (attribution, spectrum, f_p, representations, folder statistics, ...)",
       analyze_command, analyze_syntax},
      {"info", "print the architecture attnscope infers from a checkpoint", info_command, info_syntax},
      {"train", "train a demo model on the generated glyph task", train_command, train_syntax},
      {"eval", "accuracy, attention focus and rank of demo models on held-out glyph images", eval_command, eval_syntax},
      {"export", "paper figures (PNG, SVG, PDF) with the data behind them, for an image or a folder", export_command,
       export_syntax},
      {"glyphs", "write images of the generated glyph task with labels and boxes", glyphs_command, glyphs_syntax},
      {"bench", "forward latency per variant against PyTorch eager on this machine", bench_command, bench_syntax},
      {"gui", "the live attention workbench (also what `attnscope` alone opens)", gui_command, gui_syntax},
      {"reference", "print the command reference as Markdown (docs/commands.md)", reference_command, reference_syntax},
  };
  return list;
}

namespace {

void print_usage() {
  std::cout << "usage: attnscope COMMAND [options]   (attnscope COMMAND --help for its options)\n\ncommands:\n";
  for (const auto& command : commands()) {
    std::string name = command.name;
    name.resize(8, ' ');
    std::cout << "  " << name << command.summary << "\n";
  }
}

}  // namespace
}  // namespace attnscope

int main(int argc, char** argv) {
  using namespace attnscope;
  // LibTorch's and OpenBLAS's OpenMP threads spin while they wait; whenever another process or
  // thread wants a core, small matrix products then run up to 100x slower. libgomp reads its wait
  // policy once, when it loads, so the setting has to be in the environment: re-exec once with it.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure; then run as we are
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  // No command (nothing, or options only): the workbench, on the default model and image unless
  // the options say otherwise.
  const bool options_only = !args.empty() && args[0].rfind("--", 0) == 0 && args[0] != "--help";
  if (args.empty() || options_only) args.insert(args.begin(), "gui");
  if (args[0] == "-h" || args[0] == "--help") {
    print_usage();
    return 0;
  }
  const std::string name = args[0];
  args.erase(args.begin());
  for (const auto& command : commands()) {
    if (name != command.name) continue;
    try {
      return command.entry(args);
    } catch (const c10::Error& e) {
      std::cerr << "attnscope " << name << ": error: " << one_line(e.what_without_backtrace()) << "\n";
    } catch (const std::bad_alloc&) {
      std::cerr << "attnscope " << name << ": error: out of memory\n";
    } catch (const std::exception& e) {
      std::cerr << "attnscope " << name << ": error: " << one_line(e.what()) << "\n";
    }
    return 1;
  }
  std::cerr << "attnscope: unknown command '" << name << "' (see attnscope --help)\n";
  return 2;
}
