// Parity with the independent Python reference (tests/python/reference_vit.py): logits, attention
// rows and the last layer's equivalent matrix (with FLatten's DWC term) of every variant and
// layout, within 1e-4.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/numeric_bounds.h"

namespace attnscope {
namespace test_parity {

const std::string kCaseDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/";
constexpr double kTolerance = 1e-4;

AttentionSettings settings_from(const nlohmann::json& json) {
  AttentionSettings settings;
  settings.variant = parse_variant(json.at("variant").get<std::string>());
  settings.p = json.at("p").get<double>();
  settings.window = json.at("window").get<int>();
  settings.anchors = json.at("anchors").get<int>();
  settings.dwc = json.at("dwc").get<bool>();
  settings.norm = parse_focus_norm(json.at("norm").get<std::string>());
  return settings;
}

nlohmann::json read_cases() {
  std::ifstream in(kCaseDir + "cases.json");
  if (!in) throw std::runtime_error("missing " + kCaseDir + "cases.json (run tests/python/make_all_fixtures.sh)");
  return nlohmann::json::parse(in);
}

TEST(Parity, EveryCaseMatchesThePythonReference) {
  configure_threads(2);  // the engine's multi-core path: token-row chunks and oneDNN GEMMs
  const auto cases = read_cases();
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    ArchOverrides overrides;
    if (c.contains("arch")) overrides.values["heads"] = c["arch"].at("heads").get<int>();
    LoadedModel model = load_model(kCaseDir + c.at("model").get<std::string>(), overrides, torch::kCPU);
    const auto input = read_npy(kCaseDir + c.at("input").get<std::string>());
    c10::InferenceMode inference_mode;
    const ForwardOutput output = model.vit().forward(input, settings_from(c.at("settings")));

    EXPECT_EQ(output.layout.grid_h, c["grid"][0].get<int>());
    EXPECT_EQ(output.layout.grid_w, c["grid"][1].get<int>());
    EXPECT_EQ(output.layout.prefix_tokens(), c["num_prefix"].get<int>());
    EXPECT_EQ(output.layout.total_tokens(), c["tokens"].get<int>());

    const auto reference_logits = read_npy(kCaseDir + c.at("logits").get<std::string>());
    EXPECT_LT(max_abs_difference(output.logits, reference_logits), kTolerance) << "logits";

    const auto reference_rows = read_npy(kCaseDir + c.at("rows").get<std::string>());  // [L, h, Q, T]
    const auto queries = c.at("queries").get<std::vector<int64_t>>();
    ASSERT_EQ(reference_rows.size(0), int64_t(output.layers.size()));
    for (int64_t layer = 0; layer < reference_rows.size(0); ++layer)
      for (int64_t head = 0; head < reference_rows.size(1); ++head) {
        const auto rows = output.layers[size_t(layer)].rows(0, head, queries);
        EXPECT_LT(max_abs_difference(rows, reference_rows[layer][head]), kTolerance)
            << "rows of layer " << layer << " head " << head;
      }

    const auto reference_matrix = read_npy(kCaseDir + c.at("matrix").get<std::string>());  // [h, T, T]
    for (int64_t head = 0; head < reference_matrix.size(0); ++head)
      EXPECT_LT(max_abs_difference(output.layers.back().equivalent_matrix(0, head), reference_matrix[head]), kTolerance)
          << "matrix of head " << head;
  }
}

}  // namespace test_parity
}  // namespace attnscope
