// The FLatten authors' successors (Agent Attention, InLine) in their DeiT models and swapped into a plain
// ViT, against an independent float64 reference written from the authors' code
// (tests/python/reference_successors.py, tests/python/make_successor_cases.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "models/model_loader.h"
#include "models/vit.h"
#include "tests/numeric_bounds.h"

namespace attnscope {
namespace test_kernel_successors {

const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/successor_cases/";

nlohmann::json read_cases() {
  std::ifstream in(kFolder + "cases.json");
  if (!in) throw std::runtime_error("missing " + kFolder + "cases.json (tests/python/make_successor_cases.py)");
  return nlohmann::json::parse(in);
}

AttentionSettings settings_of(const nlohmann::json& c) {
  AttentionSettings settings;
  settings.variant = parse_variant(c.at("variant").get<std::string>());
  settings.agents = c.at("agents").get<int>();
  return settings;
}

// Output within 1e-5 of its largest value; every layer's equivalent rows (Agent's q_attn @ agent_attn,
// InLine's shifted scores) within 2e-5; each block runs the kernel its keys or the swap say.
TEST(KernelSuccessors, NativeAndSwappedMatchTheAuthorsCode) {
  configure_threads(2);
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    EXPECT_EQ(model.vit_arch().heads, c.at("heads").get<int>());
    c10::InferenceMode inference_mode;
    const ForwardOutput output = model.forward(read_npy(kFolder + c.at("input").get<std::string>()), settings_of(c));
    const auto expected = read_npy(kFolder + c.at("output").get<std::string>());
    ASSERT_EQ(output.logits.sizes(), expected.sizes());
    EXPECT_LT(max_abs_difference(output.logits, expected), 1e-5 * expected.abs().max().item<double>());
    const auto rows = read_npy(kFolder + c.at("rows").get<std::string>());
    const auto queries = c.at("queries").get<std::vector<int64_t>>();
    const auto kernels = c.at("kernels").get<std::vector<std::string>>();
    ASSERT_EQ(output.layers.size(), kernels.size());
    for (size_t layer = 0; layer < kernels.size(); ++layer) {
      EXPECT_EQ(to_string(output.layers[layer].attention.kernel), kernels[layer]) << "layer " << layer;
      for (int64_t head = 0; head < rows.size(1); ++head)
        EXPECT_LT(max_abs_difference(output.layers[layer].rows(0, head, queries), rows[int64_t(layer)][head]), 2e-5)
            << "rows of layer " << layer << " head " << head;
    }
  }
}

// The matrices' thin factors are the matrices: Agent's rank is at most its agent count, InLine's at
// most d + 1, and InLine's rows sum to one by construction.
TEST(KernelSuccessors, FactorsAndRowSums) {
  const auto cases = read_cases();
  for (const auto& c : cases) {
    if (c.at("variant") == "native") continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    c10::InferenceMode inference_mode;
    const ForwardOutput output = model.forward(read_npy(kFolder + c.at("input").get<std::string>()), settings_of(c));
    const AttentionCapture& layer = output.layers[0];
    const auto factors = equivalent_factors(layer.attention.kernel, layer.features, 0, 1);
    ASSERT_TRUE(factors.has_value());
    const auto matrix = layer.matrix(0, 1).to(torch::kDouble);
    EXPECT_LT(max_abs_difference(torch::matmul(factors->left, factors->right.transpose(0, 1)), matrix), 1e-6);
    if (c.at("variant") == "agent") {
      EXPECT_EQ(factors->left.size(1), c.at("agents").get<int64_t>());
    } else {
      EXPECT_LT(max_abs_difference(matrix.sum(1), torch::ones({matrix.size(0)}, torch::kDouble)), 1e-5);
      EXPECT_LT(matrix.min().item<double>(), 0.0) << "InLine's weights are not a probability";
    }
  }
}

// An agent count that is not a square, or more agents than patches, is refused naming the count;
// the learned biases of a native agent model hold at its trained grid only.
TEST(KernelSuccessors, AgentCountsAndGridsAreChecked) {
  AttentionSettings settings;
  const AttentionKnob* agents = find_attention_knob("agents");
  ASSERT_NE(agents, nullptr);
  EXPECT_THROW(agents->set(settings, "10"), std::invalid_argument);
  EXPECT_NO_THROW(agents->set(settings, "16"));
  LoadedModel plain = load_model(kFolder + "plain_agent_swap.safetensors", {}, torch::kCPU);
  settings.variant = Variant::Agent;
  settings.agents = 25;  // 16 patches
  try {
    plain.forward(torch::randn({1, 3, 64, 64}), settings);
    ADD_FAILURE() << "25 agents pooled from 16 patches";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the 16 patches"), std::string::npos) << e.what();
  }
  LoadedModel agent = load_model(kFolder + "agent_deit.safetensors", {}, torch::kCPU);
  try {
    agent.forward(torch::randn({1, 3, 96, 96}), AttentionSettings{});
    ADD_FAILURE() << "learned agent biases at another grid";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("trained for a 4x4 grid"), std::string::npos) << e.what();
  }
}

}  // namespace test_kernel_successors
}  // namespace attnscope
