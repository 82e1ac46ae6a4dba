// `attnscope device-check` end to end on the CPU, as scripts/device_check.sh --rehearse runs it: the
// parity table over checkpoints of three families (every variant each takes), its JSON, and a model
// that cannot load failing the check rather than vanishing from the table. (The same run against CUDA
// happens on a GPU machine only; its tables are in the README.)
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "models/attention_settings.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;

const fs::path kData = ATTNSCOPE_TEST_DATA_DIR;

void add_model(const fs::path& models, const std::string& fixture) {
  fs::copy(kData / fixture, models / fs::path(fixture).filename());
}

TEST(DeviceCheck, ParityTableCoversEveryVariantOfEveryModel) {
  TestFolder folder("device-check");
  const fs::path models = folder.path() / "models";
  fs::create_directories(models);
  add_model(models, "parity_cases/vit_softmax.safetensors");
  add_model(models, "hier_cases/swin_a.safetensors");
  add_model(models, "part2_cases/care_a.safetensors");
  const std::string report = folder.file("check.json");
  const CommandRun run = run_attnscope(
      "device-check --device cpu --python none --models '" + models.string() + "' --json '" + report + "'",
      folder.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("every parity row passed"), std::string::npos) << run.out;
  const nlohmann::json json = read_json_file(report);
  EXPECT_EQ(json.at("device"), "cpu");
  EXPECT_FALSE(json.contains("bench"));  // --python none
  std::set<std::string> families;
  int passed = 0;
  for (const auto& row : json.at("parity")) {
    families.insert(row.at("family").get<std::string>());
    const std::string outcome = row.at("outcome");
    if (outcome.rfind("refused", 0) == 0) continue;
    ASSERT_EQ(outcome, "pass") << row.dump();
    ++passed;
    // The CPU against itself: the same kernels in the same order give the same bits.
    EXPECT_EQ(row.at("logits_error").get<double>(), 0.0) << row.dump();
    EXPECT_EQ(row.at("qkv_error").get<double>(), 0.0) << row.dump();
    EXPECT_GT(row.at("layers").get<int>(), 0) << row.dump();
    EXPECT_GT(row.at("tolerance").get<double>(), 0.0) << row.dump();
  }
  // Native plus every swap for each model; the ViT takes every swap.
  EXPECT_EQ(json.at("parity").size(), 3u * enum_entries<Variant>().size());
  EXPECT_GE(passed, 7);
  EXPECT_EQ(families.size(), 3u);
}

TEST(DeviceCheck, AModelThatCannotLoadFailsTheCheck) {
  TestFolder folder("device-check");
  const fs::path models = folder.path() / "models";
  fs::create_directories(models);
  add_model(models, "parity_cases/vit_softmax.safetensors");
  write_file_contents(models / "truncated.safetensors", "{not a checkpoint");
  const CommandRun run =
      run_attnscope("device-check --device cpu --python none --models '" + models.string() + "'", folder.path());
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(run.crashed);
  EXPECT_NE(run.out.find("truncated.safetensors"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("a parity row FAILED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("a rehearsal: the CPU against itself"), std::string::npos) << run.out;
}

// Without --device, a machine without CUDA is refused: the CPU against itself passes every row and
// would read as a device that passed.
TEST(DeviceCheck, NoDeviceIsRefusedRatherThanComparedWithItself) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has CUDA: auto picks it";
  TestFolder folder("device-check");
  const fs::path models = folder.path() / "models";
  fs::create_directories(models);
  add_model(models, "parity_cases/vit_softmax.safetensors");
  const CommandRun run = run_attnscope("device-check --python none --models '" + models.string() + "'", folder.path());
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("sees no CUDA device"), std::string::npos) << run.err;
  EXPECT_EQ(run.out.find("every parity row passed"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace attnscope
