// The suite server's request header, sent by tests/suite_client/suite_client.cpp and received by
// tests/suite_server.cpp alike: a 4-byte length of the body that follows, with the client's
// standard input, output and error attached (SCM_RIGHTS). libc only: the client links nothing else.
#pragma once

#include <sys/socket.h>

#include <cstdint>

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

}  // namespace attnscope
