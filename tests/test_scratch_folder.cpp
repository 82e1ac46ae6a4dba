// Commands' temporary folders (core/scratch_folder.h): fresh, private, and gone afterwards, even when a
// guess of their name was planted first (bench's and device-check's folders were once named by PID).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>

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

}  // namespace test_scratch_folder
}  // namespace attnscope
