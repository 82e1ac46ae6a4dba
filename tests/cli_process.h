// `attnscope ARGS...` as a child process for the tests, through one `attnscope fork-server` per
// test process (app/command_fork_server.cpp): the suite runs some 400 commands, and each fresh
// process would spend about a second of CPU loading LibTorch before `main`. The child runs what
// the executable runs after loading, in its own process: a crash is its signal, its memory is its
// own, its exit code is the command's. ATTNSCOPE_TESTS_EXEC_EACH=1 starts every command as a new
// process instead (the same results, and the check that they are).
#pragma once

#include <sys/resource.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnscope::testing {

struct CliRequest {
  CliRequest(std::vector<std::string> arguments, std::string out = "/dev/null", std::string err = "/dev/null")
      : args(std::move(arguments)), stdout_path(std::move(out)), stderr_path(std::move(err)) {}
  std::vector<std::string> args;  // after the program's name
  std::string stdout_path = "/dev/null";
  std::string stderr_path = "/dev/null";  // may be stdout_path: both into one file; empty: this process's
  rlim_t address_space_bytes = RLIM_INFINITY;
  std::vector<std::string> environment;  // NAME=value, over this process's environment
  bool fresh_process = false;            // a new process of its own even where the fork server runs
  bool on_display = false;               // under an X server of xvfb-run (kXvfbRun), as the workbench needs
};

// How the GUI tests start the workbench headless: `xvfb-run -a -s '-screen 0 1600x1000x24'`. Commands
// with on_display share one such server per test process (one at a time), as its fork server's children.
extern const std::vector<std::string> kXvfbRun;

struct CliOutcome {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;
  long peak_kilobytes = 0;  // the child's peak resident memory
  // As a shell reports it: the exit code, or 128 + the signal.
  int shell_code() const { return signal ? 128 + signal : exit_code; }
};

// Runs the command in the tests' working directory and current environment and waits for it.
CliOutcome run_cli_process(const CliRequest& request);

// std::system(line), with the same status, through the fork server where `line` is the attnscope
// binary (perhaps after kXvfbRun) with plain words and `> FILE`, `2> FILE`, `2>&1` (stdout redirected); other lines go
// to the shell.
int cli_system(const std::string& line);

// Such a line as a request; nothing for any other line.
std::optional<CliRequest> cli_shell_command(const std::string& line);

// The words of a shell command line that uses only plain words, single and double quotes and
// backslashes; nothing when it needs a shell (redirections, pipes, variables, globs, VAR=value
// prefixes...).
std::optional<std::vector<std::string>> plain_shell_words(const std::string& line);

}  // namespace attnscope::testing
