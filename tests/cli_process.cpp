#include "cli_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

extern char** environ;

namespace attnscope::testing {

namespace {

// This process's environment with the request's variables set over it.
std::vector<std::string> child_environment(const CliRequest& request) {
  std::vector<std::string> variables;
  const auto overridden = [&](const std::string& variable) {
    const std::string name = variable.substr(0, variable.find('=') + 1);
    for (const std::string& set : request.environment)
      if (set.compare(0, name.size(), name) == 0) return true;
    return false;
  };
  for (char** variable = environ; *variable; ++variable)
    if (!overridden(*variable)) variables.emplace_back(*variable);
  variables.insert(variables.end(), request.environment.begin(), request.environment.end());
  return variables;
}

// Fork and exec, as the shell would run `[xvfb-run ...] attnscope ARGS > out 2> err < /dev/null`.
CliOutcome exec_cli(const CliRequest& request) {
  std::vector<std::string> args = request.args;
  args.insert(args.begin(), ATTNSCOPE_CLI);
  if (request.on_display) args.insert(args.begin(), kXvfbRun.begin(), kXvfbRun.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> variables = child_environment(request);
  std::vector<char*> envp;
  for (auto& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::cout.flush();  // nothing buffered may be written twice
  const pid_t child = ::fork();
  if (child == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    const int out = ::open(request.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    if (request.stderr_path == request.stdout_path) {
      ::dup2(out, STDERR_FILENO);
    } else if (!request.stderr_path.empty()) {
      const int err = ::open(request.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, STDERR_FILENO);
    }
    if (request.address_space_bytes != RLIM_INFINITY) {
      const rlimit bound{request.address_space_bytes, request.address_space_bytes};
      ::setrlimit(RLIMIT_AS, &bound);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  while (::wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  CliOutcome outcome;
  if (WIFSIGNALED(status))
    outcome.signal = WTERMSIG(status);
  else
    outcome.exit_code = WEXITSTATUS(status);
  outcome.peak_kilobytes = usage.ru_maxrss;
  return outcome;
}

// One `attnscope fork-server` for this process, started at the first command and ended by the end
// of its input when this process exits. A socket, not a pipe: a write to a server that died is an
// error here, not a SIGPIPE.
class ForkServer {
 public:
  // `launcher` (a program and its arguments) runs `attnscope fork-server`, or nothing does.
  explicit ForkServer(std::vector<std::string> launcher) : launcher_(std::move(launcher)) {}
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;
  // The end of its input ends the server; waiting for it keeps its CPU time in this process's
  // children's (what `time ctest` reports).
  ~ForkServer() {
    if (socket_ < 0) return;
    ::shutdown(socket_, SHUT_RDWR);  // the end even where a forked child still holds the socket
    ::close(socket_);
    ::waitpid(pid_, nullptr, 0);
  }

  // The server's reply, or nothing when there is no working server.
  std::optional<nlohmann::json> ask(const nlohmann::json& request) {
    if (broken_) return std::nullopt;
    if (socket_ < 0 && !start()) {
      std::cerr << "cli_process: cannot start `attnscope fork-server` (" << std::strerror(errno)
                << "); every command starts as a process of its own\n";
      broken_ = true;
      return std::nullopt;
    }
    const std::string line = request.dump() + "\n";
    for (size_t sent = 0; sent < line.size();) {
      const ssize_t n = ::send(socket_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return lost();
      sent += size_t(n);
    }
    size_t end;
    while ((end = pending_.find('\n')) == std::string::npos) {
      char buffer[4096];
      const ssize_t n = ::recv(socket_, buffer, sizeof buffer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return lost();
      pending_.append(buffer, size_t(n));
    }
    const std::string reply = pending_.substr(0, end);
    pending_.erase(0, end + 1);
    return nlohmann::json::parse(reply);
  }

 private:
  bool start() {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
    std::vector<std::string> args = launcher_;
    args.insert(args.end(), {ATTNSCOPE_CLI, "fork-server"});
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int failed = ::posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(ends[1]);
    if (failed) {
      ::close(ends[0]);
      return false;
    }
    socket_ = ends[0];
    return true;
  }

  std::optional<nlohmann::json> lost() {
    std::cerr << "cli_process: the fork server (pid " << pid_ << ") stopped answering; commands start as "
              << "processes of their own from here\n";
    ::close(socket_);
    ::waitpid(pid_, nullptr, 0);
    socket_ = -1;
    broken_ = true;
    return std::nullopt;
  }

  std::vector<std::string> launcher_;
  int socket_ = -1;
  pid_t pid_ = -1;
  std::string pending_;
  bool broken_ = false;
};

bool exec_each() {
  const char* setting = std::getenv("ATTNSCOPE_TESTS_EXEC_EACH");
  return setting && std::string(setting) == "1";
}

}  // namespace

const std::vector<std::string> kXvfbRun = {"xvfb-run", "-a", "-s", "-screen 0 1600x1000x24"};

CliOutcome run_cli_process(const CliRequest& request) {
  static ForkServer plain({}), on_display(kXvfbRun);
  ForkServer& server = request.on_display ? on_display : plain;
  if (request.fresh_process || exec_each()) return exec_cli(request);
  nlohmann::json message = {{"args", request.args},
                            {"cwd", std::filesystem::current_path().string()},
                            {"env", child_environment(request)},
                            {"stdout", request.stdout_path},
                            {"stderr", request.stderr_path}};
  if (request.address_space_bytes != RLIM_INFINITY) message["address_space_bytes"] = request.address_space_bytes;
  std::cout.flush();
  const std::optional<nlohmann::json> reply = server.ask(message);
  if (!reply) return exec_cli(request);
  if (reply->contains("error"))
    throw std::runtime_error("attnscope fork-server refused a request: " + reply->at("error").get<std::string>());
  CliOutcome outcome;
  outcome.peak_kilobytes = reply->at("peak_kilobytes").get<long>();
  if (reply->contains("signal"))
    outcome.signal = reply->at("signal").get<int>();
  else
    outcome.exit_code = reply->at("exit_code").get<int>();
  return outcome;
}

namespace {

struct ShellToken {
  std::string text;
  bool redirection = false;  // ">", "2>" or "2>&1"
};

// The words of `line` as the shell splits them, with redirections as tokens of their own where
// `redirections` allows them; nothing when anything else would need the shell.
std::optional<std::vector<ShellToken>> shell_tokens(const std::string& line, bool redirections) {
  std::vector<ShellToken> tokens;
  std::string word;
  bool in_word = false, quoted = false;
  const auto end_word = [&] {
    if (in_word) tokens.push_back({word, false});
    word.clear();
    in_word = quoted = false;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      end_word();
    } else if (c == '\'') {
      const size_t close = line.find('\'', i + 1);
      if (close == std::string::npos) return std::nullopt;
      word += line.substr(i + 1, close - i - 1);
      i = close;
      in_word = quoted = true;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '$' || line[i] == '`') return std::nullopt;
        if (line[i] == '\\' && i + 1 < line.size() && std::strchr("\"\\$`", line[i + 1])) ++i;
        word += line[i];
      }
      if (i == line.size()) return std::nullopt;
      in_word = quoted = true;
    } else if (c == '\\') {
      if (i + 1 == line.size()) return std::nullopt;
      word += line[++i];
      in_word = quoted = true;
    } else if (c == '>' && redirections) {
      const bool from_stderr = in_word && !quoted && word == "2";
      if (in_word && !quoted && !from_stderr && word.find_first_not_of("0123456789") == std::string::npos)
        return std::nullopt;  // another descriptor's redirection
      if (!from_stderr) end_word();
      word.clear();
      in_word = quoted = false;
      if (from_stderr && line.compare(i + 1, 2, "&1") == 0) {
        tokens.push_back({"2>&1", true});
        i += 2;
      } else {
        tokens.push_back({from_stderr ? "2>" : ">", true});
      }
    } else if (std::strchr("|&;<>()$`*?[]{}!\n", c) || ((c == '~' || c == '#') && !in_word)) {
      return std::nullopt;  // the shell's to interpret
    } else {
      word += c;
      in_word = true;
    }
  }
  end_word();
  return tokens;
}

}  // namespace

std::optional<std::vector<std::string>> plain_shell_words(const std::string& line) {
  const auto tokens = shell_tokens(line, false);
  if (!tokens) return std::nullopt;
  std::vector<std::string> words;
  for (const ShellToken& token : *tokens) words.push_back(token.text);
  return words;
}

std::optional<CliRequest> cli_shell_command(const std::string& line) {
  const auto tokens = shell_tokens(line, true);
  if (!tokens) return std::nullopt;
  CliRequest request({}, "", "");
  size_t i = 0;
  if (tokens->size() > kXvfbRun.size() && std::equal(kXvfbRun.begin(), kXvfbRun.end(), tokens->begin(),
                                                     [](const std::string& word, const ShellToken& token) {
                                                       return !token.redirection && token.text == word;
                                                     })) {
    request.on_display = true;
    i = kXvfbRun.size();
  }
  if (i == tokens->size() || (*tokens)[i].redirection || (*tokens)[i].text != ATTNSCOPE_CLI) return std::nullopt;
  ++i;
  for (; i < tokens->size() && !(*tokens)[i].redirection; ++i) request.args.push_back((*tokens)[i].text);
  for (; i < tokens->size(); ++i) {
    const std::string& op = (*tokens)[i].text;
    if (!(*tokens)[i].redirection) return std::nullopt;  // words after a redirection's target
    if (op == "2>&1") {
      if (request.stdout_path.empty()) return std::nullopt;  // the test's own stdout
      request.stderr_path = request.stdout_path;
      continue;
    }
    if (++i == tokens->size() || (*tokens)[i].redirection) return std::nullopt;
    (op == ">" ? request.stdout_path : request.stderr_path) = (*tokens)[i].text;
  }
  if (request.stdout_path.empty()) return std::nullopt;  // the server's stdout is its socket
  return request;
}

int cli_system(const std::string& line) {
  const std::optional<CliRequest> request = cli_shell_command(line);
  if (!request) return std::system(line.c_str());
  const CliOutcome outcome = run_cli_process(*request);
  return outcome.signal ? outcome.signal : W_EXITCODE(outcome.exit_code, 0);
}

}  // namespace attnscope::testing
