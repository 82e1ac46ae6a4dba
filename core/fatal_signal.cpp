#include "core/fatal_signal.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

namespace attnscope {

namespace {

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    default:
      return "SIGABRT";
  }
}

// Only async-signal-safe calls: write(2) and backtrace_symbols_fd (backtrace itself was called
// once before, so that loading libgcc's unwinder does not happen in here).
void report_fatal_signal(int signal_number) {
  const char intro[] = "\nattnscope: fatal signal: ";
  const char* name = signal_name(signal_number);
  (void)!write(STDERR_FILENO, intro, sizeof intro - 1);
  (void)!write(STDERR_FILENO, name, std::strlen(name));
  (void)!write(STDERR_FILENO, "\n", 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

void install_fatal_signal_report() {
  void* warm_up[1];
  backtrace(warm_up, 1);
  for (const int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(signal_number, report_fatal_signal);
}

}  // namespace attnscope
