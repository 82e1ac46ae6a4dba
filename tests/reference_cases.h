// What the parity tests of every backbone family share: their case lists (cases.json written by
// the independent Python generators in tests/python/), the variant a case asks for, the error, the
// forward pass with its logits checked, the per-layer checks of the hierarchical families
// (placement, rows at the reference's queries), refusals that name a key, and Grad-CAM at a hook point.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/gradcam.h"
#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/attention.h"
#include "models/attention_settings.h"
#include "models/model_loader.h"
#include "tests/numeric_bounds.h"

namespace attnscope::testing_cases {

// The largest error the families' float32 logits and rows may have against their float64 references.
constexpr double kParityTolerance = 1e-4;

// The cases in `folder`/cases.json, all of them or those of one family.
inline std::vector<nlohmann::json> read_cases(const std::string& folder, const std::string& family = "") {
  std::ifstream in(folder + "cases.json");
  if (!in) throw std::runtime_error("missing " + folder + "cases.json (run tests/python/make_all_fixtures.sh)");
  std::vector<nlohmann::json> selected;
  for (const auto& c : nlohmann::json::parse(in))
    if (family.empty() || c.at("family") == family) selected.push_back(c);
  return selected;
}

// The cases of `folder`, read once per test binary.
inline const std::vector<nlohmann::json>& cached_cases(const std::string& folder) {
  static std::map<std::string, std::vector<nlohmann::json>> read;
  auto found = read.find(folder);
  if (found == read.end()) found = read.emplace(folder, read_cases(folder)).first;
  return found->second;
}

inline AttentionSettings settings_from(const nlohmann::json& variant) {
  AttentionSettings settings;
  const std::string kernel = variant.at("kernel");
  settings.variant = kernel == "native" ? Variant::Native : parse_variant(kernel);
  settings.p = variant.at("p").get<double>();
  settings.window = variant.at("window").is_null() ? 0 : variant.at("window").get<int>();
  return settings;
}

// A layer's stage, block, query grid and key grid as the reference states them.
inline void expect_placement(const AttentionCapture& capture, const nlohmann::json& reference) {
  EXPECT_EQ(capture.placement.stage, reference.at("stage").get<int>());
  EXPECT_EQ(capture.placement.block, reference.at("block").get<int>());
  EXPECT_EQ(capture.layout.grid_h, reference["query_grid"][0].get<int>());
  EXPECT_EQ(capture.layout.grid_w, reference["query_grid"][1].get<int>());
  EXPECT_EQ(capture.key_layout.grid_h, reference["key_grid"][0].get<int>());
  EXPECT_EQ(capture.key_layout.grid_w, reference["key_grid"][1].get<int>());
}

// `check` on each layer of case `c` beside the capture of the same layer, in a trace naming the
// layer, after the layer's placement was checked.
inline void for_each_reference_layer(
    const ForwardOutput& output, const nlohmann::json& c,
    const std::function<void(const AttentionCapture& capture, const nlohmann::json& reference)>& check) {
  const auto& layers = c.at("layers");
  ASSERT_EQ(output.layers.size(), layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const AttentionCapture& capture = output.layers[l];
    SCOPED_TRACE("layer " + std::to_string(l) + " (" + capture.placement.name + ")");
    expect_placement(capture, layers[l]);
    check(capture, layers[l]);
  }
}

// The reference's queries ([row, col] pairs) as tokens of the layer's query grid.
inline std::vector<int64_t> reference_queries(const AttentionCapture& capture, const nlohmann::json& reference) {
  std::vector<int64_t> queries;
  for (const auto& query : reference.at("queries"))
    queries.push_back(capture.layout.patch_token(query[0].get<int>(), query[1].get<int>()));
  return queries;
}

// Each head's row at each of `queries` (rows_of(head, queries): [Q, keys]), on the layer's key
// grid, against `expected` [h, Q, kh, kw], each within `tolerance`; returns the largest error.
inline double expect_rows_match(const AttentionCapture& capture, const nlohmann::json& reference,
                                const std::vector<int64_t>& queries, const torch::Tensor& expected,
                                const std::function<torch::Tensor(int, const std::vector<int64_t>&)>& rows_of,
                                double tolerance, const std::string& what = "") {
  double worst = 0.0;
  for (int head = 0; head < capture.heads; ++head) {
    const torch::Tensor rows = rows_of(head, queries);
    for (size_t q = 0; q < queries.size(); ++q) {
      const double error = max_abs_difference(capture.key_grid(rows[int64_t(q)]), expected[head][int64_t(q)]);
      worst = std::max(worst, error);
      EXPECT_LT(error, tolerance) << what << "head " << head << " query " << reference["queries"][q].dump();
    }
  }
  return worst;
}

// Case `c`'s forward pass at its variant on its input (files in `folder`), its logits checked
// against the reference's within `tolerance`; `worst` keeps the largest logits error. Runs under
// the caller's InferenceMode, so that the captures it returns are inference tensors too.
inline ForwardOutput forward_and_check_logits(LoadedModel& model, const std::string& folder, const nlohmann::json& c,
                                              double tolerance, double& worst) {
  const torch::Tensor input = read_npy(folder + c.at("input").get<std::string>());
  ForwardOutput output = model.forward(input, settings_from(c.at("variant")));
  const double error = max_abs_difference(output.logits, read_npy(folder + c.at("logits").get<std::string>()));
  worst = std::max(worst, error);
  EXPECT_LT(error, tolerance) << "logits";
  return output;
}

// Loading `checkpoint` (written as a temporary safetensors file) fails with a CheckpointError
// whose message names `needle`.
inline void expect_refusal_naming(const Checkpoint& checkpoint, const std::string& needle) {
  // One file per process and test: two suites run at once (scripts/test.sh --kernels beside a build's
  // ctest) share the temporary folder, and a shared name let one read the other's checkpoint.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = ::testing::TempDir() + "/refused_checkpoint_" + std::to_string(::getpid()) + "_" +
                           (test ? std::string(test->test_suite_name()) + "." + test->name() : std::string("none")) +
                           ".safetensors";
  save_safetensors(path, checkpoint.tensors, checkpoint.metadata);
  try {
    load_model(path, {}, torch::kCPU);
    ADD_FAILURE() << "must be refused: " << needle;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// Grad-CAM of the top-1 class at hook point `layer` (the model's default when empty).
inline GradCamResult grad_cam_at(Backbone& model, const torch::Tensor& image, const std::string& layer = "") {
  GradCamOptions options;
  options.layer = layer;
  return grad_cam(model, image, AttentionSettings{}, options);
}

// Grad-CAM of `model_file` on a random image of `height` x `width`: at the default hook point,
// which resolves to `last_layer`, and at `alias` (e.g. "blocks.1", counted across stages), which
// resolves to `alias_layer` and gives a map of `alias_grid_h` rows with gradients.
inline void expect_grad_cam_hook_points(const std::string& model_file, int64_t height, int64_t width,
                                        const std::string& last_layer, const std::string& alias,
                                        const std::string& alias_layer, int alias_grid_h) {
  LoadedModel model = load_model(model_file, {}, torch::kCPU);
  const torch::Tensor image = torch::randn({1, 3, height, width});
  EXPECT_EQ(grad_cam_at(model.native("Grad-CAM"), image).layer, last_layer);
  const GradCamResult early = grad_cam_at(model.native("Grad-CAM"), image, alias);
  EXPECT_EQ(early.layer, alias_layer);
  EXPECT_EQ(early.layout.grid_h, alias_grid_h);
  EXPECT_GT(early.max_abs_gradient, 0.0);
}

}  // namespace attnscope::testing_cases
