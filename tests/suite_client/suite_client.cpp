// attnscope_suite_client SOCKET BINARY [ARGS...]: runs `BINARY ARGS...` as a child of the test
// binary's suite server listening on SOCKET (tests/suite_server.cpp says why and how), with this
// process's working directory, environment and standard streams, and ends as that child ended.
// Where no server answers, or ATTNSCOPE_TESTS_EXEC_EACH=1, it becomes `BINARY ARGS...` itself.
// SOCKET is a name in the user's private folder or a path in a private folder (suite_protocol.h);
// a folder open to others, or a server of another user, is refused.
// `attnscope_suite_client SOCKET --shutdown` ends the server. Links nothing but libc: its own start
// is what the server saves.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "suite_protocol.h"

extern char** environ;

namespace {

int connect_to(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) return -1;
  std::strcpy(address.sun_path, path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_request(int fd, const std::vector<std::string>& args) {
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return false;
  std::string body;
  const auto add = [&](const std::string& text) { body.append(text).push_back('\0'); };
  add(cwd);
  add(std::to_string(args.size()));
  for (const std::string& arg : args) add(arg);
  for (char** entry = environ; *entry; ++entry) add(*entry);

  attnscope::StreamsMessage header;
  header.size = uint32_t(body.size());
  cmsghdr* streams = CMSG_FIRSTHDR(&header.message);
  streams->cmsg_level = SOL_SOCKET;
  streams->cmsg_type = SCM_RIGHTS;
  streams->cmsg_len = CMSG_LEN(attnscope::StreamsMessage::kStreams * sizeof(int));
  const int standard_streams[attnscope::StreamsMessage::kStreams] = {0, 1, 2};
  std::memcpy(CMSG_DATA(streams), standard_streams, sizeof standard_streams);
  if (::sendmsg(fd, &header.message, 0) != ssize_t(sizeof header.size)) return false;
  for (size_t sent = 0; sent < body.size();) {
    const ssize_t wrote = ::write(fd, body.data() + sent, body.size() - sent);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    sent += size_t(wrote);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOCKET BINARY [ARGS...] | SOCKET --shutdown\n", argv[0]);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const bool shutdown = std::strcmp(argv[2], "--shutdown") == 0;
  const char* exec_each = std::getenv("ATTNSCOPE_TESTS_EXEC_EACH");
  const bool fresh = exec_each && std::strcmp(exec_each, "1") == 0;
  std::string why;
  const std::string path = fresh ? "" : attnscope::private_socket_path(argv[1], why);
  if (!fresh && path.empty()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
    return 1;
  }
  const int fd = fresh ? -1 : connect_to(path);
  if (fd >= 0 && attnscope::peer_user(fd) != long(::geteuid())) {
    std::fprintf(stderr, "%s: the suite server on %s is another user's (uid %ld): not sending it a suite\n", argv[0],
                 path.c_str(), attnscope::peer_user(fd));
    return 1;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  if (shutdown) args.insert(args.begin(), argv[0]);
  if (fd < 0 || !send_request(fd, args)) {
    if (shutdown) return 0;  // no server to end
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(argv[2], argv + 2);
    std::fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[2], std::strerror(errno));
    return 127;
  }
  std::string answer;
  char byte;
  for (;;) {
    const ssize_t got = ::read(fd, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == '\n') break;
    answer.push_back(byte);
  }
  int number = 0;
  if (std::sscanf(answer.c_str(), "exit %d", &number) == 1) return number;
  if (std::sscanf(answer.c_str(), "signal %d", &number) == 1) {
    std::fprintf(stderr, "%s: the suite's process ended by signal %d (%s)\n", argv[0], number, strsignal(number));
    ::signal(number, SIG_DFL);
    ::raise(number);
    return 128 + number;
  }
  std::fprintf(stderr, "%s: the suite server (%s) ended without an answer\n", argv[0], argv[1]);
  return 1;
}
