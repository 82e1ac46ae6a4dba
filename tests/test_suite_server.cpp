// The test suite's own server (tests/suite_server.cpp) and client: the socket lives in a private folder
// of the user's, a server that cannot listen there fails (ctest's setup then fails instead of suites
// passing unrun), and no other local user can reach the server or stand in for it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/suite_client/suite_protocol.h"

namespace attnscope {
namespace test_suite_server {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

std::string self() { return fs::read_symlink("/proc/self/exe").string(); }

// A fresh folder of this test's, mode 0700.
fs::path private_folder(const std::string& name) {
  std::string pattern = (fs::temp_directory_path() / ("attnscope-suite-test-" + name + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// The exit status of a shell command line, its errors in `errors`.
int shell(const std::string& command, const fs::path& errors) {
  const int status = std::system((command + " 2> '" + errors.string() + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(SuiteServer, TheSocketLivesInAPrivateFolderOfTheUsers) {
  std::string why;
  const std::string path = private_socket_path("check.sock", why);
  ASSERT_FALSE(path.empty()) << why;
  const std::string folder = "/tmp/attnscope-suites-" + std::to_string(::geteuid());
  EXPECT_EQ(path, folder + "/check.sock");
  struct stat status {};
  ASSERT_EQ(::lstat(folder.c_str(), &status), 0);
  EXPECT_TRUE(S_ISDIR(status.st_mode));
  EXPECT_EQ(status.st_uid, ::geteuid());
  EXPECT_EQ(status.st_mode & 0777, 0700u);
}

// A folder others can enter is refused by the server (exit 1, nothing bound) and by the client (exit 1,
// the command not run).
TEST(SuiteServer, AFolderOpenToOthersIsRefused) {
  const fs::path folder = private_folder("open");
  ::chmod(folder.c_str(), 0755);
  const fs::path socket = folder / "s.sock", errors = folder / "errors.txt", marker = folder / "ran";
  EXPECT_EQ(shell("'" + self() + "' --serve-suites '" + socket.string() + "'", errors), 1);
  EXPECT_NE(contents(errors).find("is not a private folder of this user"), std::string::npos) << contents(errors);
  EXPECT_FALSE(fs::exists(socket));
  EXPECT_EQ(shell(std::string("'") + ATTNSCOPE_SUITE_CLIENT + "' '" + socket.string() + "' /bin/sh -c 'touch " +
                      marker.string() + "'",
                  errors),
            1);
  EXPECT_FALSE(fs::exists(marker)) << "the client ran a command beside a socket others could have placed";
  fs::remove_all(folder);
}

// A socket path the server cannot bind fails the server instead of leaving every suite to pass unserved.
TEST(SuiteServer, AFailedBindIsFatal) {
  const fs::path folder = private_folder("bind");
  const fs::path socket = folder / "s.sock", errors = folder / "errors.txt";
  fs::create_directory(socket);  // something that is not a socket, and that unlink cannot remove
  EXPECT_EQ(shell("'" + self() + "' --serve-suites '" + socket.string() + "'", errors), 1);
  EXPECT_NE(contents(errors).find("cannot listen on"), std::string::npos) << contents(errors);
  fs::remove_all(folder);
}

// Run as another user, a process can neither connect to a server in the user's private folder nor
// have its own folder taken for the user's.
TEST(SuiteServer, AnotherUserCanNeitherReachNorImpersonateTheServer) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const fs::path folder = private_folder("users");
  const fs::path socket = folder / "s.sock", errors = folder / "errors.txt";
  ASSERT_EQ(shell("'" + self() + "' --serve-suites '" + socket.string() + "'", errors), 0) << contents(errors);
  ASSERT_TRUE(fs::exists(socket));
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(2);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, socket.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ::_exit(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 ? 1 : 0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "another user connected to the suite server";
  EXPECT_EQ(shell(std::string("'") + ATTNSCOPE_SUITE_CLIENT + "' '" + socket.string() + "' --shutdown", errors), 0);

  // A folder another user made (and could have put a server in) is not the user's.
  const fs::path theirs = private_folder("theirs"), marker = theirs / "ran";
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(shell(std::string("'") + ATTNSCOPE_SUITE_CLIENT + "' '" + (theirs / "s.sock").string() +
                      "' /bin/sh -c 'touch " + marker.string() + "'",
                  errors),
            1);
  EXPECT_NE(contents(errors).find("owner uid 65534"), std::string::npos) << contents(errors);
  EXPECT_FALSE(fs::exists(marker));
  fs::remove_all(theirs);
  fs::remove_all(folder);
}

}  // namespace test_suite_server
}  // namespace attnscope
