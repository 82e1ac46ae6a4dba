// Parity of CARE with the independent Python reference (tests/python/reference_part2.py, cases from
// make_part2_cases.py): logits and every attention layer's rows over its key grid, from every file
// form the authors ship (bare state_dict .pth.tar, timm CheckpointSaver, safetensors), within 1e-4;
// strip-conv blocks are layers without heads; the checkpoint refusals name the key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/gradcam.h"
#include "analysis/spectrum.h"
#include "core/npy.h"
#include "models/care.h"
#include "models/model_loader.h"
#include "reference_cases.h"

namespace attnscope {
namespace test_care {

using namespace testing_cases;

const std::string kCaseDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/part2_cases/";

TEST(Care, EveryCaseMatchesThePythonReference) {
  configure_threads(2);
  const auto cases = read_cases(kCaseDir, "care");
  ASSERT_GE(cases.size(), 8u);
  std::set<std::string> forms;
  double worst_logits = 0.0, worst_rows = 0.0;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    LoadedModel model = load_model(kCaseDir + c.at("model").get<std::string>(), {}, torch::kCPU);
    ASSERT_EQ(model.backbone->family(), "care");
    EXPECT_TRUE(model.backbone->hierarchical());
    EXPECT_EQ(model.container_key, c.at("state_dict_key").is_null() ? "" : c.at("state_dict_key").get<std::string>());
    forms.insert(c.at("container").get<std::string>() + ":" + model.container_key);
    c10::InferenceMode inference_mode;
    const ForwardOutput output = forward_and_check_logits(model, kCaseDir, c, kParityTolerance, worst_logits);

    ASSERT_EQ(model.backbone->attention_layers(), int(c.at("layers").size()));
    for_each_reference_layer(output, c, [&](const AttentionCapture& capture, const nlohmann::json& reference) {
      const nlohmann::json described = describe_layer(capture);
      EXPECT_EQ(described.at("channels"), reference.at("channels"));
      ASSERT_EQ(capture.heads, reference.at("heads").get<int>());
      if (reference.at("kind") == "none") {
        EXPECT_EQ(described.at("attention"), "none");
        EXPECT_EQ(capture.placement.access, "strip-conv");
        return;
      }
      EXPECT_EQ(to_string(capture.attention.kernel), reference.at("kernel").get<std::string>());
      EXPECT_EQ(capture.attention.native, reference.at("native").get<bool>());
      const torch::Tensor expected = read_npy(kCaseDir + reference.at("rows").get<std::string>());  // [h, Q, kh, kw]
      const std::vector<int64_t> queries = reference_queries(capture, reference);
      auto rows_of = [&](int head, const std::vector<int64_t>& at) { return capture.rows(0, head, at); };
      worst_rows =
          std::max(worst_rows, expect_rows_match(capture, reference, queries, expected, rows_of, kParityTolerance));
    });
  }
  // The released bare state_dict (.pth.tar), timm's CheckpointSaver ('state_dict' counts) and safetensors.
  EXPECT_EQ(forms, (std::set<std::string>{"safetensors:", "pth:", "pth:state_dict"}));
  std::cout << "CARE parity: max |logits error| " << worst_logits << ", max |row error| " << worst_rows << "\n";
}

// The linear part's equivalent matrix has rank at most its head dimension (8 in the fixture).
TEST(Care, LinearPartRankIsBoundedByTheHeadDimension) {
  LoadedModel model = load_model(kCaseDir + "care_a.safetensors", {}, torch::kCPU);
  c10::InferenceMode inference_mode;
  const ForwardOutput output = model.forward(torch::randn({1, 3, 128, 128}), AttentionSettings{});
  const AttentionCapture& layer = output.layers[3];  // stage 2, block 0: 8 x 8 tokens, 2 heads x 8
  ASSERT_EQ(layer.heads, 2);
  ASSERT_EQ(layer.head_dim, 8);
  EXPECT_EQ(to_string(layer.attention.kernel), "elu_linear");
  for (int head = 0; head < layer.heads; ++head) {
    const AttentionSpectrum spectrum = attention_spectrum(layer, head);
    EXPECT_EQ(spectrum.method, "factors");
    EXPECT_EQ(spectrum.rank_bound, 8);
    EXPECT_LE(spectrum.spectrum.numerical_rank, 8);
    EXPECT_NEAR(layer.row(0, head, 5).sum().item<double>(), 1.0, 1e-4);
  }
  EXPECT_EQ(layer.placement.channels.size(), 4u);
  EXPECT_EQ(layer.placement.channels[1].name, "attention");
  EXPECT_EQ(layer.placement.channels[1].begin, 16);
  EXPECT_EQ(layer.placement.channels[1].end, 32);
}

// The window option means nothing on CARE, and the model says why instead of ignoring it.
TEST(Care, WindowVariantIsRefusedWithTheReason) {
  LoadedModel model = load_model(kCaseDir + "care_a.safetensors", {}, torch::kCPU);
  EXPECT_FALSE(model.backbone->window_support().applies());
  AttentionSettings window;
  window.variant = Variant::Window;
  c10::InferenceMode inference_mode;
  try {
    model.forward(torch::randn({1, 3, 64, 64}), window);
    FAIL() << "the window variant must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no windows"), std::string::npos) << e.what();
  }
}

TEST(Care, GradCamAtBlockOutputs) {
  expect_grad_cam_hook_points(kCaseDir + "care_a.safetensors", 64, 64, "stages.3.blocks.1", "blocks.1",
                              "stages.1.blocks.0", 8);
  LoadedModel model = load_model(kCaseDir + "care_a.safetensors", {}, torch::kCPU);
  EXPECT_EQ(model.backbone->resolve_hook_point("stages.2"), "stages.2.blocks.1");
  EXPECT_THROW(model.backbone->resolve_hook_point("stages.9"), std::invalid_argument);
}

TEST(Care, MissingMisshapenOrForeignKeysAreNamed) {
  const Checkpoint checkpoint = load_checkpoint(kCaseDir + "care_a.safetensors");
  for (const char* key : {"stages.2.blocks.1.inter_layer.inter1_conv.weight", "stages.1.downsample.1.weight",
                          "dist_head.norm.weight", "stages.3.blocks.0.inter_layer.inter2_fc2.weight"}) {
    auto without = checkpoint;
    ASSERT_EQ(without.tensors.erase(key), 1u) << key;
    expect_refusal_naming(without, key);
  }
  auto misshapen = checkpoint;
  misshapen.tensors["stages.3.blocks.0.token_mixer.qk.weight"] = torch::zeros({32, 16, 3, 3});
  expect_refusal_naming(misshapen, "stages.3.blocks.0.token_mixer.qk.weight");
  auto foreign = checkpoint;
  foreign.metadata["attnscope_arch"] = R"({"family": "l2vit", "heads": [1, 2, 2, 3], "window": 7})";
  expect_refusal_naming(foreign, "family \"l2vit\"");
}

}  // namespace test_care
}  // namespace attnscope
