// The FLatten authors' successors (Agent Attention, InLine in their DeiT models; MLLA) and PolaFormer
// swapped into a plain ViT, against an independent float64 reference written from the authors' code
// (tests/python/reference_successors.py, tests/python/make_successor_cases.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "models/model_loader.h"
#include "models/vit.h"
#include "tests/cli_process.h"
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
  settings.alpha = c.at("alpha").get<double>();
  return settings;
}

// Output within 1e-5 of its largest value; every layer's equivalent rows (Agent's q_attn @ agent_attn,
// InLine's shifted scores) within 2e-5; each block runs the kernel its keys or the swap say.
TEST(KernelSuccessors, NativeAndSwappedMatchTheAuthorsCode) {
  configure_threads(2);
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 8u);
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
    if (c.contains("second_rows")) {  // PolaFormer's opposite-sign matrices
      const auto second = read_npy(kFolder + c.at("second_rows").get<std::string>());
      for (size_t layer = 0; layer < kernels.size(); ++layer)
        for (int64_t head = 0; head < second.size(1); ++head)
          EXPECT_LT(
              max_abs_difference(output.layers[layer].second_rows(0, head, queries), second[int64_t(layer)][head]),
              2e-5)
              << "opposite-sign rows of layer " << layer << " head " << head;
    } else {
      EXPECT_THROW(output.layers[0].second_rows(0, 0, queries), std::invalid_argument);
    }
  }
}

// The matrices' thin factors are the matrices: Agent's rank is at most its agent count, InLine's at
// most d + 1, MLLA's d, PolaFormer's 2d; InLine's and PolaFormer's rows sum to one by construction.
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
    const std::string variant = c.at("variant");
    if (variant == "agent") {
      EXPECT_EQ(factors->left.size(1), c.at("agents").get<int64_t>());
    } else if (variant == "mlla") {
      // Rank <= d; the rotation turns the numerator away from the un-rotated normaliser: rows do not sum to one.
      EXPECT_EQ(factors->left.size(1), int64_t(layer.head_dim));
      EXPECT_GT(max_abs_difference(matrix.sum(1), torch::ones({matrix.size(0)}, torch::kDouble)), 1e-4);
    } else if (variant == "pola") {
      // Rank <= 2d (both polarities); each matrix is its own features' normalised products: rows of
      // non-negative weights summing to one (up to the 1e-6).
      EXPECT_EQ(factors->left.size(1), 2 * int64_t(layer.head_dim));
      EXPECT_LT(max_abs_difference(matrix.sum(1), torch::ones({matrix.size(0)}, torch::kDouble)), 1e-5);
      EXPECT_GE(matrix.min().item<double>(), 0.0);
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

// `run` writes PolaFormer's opposite-sign row of the query beside its same-sign one, and says which it is.
TEST(KernelSuccessors, RunWritesPolaFormersSecondMatrix) {
  const auto cases = read_cases();
  const auto c = cases.at(7);
  ASSERT_EQ(c.at("name"), "plain_pola_swap_alpha1");
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_pola_run";
  std::filesystem::remove_all(out);
  testing::CliRequest request({"run", "--model", kFolder + c.at("model").get<std::string>(), "--image",
                               std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--variant", "pola",
                               "--pola-alpha", "1.5", "--layer", "1", "--head", "1", "--query", "2,0", "--out",
                               out.string()});
  const auto result = testing::run_cli_process(request);
  ASSERT_EQ(result.exit_code, 0);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary.at("second_matrix").at("name"), "opposite-sign");
  const torch::Tensor first = read_npy((out / summary.at("second_matrix").at("file").get<std::string>()).string());
  const torch::Tensor same = read_npy((out / "attention_l1_h1.npy").string());
  ASSERT_EQ(first.sizes(), same.sizes());
  // Both are rows of normalised non-negative weights, and they differ (the polarities pair differently).
  EXPECT_NEAR(first.sum().item<double>(), 1.0, 1e-5);
  EXPECT_GE(first.min().item<double>(), 0.0);
  EXPECT_GT(max_abs_difference(first, same), 1e-3);
}

// PolaFormer's alpha outside [0, 8] (NaN and inf among them) is refused by the knob; MLLA's RoPE
// refuses channels it cannot pair (C not a multiple of 4); the swaps say what they left out.
TEST(KernelSuccessors, AlphaAndRopeShapesAreChecked) {
  AttentionSettings settings;
  const AttentionKnob* alpha = find_attention_knob("pola-alpha");
  ASSERT_NE(alpha, nullptr);
  for (const char* bad : {"-1", "8.5", "inf", "nan", "1e308"})
    EXPECT_THROW(alpha->set(settings, bad), std::invalid_argument) << bad;
  EXPECT_NO_THROW(alpha->set(settings, "2.5"));
  EXPECT_DOUBLE_EQ(settings.alpha, 2.5);
  const TokenLayout layout{true, false, 0, 2, 3, 16};
  torch::Tensor k = torch::randn({1, 2, 7, 3});  // C = 6
  ResolvedAttention mlla;
  mlla.kernel = Kernel::Mlla;
  try {
    kernel_features(mlla, torch::randn({1, 2, 7, 3}), k, {}, layout);
    ADD_FAILURE() << "RoPE over 6 channels";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos) << e.what();
  }
  LoadedModel plain = load_model(kFolder + "plain_pola_swap.safetensors", {}, torch::kCPU);
  settings.variant = Variant::Pola;
  c10::InferenceMode inference_mode;
  const ForwardOutput output = plain.forward(torch::randn({1, 3, 64, 64}), settings);
  EXPECT_EQ(output.layers[0].attention.describe(), "pola alpha=2.5 power=2.25 scale=ln2 (no dwc, no gate) [swapped]");
}

// `analyze --analysis kernel-parts`: the agent demo's agents (each agent's attention over the key
// patches) weighted by the query's row of q_attn give the query's row of the equivalent matrix (the
// class key aside); PolaFormer's two files are the query's rows of its two matrices; softmax has no
// parts and says so.
TEST(KernelSuccessors, KernelPartsAreTheMatricesFactors) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_kernel_parts";
  std::filesystem::remove_all(out);
  const std::string model = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/agent.safetensors";
  const std::string image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  testing::CliRequest request({"analyze", "--analysis", "kernel-parts", "--model", model, "--image", image,
                               "--variants", "native,pola,softmax", "--layer", "1", "--head", "2", "--query", "3,4",
                               "--out", out.string()});
  const auto result = testing::run_cli_process(request);
  ASSERT_EQ(result.exit_code, 0);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  ASSERT_EQ(summary.at("variants").size(), 3u);
  EXPECT_EQ(summary["variants"][2].at("kernel"), "softmax");
  EXPECT_NE(summary["variants"][2].at("none").get<std::string>().find("computes no parts"), std::string::npos);
  const torch::Tensor agents = read_npy((out / "agents_native.npy").string()).to(torch::kDouble);
  const torch::Tensor weights = read_npy((out / "agent_weights_native.npy").string()).to(torch::kDouble);
  ASSERT_EQ(agents.sizes(), (std::vector<int64_t>{36, 12, 12}));
  EXPECT_NEAR(weights.sum().item<double>(), 1.0, 1e-5);

  // `run` writes the same query's row of each matrix over the key patches.
  auto run_rows = [&](const std::string& variant) {
    const std::filesystem::path run_out = out / ("run_" + variant);
    testing::CliRequest run({"run", "--model", model, "--image", image, "--variant", variant, "--layer", "1", "--head",
                             "2", "--query", "3,4", "--out", run_out.string()});
    const auto ran = testing::run_cli_process(run);
    EXPECT_EQ(ran.exit_code, 0);
    return run_out;
  };
  const auto native = run_rows("native");
  // run's row holds the class key first.
  const torch::Tensor row =
      read_npy((native / "attention_l1_h2.npy").string()).reshape({-1}).slice(0, 1).to(torch::kDouble);
  EXPECT_LT(max_abs_difference(torch::matmul(weights, agents.reshape({36, -1})), row), 1e-5);
  const auto pola = run_rows("pola");
  const torch::Tensor same = read_npy((out / "same_sign_pola.npy").string()).reshape({-1});
  const torch::Tensor opposite = read_npy((out / "opposite_sign_pola.npy").string()).reshape({-1});
  EXPECT_LT(max_abs_difference(same, read_npy((pola / "attention_l1_h2.npy").string()).reshape({-1}).slice(0, 1)),
            1e-6);
  EXPECT_LT(max_abs_difference(opposite, read_npy((pola / "second_l1_h2.npy").string()).reshape({-1}).slice(0, 1)),
            1e-6);
  EXPECT_GT(max_abs_difference(same, opposite), 1e-3);
  // One figure holds every variant with parts, each its own rows: the agents, then the polarities.
  EXPECT_TRUE(std::filesystem::exists(out / "kernel_parts.png"));
}

}  // namespace test_kernel_successors
}  // namespace attnscope
