// What the figure tests share: a scratch folder per test (FigureTest) and a shell that returns the
// exit status.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_folder.h"

namespace attnscope {
namespace test_figures {

namespace fs = std::filesystem;

inline const std::string kModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

class FigureTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  std::vector<std::string> temporaries() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(folder_))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(entry.path());
    return found;
  }

  TestFolder scratch_{"figures"};
  const fs::path& folder_ = scratch_.path();
};

inline int shell(const std::string& command) {
  const int status = testing::cli_system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace test_figures
}  // namespace attnscope
