// The attnscope commands; each takes its arguments after the command name and returns an exit code.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "session/command_line.h"

namespace attnscope {

using Args = std::vector<std::string>;

// What a command takes: its usage line, the session options it reads (from the option table) and
// flags of its own. Its --help, and docs/commands.md through `attnscope reference`, print this.
struct CommandSyntax {
  CommandSyntax(std::string usage_line, std::vector<std::string> state_options, std::vector<CommandFlag> own_flags,
                std::string more = {})
      : usage(std::move(usage_line)),
        options(std::move(state_options)),
        flags(std::move(own_flags)),
        notes(std::move(more)) {}
  std::string usage;
  std::vector<std::string> options;
  std::vector<CommandFlag> flags;
  std::string notes;  // printed after the options
};

int run_command(const Args& args);           // one image through a model, outputs to a folder
int info_command(const Args& args);          // architecture and parameter count of a checkpoint
int models_command(const Args& args);        // what the model caches hold, and what attnscope opens
int bench_command(const Args& args);         // forward latency per variant against PyTorch eager
int analyze_command(const Args& args);       // Grad-CAM, rollout, spectrum, f_p, focus metrics of one image
int train_command(const Args& args);         // trains a demo model on the generated glyph task
int train_sae_command(const Args& args);     // trains a sparse autoencoder on a demo model's residual stream
int eval_command(const Args& args);          // focus and rank of the demo models on held-out images
int glyphs_command(const Args& args);        // writes images of the generated task
int export_command(const Args& args);        // paper figures (PNG, SVG, PDF) with the data behind them
int gui_command(const Args& args);           // the live attention workbench
int reference_command(const Args& args);     // the command reference as Markdown (docs/commands.md)
int device_check_command(const Args& args);  // parity and speed of a device against the CPU and eager PyTorch
int fork_server_command(const Args& args);   // command lines from stdin, each in a forked child

CommandSyntax run_syntax();
CommandSyntax info_syntax();
CommandSyntax models_syntax();
CommandSyntax bench_syntax();
CommandSyntax analyze_syntax();
CommandSyntax train_syntax();
CommandSyntax train_sae_syntax();
CommandSyntax eval_syntax();
CommandSyntax glyphs_syntax();
CommandSyntax export_syntax();
CommandSyntax gui_syntax();
CommandSyntax reference_syntax();
CommandSyntax device_check_syntax();
CommandSyntax fork_server_syntax();

struct Command {
  const char* name;
  const char* summary;
  int (*entry)(const Args&);
  CommandSyntax (*syntax)();
};

// Every command of this build, in the order `attnscope --help` lists them (app/command_table.cpp;
// the engine-only build's are in app/command_table_engine.cpp).
const std::vector<Command>& commands();

// What `attnscope ARGS...` runs once loaded (app/main.cpp): the command args[0] with the rest, the
// workbench when args is empty or starts with an option, the usage on --help. Its exit code.
int run_command_line(std::vector<std::string> args);

// Ends the process with `status`, its streams flushed and no static destructor run (app/main.cpp says why).
[[noreturn]] void end_process(int status);

}  // namespace attnscope
