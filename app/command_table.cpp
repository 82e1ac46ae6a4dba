#include "app/commands.h"

namespace attnscope {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"run", "run one image through a model and write attention, matrices, overlays and a summary", run_command,
       run_syntax},
      {"analyze", "one analysis of one image (attribution, spectrum, f_p, representations, folder statistics, ...)",
       analyze_command, analyze_syntax},
      {"info", "print the architecture attnscope infers from a checkpoint", info_command, info_syntax},
      {"models", "list what the model caches on this machine hold and whether attnscope opens each", models_command,
       models_syntax},
      {"train", "train a demo model on the generated glyph task", train_command, train_syntax},
      {"train-sae", "train a sparse autoencoder on a demo model's residual stream over generated sign images",
       train_sae_command, train_sae_syntax},
      {"eval", "accuracy, attention focus and rank of demo models on held-out glyph images", eval_command, eval_syntax},
      {"export", "paper figures (PNG, SVG, PDF) with the data behind them, for an image or a folder", export_command,
       export_syntax},
      {"glyphs", "write images of the generated glyph task with labels and boxes", glyphs_command, glyphs_syntax},
      {"bench", "forward latency per variant against PyTorch eager on this machine", bench_command, bench_syntax},
      {"gui", "the live attention workbench (also what `attnscope` alone opens)", gui_command, gui_syntax},
      {"device-check", "parity of a device (cuda) against the CPU and its speed against eager PyTorch",
       device_check_command, device_check_syntax},
      {"fork-server", "run command lines read from stdin, each in a child forked from one loaded process",
       fork_server_command, fork_server_syntax},
      {"reference", "print the command reference as Markdown (docs/commands.md)", reference_command, reference_syntax},
  };
  return list;
}

}  // namespace attnscope
