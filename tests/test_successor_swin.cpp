// Agent-Swin and InLine-Swin, the FLatten authors' Swin successors, as their training script saves
// them (.pth with buffers) and as safetensors beside a config.json, against an independent float64
// reference written from their code (tests/python/reference_successor_swin.py, checked against their
// modules by check_successor_swin_reference.py; tests/python/make_successor_swin_cases.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/numeric_bounds.h"

namespace attnscope {
namespace test_successor_swin {

const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/successor_swin_cases/";

nlohmann::json read_cases() {
  std::ifstream in(kFolder + "cases.json");
  if (!in) throw std::runtime_error("missing " + kFolder + "cases.json (tests/python/make_successor_swin_cases.py)");
  return nlohmann::json::parse(in);
}

// Output within 1e-5 of its largest value from either file; each block runs the kernel its keys
// say, the global successor blocks over their whole stage with rows within 2e-5 of the authors'
// equivalent matrices (Agent's q_attn @ agent_attn, InLine's shifted scores).
TEST(SuccessorSwin, NativeMatchesTheAuthorsCodeInBothLayouts) {
  configure_threads(2);
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) {
    const std::string kind = c.at("kind");
    for (const std::string& file : {c.at("model").get<std::string>(), c.at("folder").get<std::string>()}) {
      SCOPED_TRACE(file);
      LoadedModel model = load_model(kFolder + file, {}, torch::kCPU);
      EXPECT_EQ(model.backbone->family().rfind(kind + "-swin", 0), 0u) << model.backbone->family();
      c10::InferenceMode inference_mode;
      const ForwardOutput output = model.forward(read_npy(kFolder + c.at("input").get<std::string>()), {});
      const auto expected = read_npy(kFolder + c.at("output").get<std::string>());
      ASSERT_EQ(output.logits.sizes(), expected.sizes());
      EXPECT_LT(max_abs_difference(output.logits, expected), 1e-5 * expected.abs().max().item<double>());
      const auto kernels = c.at("kernels").get<std::vector<std::string>>();
      ASSERT_EQ(output.layers.size(), kernels.size());
      const auto rows = read_npy(kFolder + c.at("rows").get<std::string>());
      const auto queries = c.at("queries").get<std::vector<std::vector<int64_t>>>();
      for (size_t layer = 0; layer < kernels.size(); ++layer) {
        const AttentionCapture& capture = output.layers[layer];
        EXPECT_EQ(to_string(capture.attention.kernel), kernels[layer]) << "layer " << layer;
        if (queries[layer].empty()) continue;
        EXPECT_EQ(capture.placement.access, "global") << "layer " << layer;
        for (int64_t head = 0; head < capture.heads; ++head) {
          const auto got = capture.rows(0, head, queries[layer]);
          const auto want =
              rows[int64_t(layer)][head].narrow(0, 0, int64_t(queries[layer].size())).narrow(1, 0, got.size(1));
          EXPECT_LT(max_abs_difference(got, want), 2e-5) << "rows of layer " << layer << " head " << head;
        }
      }
    }
  }
}

// The agents' biases hold at their trained grid only (another input is refused naming it, and
// --agents with another count runs without them); a config naming another agent count than the
// weights is refused naming both; a missing bias is refused naming the key. InLine has no
// grid-bound parameter: it runs at another size, global, its rows summing to one.
TEST(SuccessorSwin, AgentGridsCountsAndMissingBiasesAreChecked) {
  const auto cases = read_cases();
  LoadedModel agent = load_model(kFolder + "agent_swin.pth", {}, torch::kCPU);
  c10::InferenceMode inference_mode;
  try {
    agent.forward(torch::randn({1, 3, 128, 128}), AttentionSettings{});
    ADD_FAILURE() << "agent biases at another grid";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("trained for a 28x28 grid"), std::string::npos) << e.what();
  }
  AttentionSettings other;
  other.agents = 4;
  const ForwardOutput unbiased = agent.forward(torch::randn({1, 3, 128, 128}), other);
  EXPECT_EQ(unbiased.layers[0].attention.describe().find("no position biases") != std::string::npos, true)
      << unbiased.layers[0].attention.describe();

  const std::filesystem::path folder = std::filesystem::temp_directory_path() / "attnscope_agent_swin_counts";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(kFolder + "agent_swin/model.safetensors", folder / "model.safetensors");
  std::ifstream in(kFolder + "agent_swin/config.json");
  auto config = nlohmann::json::parse(in);
  config["model_args"]["agent_num"] = "16-4-4";
  std::ofstream(folder / "config.json") << config.dump();
  try {
    load_model(folder.string(), {}, torch::kCPU);
    ADD_FAILURE() << "a config with another agent count";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("gives stage 1 4 agents"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("have 9"), std::string::npos) << e.what();
  }

  Checkpoint checkpoint = load_checkpoint(kFolder + "agent_swin/model.safetensors");
  checkpoint.tensors.erase("layers.1.blocks.0.attn.wa_bias");
  save_safetensors((folder / "model.safetensors").string(), checkpoint.tensors);
  std::filesystem::remove(folder / "config.json");
  try {
    load_model((folder / "model.safetensors").string(), {}, torch::kCPU);
    ADD_FAILURE() << "a missing agent bias";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.blocks.0.attn.wa_bias"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(folder);

  LoadedModel inline_swin = load_model(kFolder + "inline_swin.pth", {}, torch::kCPU);
  const ForwardOutput larger = inline_swin.forward(torch::randn({1, 3, 128, 128}), AttentionSettings{});
  const AttentionCapture& first = larger.layers[0];
  EXPECT_EQ(first.placement.access, "global");
  const auto matrix = first.matrix(0, 0).to(torch::kDouble);
  EXPECT_EQ(matrix.size(1), 32 * 32);
  EXPECT_LT(max_abs_difference(matrix.sum(1), torch::ones({matrix.size(0)}, torch::kDouble)), 1e-4);
}

}  // namespace test_successor_swin
}  // namespace attnscope
