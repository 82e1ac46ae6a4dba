// The attnscope commands; each takes its arguments after the command name and returns an exit code.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

using Args = std::vector<std::string>;

int run_command(const Args& args);      // one image through a model, outputs to a folder
int info_command(const Args& args);     // architecture and parameter count of a checkpoint
int bench_command(const Args& args);    // forward latency per variant against PyTorch eager
int analyze_command(const Args& args);  // Grad-CAM, rollout, spectrum, f_p, focus metrics of one image
int train_command(const Args& args);    // trains a demo model on the generated glyph task
int eval_command(const Args& args);     // focus and rank of the demo models on held-out images
int glyphs_command(const Args& args);   // writes images of the generated task
int export_command(const Args& args);   // paper figures (PNG, SVG, PDF) with the data behind them
int gui_command(const Args& args);      // the live attention workbench

struct Command {
  const char* name;
  const char* summary;
  int (*entry)(const Args&);
};

// Every command, in the order `attnscope --help` lists them.
const std::vector<Command>& commands();

}  // namespace attnscope
