// The commands of the engine-only build (ATTNSCOPE_ENGINE_ONLY): those that need neither OpenCV,
// cairo nor the GUI libraries, for a machine that has only LibTorch (scripts/device_check.sh).
#include "app/commands.h"

namespace attnscope {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"info", "print the architecture attnscope infers from a checkpoint", info_command, info_syntax},
      {"models", "list what the model caches on this machine hold and whether attnscope opens each", models_command,
       models_syntax},
      {"run", "run one image through a model and write attention, matrices, overlays and a summary", run_command,
       run_syntax},
      {"analyze", "one analysis of one image (attribution, spectrum, f_p, representations, folder statistics, ...)",
       analyze_command, analyze_syntax},
      {"bench", "forward latency per variant against PyTorch eager on this machine", bench_command, bench_syntax},
      {"device-check", "parity of a device (cuda) against the CPU and its speed against eager PyTorch",
       device_check_command, device_check_syntax},
      {"fork-server", "run command lines read from stdin, each in a child forked from one loaded process",
       fork_server_command, fork_server_syntax},
  };
  return list;
}

}  // namespace attnscope
