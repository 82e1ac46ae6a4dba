// Commands' temporary folders (core/scratch_folder.h): fresh, private, and gone afterwards, even when a
// guess of their name was planted first (bench's and device-check's folders were once named by PID).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace test_scratch_folder
}  // namespace attnscope
