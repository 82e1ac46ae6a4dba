// What tests that write files share: a fresh folder named after the running test, files read and
// written whole, and the attnscope binary run with its exit status, stdout and stderr kept.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_process.h"

namespace attnscope {

// temp/attnscope-PREFIX-PID-TEST, empty when made and removed afterwards (kept when the test
// failed, to look at). The pid keeps concurrent runs (ctest -j, two build folders) apart.
class TestFolder {
 public:
  explicit TestFolder(const std::string& prefix) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    // Parameterised tests are named "Case/Param": no slash in a folder name.
    std::string name = test ? test->name() : "outside-a-test";
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = std::filesystem::temp_directory_path() /
            ("attnscope-" + prefix + "-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TestFolder() {
    std::error_code ignored;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_, ignored);
  }
  TestFolder(const TestFolder&) = delete;
  TestFolder& operator=(const TestFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  size_t entry_count() const {
    return size_t(std::distance(std::filesystem::directory_iterator(path_), std::filesystem::directory_iterator()));
  }

 private:
  std::filesystem::path path_;
};

inline std::string read_file_contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file_contents(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A CSV of numbers as rows of doubles; its header line into `header` when given.
inline std::vector<std::vector<double>> read_numeric_csv(const std::filesystem::path& path,
                                                         std::string* header = nullptr) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  if (header) *header = line;
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line)) {
    std::vector<double> row;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) row.push_back(std::stod(field));
    rows.push_back(row);
  }
  return rows;
}

inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  return nlohmann::json::parse(read_file_contents(path));
}

struct CommandRun {
  int exit_code = -1;    // -1 when it did not exit (killed by a signal)
  bool crashed = false;  // killed by a signal, or the shell's 128 + signal
  std::string out, err;
};

// `attnscope ARGUMENTS` (quoted by the caller as for the shell), its stdout and stderr kept in files
// of `folder`; through the fork server where the arguments are plain words (testing::cli_system).
inline CommandRun run_attnscope(const std::string& arguments, const std::filesystem::path& folder) {
  const std::string out = (folder / "stdout.txt").string(), err = (folder / "stderr.txt").string();
  const int status =
      testing::cli_system(std::string(ATTNSCOPE_CLI) + " " + arguments + " > '" + out + "' 2> '" + err + "'");
  CommandRun run;
  run.crashed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_file_contents(out);
  run.err = read_file_contents(err);
  return run;
}

}  // namespace attnscope
