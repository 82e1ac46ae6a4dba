// The suite server's request header, sent by tests/suite_client/suite_client.cpp and received by
// tests/suite_server.cpp alike: a 4-byte length of the body that follows, with the client's
// standard input, output and error attached (SCM_RIGHTS). libc only: the client links nothing else.
#pragma once

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace attnscope {

struct StreamsMessage {
  static constexpr int kStreams = 3;
  uint32_t size = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(kStreams * sizeof(int))] = {};
  iovec vector{&size, sizeof size};
  msghdr message{};

  StreamsMessage() {
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
  }
  StreamsMessage(const StreamsMessage&) = delete;  // the header points into itself
  StreamsMessage& operator=(const StreamsMessage&) = delete;
};

// Where the suite server's socket lives: `name` (no '/') in the caller's private folder
// /tmp/attnscope-suites-UID, made mode 0700 when missing; or `name` itself when it is a path, in a
// folder that must already be private. Empty, with the reason in `why`, when the folder is a link,
// not a folder, another user's, or open to others: a socket there would let another local user
// answer for the suites or receive their streams and environment.
inline std::string private_socket_path(const std::string& name, std::string& why) {
  const bool given_path = name.find('/') != std::string::npos;
  const std::string folder =
      given_path ? name.substr(0, name.rfind('/')) : "/tmp/attnscope-suites-" + std::to_string(::geteuid());
  if (!given_path && ::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    why = "cannot make " + folder + ": " + std::strerror(errno);
    return "";
  }
  struct stat status {};
  if (::lstat(folder.c_str(), &status) != 0) {
    why = "cannot read " + folder + ": " + std::strerror(errno);
    return "";
  }
  if (!S_ISDIR(status.st_mode) || status.st_uid != ::geteuid() || (status.st_mode & 077) != 0) {
    why = folder + " is not a private folder of this user (" +
          (S_ISDIR(status.st_mode)
               ? "owner uid " + std::to_string(status.st_uid) + ", mode " + std::to_string((status.st_mode >> 6) & 7) +
                     std::to_string((status.st_mode >> 3) & 7) + std::to_string(status.st_mode & 7)
               : std::string("not a folder")) +
          "): remove it, or set ATTNSCOPE_TESTS_EXEC_EACH=1 to run each suite in a process of its own";
    return "";
  }
  return given_path ? name : folder + "/" + name;
}

// The user id of the process at the other end of a connected Unix socket, or -1.
inline long peer_user(int connection) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
  return long(credentials.uid);
}

}  // namespace attnscope
