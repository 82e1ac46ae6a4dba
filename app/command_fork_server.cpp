// `attnscope fork-server`: command lines read from standard input, each run in a child forked from
// this process. Loading LibTorch and its 290 libraries costs about a second of CPU per process
// before `main`; a caller that runs hundreds of commands (the test suite does some 400) pays it once
// here instead of once per command. The child runs exactly what `attnscope ARGS...` runs after
// loading (run_command_line), with its own working directory, environment, output files and limits.
//
// Protocol: one JSON object per line in, one per line out, in order.
//   in:  {"args": ["run", "--model", "m.pth"], "cwd": "/dir", "env": ["NAME=value", ...],
//         "stdout": "out.txt", "stderr": "err.txt", "address_space_bytes": 6442450944}
//        Only "args" is required. "env" replaces the environment but for DISPLAY and XAUTHORITY
//        (the X server this process runs under, if any); LibTorch's and OpenMP's own variables
//        were read when this process started, so those keep their values at that time;
//        stdout defaults to /dev/null, stderr to this process's, and both may name one file;
//        stdin is /dev/null.
//   out: {"exit_code": 0, "peak_kilobytes": 201312} or {"signal": 11, "peak_kilobytes": ...},
//        or {"error": "..."} for a request it could not run.
// It ends at the end of its input. This process itself computes nothing: OpenMP's threads must not
// exist when it forks (a child would wait on them forever).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "core/json_checked.h"

namespace attnscope {

namespace {

// A request line holds a command line, its environment and paths: 16 MiB is far more than any needs,
// and a longer line is refused without being held.
constexpr size_t kMaxRequestBytes = size_t(16) << 20;

// The next line of `in` into `line`, at most `limit` bytes: false at the end of input; `too_long`
// when the line was longer (its rest is skipped, not kept).
bool read_bounded_line(std::istream& in, std::string& line, size_t limit, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buffer = in.rdbuf();
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty() || too_long;
    if (c == '\n') return true;
    if (line.size() < limit)
      line.push_back(char(c));
    else
      too_long = true;
  }
}

struct ForkRequest {
  std::vector<std::string> args;
  std::string cwd, stdout_path = "/dev/null", stderr_path;
  std::vector<std::string> env;
  bool replace_env = false;
  rlim_t address_space_bytes = RLIM_INFINITY;
};

ForkRequest parse_request(const std::string& line) {
  const nlohmann::json request = parse_json_checked(line, "the request line");
  if (!request.is_object()) throw std::invalid_argument("a request is a JSON object with \"args\"");
  auto text = [&](const char* key, const std::string& fallback) {
    if (!request.contains(key)) return fallback;
    if (!request[key].is_string()) throw std::invalid_argument(std::string("\"") + key + "\" must be a string");
    return request[key].get<std::string>();
  };
  auto texts = [&](const char* key) {
    const nlohmann::json& list = request[key];
    std::vector<std::string> out;
    if (!list.is_array()) throw std::invalid_argument(std::string("\"") + key + "\" must be an array of strings");
    for (const auto& item : list) {
      if (!item.is_string()) throw std::invalid_argument(std::string("\"") + key + "\" must be an array of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  };
  if (!request.contains("args")) throw std::invalid_argument("a request needs \"args\", an array of strings");
  for (const auto& [key, value] : request.items())
    if (key != "args" && key != "cwd" && key != "stdout" && key != "stderr" && key != "env" &&
        key != "address_space_bytes")
      throw std::invalid_argument("a request has no \"" + excerpt(key, 40) +
                                  "\" (it takes args, cwd, stdout, stderr, env, address_space_bytes)");
  ForkRequest parsed;
  parsed.args = texts("args");
  // A child holds a copy of this process's buffered input: a fork server in it would run the
  // requests queued behind its own a second time.
  if (!parsed.args.empty() && parsed.args.front() == "fork-server")
    throw std::invalid_argument("a fork server does not run another fork server (it would replay the queued requests)");
  parsed.cwd = text("cwd", "");
  parsed.stdout_path = text("stdout", "/dev/null");
  parsed.stderr_path = text("stderr", "");
  if (request.contains("env")) {
    parsed.env = texts("env");
    for (const std::string& variable : parsed.env)
      if (variable.find('=') == std::string::npos || variable.front() == '=')
        throw std::invalid_argument("\"env\" entries are NAME=value, got '" + excerpt(variable, 40) + "'");
    parsed.replace_env = true;
  }
  if (request.contains("address_space_bytes")) {
    const nlohmann::json& bytes = request["address_space_bytes"];
    // Below 64 MB no LibTorch process starts: its children ended as a bare "out of memory".
    if (!bytes.is_number_unsigned() || bytes.get<uint64_t>() < (uint64_t(64) << 20))
      throw std::invalid_argument("\"address_space_bytes\" must be a whole number of bytes, at least 67108864 (64 MB)");
    parsed.address_space_bytes = bytes.get<rlim_t>();
  }
  return parsed;
}

// Points `target` (1 or 2) at `path`, truncated; the same path for both shares one open file, as
// `> f 2>&1` does. False when it cannot be opened.
bool redirect(int target, const std::string& path, const std::string& other_path) {
  if (target == STDERR_FILENO && path == other_path) return ::dup2(STDOUT_FILENO, STDERR_FILENO) >= 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ::dup2(fd, target) >= 0;
  ::close(fd);
  return ok;
}

// In the child: everything the request sets, then the command. Never returns. The working
// directory first, so that relative output paths are relative to it, as for `cd DIR && cmd > FILE`.
[[noreturn]] void run_child(ForkRequest& request) {
  if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
    std::cerr << "attnscope fork-server: cannot enter '" << request.cwd << "': " << std::strerror(errno) << "\n";
    std::_Exit(127);
  }
  const int null = ::open("/dev/null", O_RDONLY);
  ::dup2(null, STDIN_FILENO);
  // stderr first where it is a file of its own, so that a stdout that cannot be opened is said in it.
  const bool own_stderr = !request.stderr_path.empty() && request.stderr_path != request.stdout_path;
  auto open_or_exit = [](int target, const std::string& path, const std::string& other) {
    if (redirect(target, path, other)) return;
    std::cerr << "attnscope fork-server: cannot open the request's " << (target == STDOUT_FILENO ? "stdout" : "stderr")
              << " file '" << excerpt(path) << "': " << std::strerror(errno) << "\n";
    std::_Exit(127);
  };
  if (own_stderr) open_or_exit(STDERR_FILENO, request.stderr_path, {});
  open_or_exit(STDOUT_FILENO, request.stdout_path, {});
  if (!own_stderr && !request.stderr_path.empty())
    open_or_exit(STDERR_FILENO, request.stderr_path, request.stdout_path);
  // The X server this process runs under (xvfb-run's, for the workbench's tests) stays the child's;
  // putenv keeps pointers, so the strings live as long as the child.
  std::vector<std::string> display;
  if (request.replace_env) {
    for (const char* name : {"DISPLAY", "XAUTHORITY"})
      if (const char* value = std::getenv(name)) display.push_back(std::string(name) + "=" + value);
    ::clearenv();
    for (std::string& variable : request.env) ::putenv(variable.data());  // the strings outlive the child
    for (std::string& variable : display) ::putenv(variable.data());
  }
  if (request.address_space_bytes != RLIM_INFINITY) {
    const rlimit bound{request.address_space_bytes, request.address_space_bytes};
    ::setrlimit(RLIMIT_AS, &bound);
  }
  end_process(run_command_line(request.args));
}

nlohmann::json run_forked(ForkRequest& request) {
  std::cout.flush();  // nothing buffered may be written twice
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child < 0) return {{"error", std::string("fork failed: ") + std::strerror(errno)}};
  if (child == 0) run_child(request);
  int status = 0;
  rusage usage{};
  while (::wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  nlohmann::json reply = {{"peak_kilobytes", usage.ru_maxrss}};
  if (WIFSIGNALED(status))
    reply["signal"] = WTERMSIG(status);
  else
    reply["exit_code"] = WEXITSTATUS(status);
  return reply;
}

}  // namespace

CommandSyntax fork_server_syntax() {
  return {
      "attnscope fork-server < requests.jsonl",
      {},
      {},
      "Reads one JSON request per line, {\"args\": [COMMAND, ARG...], \"cwd\": DIR, \"env\": [\"NAME=value\", ...], "
      "\"stdout\": FILE, \"stderr\": FILE, \"address_space_bytes\": N} (only args required), runs each in a child "
      "forked from this process, and answers a line each: {\"exit_code\": N, \"peak_kilobytes\": K} or "
      "{\"signal\": S, ...}. LibTorch is loaded once, not once per command (about a second of CPU each); "
      "OpenMP's and LibTorch's environment variables keep the values this process started with."};
}

int fork_server_command(const Args& args) {
  const auto parsed = parse_or_print_help(args, fork_server_syntax());
  if (!parsed) return 0;
  std::string line;
  bool too_long = false;
  while (read_bounded_line(std::cin, line, kMaxRequestBytes, too_long)) {
    if (line.empty() && !too_long) continue;
    nlohmann::json reply;
    try {
      if (too_long)
        throw std::invalid_argument("a request line is at most " + std::to_string(kMaxRequestBytes >> 20) +
                                    " MiB; this one was longer and was skipped");
      ForkRequest request = parse_request(line);
      reply = run_forked(request);
    } catch (const std::exception& e) {
      reply = {{"error", e.what()}};
    }
    std::cout << reply.dump() << "\n" << std::flush;
  }
  return 0;
}

}  // namespace attnscope
