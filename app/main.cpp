// attnscope's entry point: dispatches to a command; any error becomes one line on stderr and a
// non-zero exit code.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <c10/util/Exception.h>

#include "app/commands.h"
#include "core/excerpt.h"
#include "core/fatal_signal.h"

namespace attnscope {

namespace {

void print_usage() {
  std::cout << "usage: attnscope COMMAND [options]   (attnscope COMMAND --help for its options)\n\ncommands:\n";
  size_t width = 0;
  for (const auto& command : commands()) width = std::max(width, std::string(command.name).size() + 2);
  for (const auto& command : commands()) {
    std::string name = command.name;
    name.resize(width, ' ');
    std::cout << "  " << name << command.summary << "\n";
  }
}

int dispatch_command(const std::string& name, const Args& args) {
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
  std::string names;
  for (const auto& command : commands()) names += std::string(names.empty() ? "" : ", ") + command.name;
  std::cerr << "attnscope: unknown command '" << excerpt(name) << "': this build has " << names
            << " (see attnscope --help)\n";
  return 2;
}

// LibTorch's and OpenBLAS's OpenMP threads spin while they wait; whenever another process or
// thread wants a core, small matrix products then run up to 100x slower. libgomp reads
// OMP_WAIT_POLICY once, in its constructor, from the environment the process started with (a
// setenv before it is undone by the C library's own initialiser), so without the variable the
// process starts again with OMP_WAIT_POLICY=PASSIVE added. This runs from the executable's
// .preinit_array, before any library's initialiser: the libraries are mapped but LibTorch's
// operator registration has not run, so the first start costs the loading only (a re-exec from
// main paid for both, about 0.6 s). An environment too large for the table is left as it is.
void passive_openmp_wait(int, char** argv, char** envp) {
  static char setting[] = "OMP_WAIT_POLICY=PASSIVE";
  static char* environment[4096];
  if (!envp) return;
  size_t count = 0;
  for (; envp[count]; ++count) {
    if (std::strncmp(envp[count], "OMP_WAIT_POLICY=", 16) == 0) return;
    if (count + 2 >= sizeof environment / sizeof *environment) return;
    environment[count] = envp[count];
  }
  environment[count] = setting;
  environment[count + 1] = nullptr;
  execve("/proc/self/exe", argv, environment);  // returns only on failure; then run as we are
}
__attribute__((section(".preinit_array"), used)) void (*kPassiveOpenmpWait)(int, char**, char**) = passive_openmp_wait;

}  // namespace

int run_command_line(std::vector<std::string> args) {
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
  return dispatch_command(name, args);
}

// Ends the process without static destructors. LibTorch tears its CUDA state down in static
// destructors whose order can crash once the work is done (pytorch/pytorch#36408, #17658: handle
// pools and cuDNN destroyed after the driver unloaded); on an H200 with LibTorch 2.11 device-check
// died so, after its last table was written. Every command has written and closed its files before
// it returns, so nothing is lost by skipping them: the streams are flushed here.
[[noreturn]] void end_process(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace attnscope

int main(int argc, char** argv) {
  attnscope::install_fatal_signal_report();
  attnscope::end_process(attnscope::run_command_line(std::vector<std::string>(argv + 1, argv + argc)));
}
