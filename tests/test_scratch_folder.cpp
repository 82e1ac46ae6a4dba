// Commands' temporary folders (core/scratch_folder.h): fresh, private, and gone afterwards, even when a
// guess of their name was planted first (bench's and device-check's folders were once named by PID).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/atomic_bundle.h"
#include "core/output_files.h"
#include "core/scratch_folder.h"

namespace attnscope {
namespace test_scratch_folder {

namespace fs = std::filesystem;

TEST(ScratchFolder, IsFreshPrivateAndRemovedWithItsContents) {
  // What the old name would have been, planted as another user's link: never used.
  const fs::path planted = fs::temp_directory_path() / ("attnscope-bench-" + std::to_string(::getpid()));
  fs::remove_all(planted);
  fs::create_directory_symlink("/", planted);
  fs::path kept;
  {
    const ScratchFolder first("attnscope-bench"), second("attnscope-bench");
    kept = first.path();
    EXPECT_NE(first.path(), second.path());
    EXPECT_NE(first.path(), planted);
    struct stat status {};
    ASSERT_EQ(::lstat(first.path().c_str(), &status), 0);
    EXPECT_TRUE(S_ISDIR(status.st_mode));
    EXPECT_EQ(status.st_mode & 0777, 0700u);
    EXPECT_EQ(status.st_uid, ::geteuid());
    std::ofstream(first.path() / "weights.safetensors") << "x";
    fs::create_directories(first.path() / "run" / "deep");
  }
  EXPECT_FALSE(fs::exists(kept));
  EXPECT_TRUE(fs::is_symlink(planted)) << "the planted link was left alone";
  fs::remove(planted);
}

// An output set with NaN or Inf in an array is refused before anything is written, naming the file.
TEST(OutputFilesGuard, NonFiniteArraysAreRefusedNamingThem) {
  const ScratchFolder folder("attnscope-output-guard");
  OutputFiles files((folder.path() / "out").string(), false);
  files.add_npy("fine.npy", torch::ones({3}));
  files.add_npy("integers.npy", torch::arange(4));
  try {
    files.add_npy("relevance.npy", torch::tensor({1.0f, NAN, INFINITY}));
    ADD_FAILURE() << "a NaN map was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("relevance.npy would hold 2 of 3 values that are not finite"),
              std::string::npos)
        << e.what();
  }
  files.write();
  EXPECT_TRUE(fs::exists(folder.path() / "out" / "fine.npy"));
  EXPECT_FALSE(fs::exists(folder.path() / "out" / "relevance.npy"));
}

// SIGTERM while a bundle streams its files: the staging folder is removed before the signal ends the
// process (issue 60: a streamed matrix left 300-600 MB in a hidden staging folder).
TEST(OutputFilesGuard, ASignalWhileStagingLeavesNothingBehind) {
  const ScratchFolder folder("attnscope-bundle-signal");
  const fs::path out = folder.path() / "out";
  const pid_t child = ::fork();
  if (child == 0) {
    BundleFile matrix;
    matrix.path = "matrix.npy";
    matrix.produce = [](const std::function<void(const std::string&)>& write) {
      write(std::string(1 << 20, 'a'));
      ::raise(SIGTERM);  // as `kill` would, between two pieces
      write(std::string(1 << 20, 'b'));
    };
    try {
      write_bundle_atomically(out.string(), "run", {matrix}, false);
    } catch (...) {
      ::_exit(3);  // the signal must end the process, not an error
    }
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  ASSERT_TRUE(fs::exists(out));
  for (const auto& entry : fs::directory_iterator(out)) ADD_FAILURE() << "left behind: " << entry.path();
}

}  // namespace test_scratch_folder
}  // namespace attnscope
