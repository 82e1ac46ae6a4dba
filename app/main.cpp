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
#include "core/freed_memory.h"
#include "core/torch_error.h"

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
      std::cerr << "attnscope " << name << ": error: " << torch_error_text(e) << "\n";
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

// How LibTorch's and OpenBLAS's OpenMP threads wait between parallel regions. libgomp's default
// spins about 3 ms before sleeping, and ACTIVE forever: whenever another process or thread wants a
// core, small matrix products then run up to 100x slower, and an idle workbench burns a core with
// ACTIVE. PASSIVE sleeps at once, and every region pays for waking the team (a CPU forward has about
// 35). A bounded spin of 10000 rounds (about 0.1 ms) keeps the team hot between one forward's
// regions and asleep when idle: DeiT-Tiny 21.9 against 27.5 ms passive, DeiT-Small 68.7 against 73.0,
// the workbench idle at 0% of a core (docs/speed.md, "Waiting threads"); with a busy process on one of
// two cores a forward pays for it (70 against 48 ms), where ACTIVE stays unbounded.
//
// libgomp reads the variables once, in its constructor, from the environment the process started
// with (a setenv before it is undone by the C library's own initialiser), so without
// OMP_WAIT_POLICY the process starts again with OMP_WAIT_POLICY=PASSIVE and, unless the caller set
// one, GOMP_SPINCOUNT=10000 (a spin count overrides the policy's own). This runs from the
// executable's .preinit_array, before any library's initialiser: the libraries are mapped but
// LibTorch's operator registration has not run, so the first start costs the loading only (a
// re-exec from main paid for both, about 0.6 s). An environment too large for the table is left
// as it is.
void bounded_openmp_wait(int, char** argv, char** envp) {
  static char policy[] = "OMP_WAIT_POLICY=PASSIVE";
  static char spin[] = "GOMP_SPINCOUNT=10000";
  static char* environment[4096];
  if (!envp) return;
  size_t count = 0;
  bool has_spin = false;
  for (; envp[count]; ++count) {
    if (std::strncmp(envp[count], "OMP_WAIT_POLICY=", 16) == 0) return;
    if (std::strncmp(envp[count], "GOMP_SPINCOUNT=", 15) == 0) has_spin = true;
    if (count + 3 >= sizeof environment / sizeof *environment) return;
    environment[count] = envp[count];
  }
  environment[count++] = policy;
  if (!has_spin) environment[count++] = spin;
  environment[count] = nullptr;
  execve("/proc/self/exe", argv, environment);  // returns only on failure; then run as we are
}
__attribute__((section(".preinit_array"), used)) void (*kBoundedOpenmpWait)(int, char**, char**) = bounded_openmp_wait;

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
  attnscope::keep_freed_memory_for_reuse();
  attnscope::install_fatal_signal_report();
  attnscope::end_process(attnscope::run_command_line(std::vector<std::string>(argv + 1, argv + argc)));
}
