// The test binary's main, and its suite server: ctest runs one process per GoogleTest suite
// (about 100), and each spent about a second of CPU loading LibTorch and its 290 libraries before
// its first test. `attnscope_tests --serve-suites SOCKET` loads them once, listens on SOCKET and
// forks a child per suite that tests/suite_client/suite_client.cpp asks for; the child is the
// process the suite would have been (the client's working directory, environment, standard
// streams and arguments), so ctest sees the same output and exit status.
//
// The socket sits in a private folder of the user's (mode 0700; suite_protocol.h), and the server
// answers only connections of its own user (SO_PEERCRED), the client only a server of its own user:
// no other local user can receive a suite's streams and environment, run code as its user, or
// answer "passed" for a suite that never ran. A server that cannot listen fails ctest's setup.
//
// The server computes nothing, so no OpenMP or LibTorch thread exists when it forks. It detaches
// (ctest's setup test returns once SOCKET listens), ends at the client's --shutdown (ctest's
// cleanup test) or after kIdleSeconds without a request, whichever comes first.
//
// Protocol, over a Unix stream socket: the client sends its stdin, stdout and stderr (SCM_RIGHTS)
// with a 4-byte length, then that many bytes of NUL-terminated strings: the working directory, the
// argument count, the arguments (the first is the binary's path), then the environment. A handler
// process forked per request forks the suite's child, waits for it, and answers "exit N\n" or
// "signal N\n"; when the client goes away first (ctest's timeout), it kills the child's process
// group.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/freed_memory.h"
#include "tests/suite_client/suite_protocol.h"

namespace {

constexpr int kIdleSeconds = 900;
constexpr uint32_t kMaxRequestBytes = 16u << 20;
std::string socket_path;  // the server's, for the handler that shuts it down

struct SuiteRequest {
  std::string cwd;
  std::vector<std::string> args, env;
  int fds[3] = {-1, -1, -1};
};

bool read_exactly(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, bytes, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= size_t(got);
  }
  return true;
}

// The request on `connection`, or false for a malformed one (the handler then just closes it).
bool receive_request(int connection, SuiteRequest& request) {
  attnscope::StreamsMessage header;
  ssize_t got;
  do got = ::recvmsg(connection, &header.message, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  while (got < 0 && errno == EINTR);
  const cmsghdr* streams = CMSG_FIRSTHDR(&header.message);
  const uint32_t size = header.size;
  if (got != ssize_t(sizeof size) || !streams || streams->cmsg_type != SCM_RIGHTS ||
      streams->cmsg_len != CMSG_LEN(attnscope::StreamsMessage::kStreams * sizeof(int)) || size == 0 ||
      size > kMaxRequestBytes)
    return false;
  std::memcpy(request.fds, CMSG_DATA(streams), sizeof request.fds);
  std::string body(size, '\0');
  if (!read_exactly(connection, body.data(), size) || body.back() != '\0') return false;
  std::vector<std::string> strings;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find('\0', at);
    strings.emplace_back(body, at, end - at);
    at = end + 1;
  }
  if (strings.size() < 2) return false;
  request.cwd = strings[0];
  const size_t count = std::strtoul(strings[1].c_str(), nullptr, 10);
  if (count == 0 || 2 + count > strings.size()) return false;
  request.args.assign(strings.begin() + 2, strings.begin() + 2 + long(count));
  request.env.assign(strings.begin() + 2 + long(count), strings.end());
  return true;
}

int run_suites(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// In the suite's child: become the process the client would have started, then run the tests.
[[noreturn]] void become_suite(SuiteRequest& request) {
  ::setpgid(0, 0);
  for (int stream = 0; stream < 3; ++stream) ::dup2(request.fds[stream], stream);  // dup2 clears CLOEXEC
  if (::chdir(request.cwd.c_str()) != 0) {
    std::fprintf(stderr, "suite server: cannot enter %s: %s\n", request.cwd.c_str(), std::strerror(errno));
    std::_Exit(1);
  }
  ::clearenv();
  for (std::string& entry : request.env) ::putenv(entry.data());  // lives until exit
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGCHLD, SIG_DFL);
  std::vector<char*> argv;
  for (std::string& arg : request.args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::exit(run_suites(int(request.args.size()), argv.data()));
}

// In the handler: run the suite's child, relay how it ended, kill it when the client goes away.
[[noreturn]] void handle(int connection) {
  ::signal(SIGCHLD, SIG_DFL);  // the server's SIG_IGN would make the child's status unavailable
  ::signal(SIGPIPE, SIG_IGN);
  SuiteRequest request;
  if (!receive_request(connection, request)) std::_Exit(1);
  if (request.args.size() == 2 && request.args[1] == "--shutdown") {
    ::unlink(socket_path.c_str());
    ::kill(::getppid(), SIGTERM);
    if (::write(connection, "exit 0\n", 7) < 0) std::_Exit(1);
    std::_Exit(0);
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(connection);
    become_suite(request);
  }
  for (const int fd : request.fds) ::close(fd);
  if (child < 0) std::_Exit(1);
  ::setpgid(child, child);  // also here: no window in which a kill of the group misses it
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    pollfd client{connection, POLLIN, 0};
    if (::poll(&client, 1, 100) > 0) {
      char byte;
      if (::recv(connection, &byte, 1, MSG_DONTWAIT) <= 0) {  // the client ended: so does its suite
        ::kill(-child, SIGKILL);
        ::waitpid(child, &status, 0);
        std::_Exit(0);
      }
    }
  }
  const std::string answer = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) + "\n"
                                                 : "exit " + std::to_string(WEXITSTATUS(status)) + "\n";
  if (::write(connection, answer.data(), answer.size()) < 0) std::_Exit(1);
  std::_Exit(0);
}

// Serves suites on `name` (tests/suite_client/suite_protocol.h: private_socket_path). Returns 1 with
// the reason when it cannot listen there (ctest's setup fails loudly, and no suite reports a pass
// it did not run); 0 without serving under ATTNSCOPE_TESTS_EXEC_EACH=1 (each suite starts a process
// of its own).
int serve_suites(const std::string& name) {
  const char* exec_each = std::getenv("ATTNSCOPE_TESTS_EXEC_EACH");
  if (exec_each && std::string(exec_each) == "1") return 0;
  std::string why;
  const std::string path = attnscope::private_socket_path(name, why);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    std::fprintf(stderr, "suite server: %s\n", path.empty() ? why.c_str() : ("socket path too long: " + path).c_str());
    return 1;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  socket_path = path;
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::unlink(path.c_str());  // a server of an earlier run (in this private folder) idles out on its own
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 16) != 0) {
    std::fprintf(stderr,
                 "suite server: cannot listen on %s (%s): set ATTNSCOPE_TESTS_EXEC_EACH=1 to run each suite in a "
                 "process of its own\n",
                 path.c_str(), std::strerror(errno));
    return 1;
  }
  // Listening before the parent returns: ctest's suites may connect as soon as setup ends.
  const pid_t daemon = ::fork();
  if (daemon < 0) {
    std::fprintf(stderr, "suite server: cannot fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (daemon > 0) return 0;
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR);
  for (int stream = 0; stream < 3; ++stream) ::dup2(null, stream);
  ::close(null);
  ::signal(SIGCHLD, SIG_IGN);  // handlers are reaped by the kernel
  for (;;) {
    pollfd listening{listener, POLLIN, 0};
    const int ready = ::poll(&listening, 1, kIdleSeconds * 1000);
    if (ready == 0) break;
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    if (attnscope::peer_user(connection) != long(::geteuid())) {  // only its own user's suites
      ::close(connection);
      continue;
    }
    const pid_t handler = ::fork();
    if (handler == 0) {
      ::close(listener);
      handle(connection);
    }
    ::close(connection);
  }
  ::unlink(path.c_str());
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  attnscope::keep_freed_memory_for_reuse();  // as attnscope's own main: the tests run its allocator policy
  if (argc == 3 && std::string(argv[1]) == "--serve-suites") return serve_suites(argv[2]);
  return run_suites(argc, argv);
}
