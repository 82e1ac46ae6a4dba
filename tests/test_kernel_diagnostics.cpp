// The kernel diagnostics (analysis/kernel_diagnostics.h) of a plain ViT's last layer under seven kernels,
// against a float64 reference computed from their definitions (tests/python/make_kernel_diagnostics_cases.py),
// and the properties the papers argue by: normalised linear kernels are blind to the query's scale,
// InLine is not; ReLU kernels drop negative products, PolaFormer keeps them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/kernel_diagnostics.h"
#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/cli_process.h"

namespace attnscope {
namespace test_kernel_diagnostics {

const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/kernel_diagnostics_cases/";

nlohmann::json read_cases() {
  std::ifstream in(kFolder + "cases.json");
  if (!in)
    throw std::runtime_error("missing " + kFolder + "cases.json (tests/python/make_kernel_diagnostics_cases.py)");
  return nlohmann::json::parse(in);
}

KernelDiagnostics diagnostics_of(LoadedModel& model, const std::string& variant) {
  AttentionSettings settings;
  settings.variant = parse_variant(variant);
  c10::InferenceMode inference_mode;
  const ForwardOutput output = model.forward(read_npy(kFolder + "input.npy"), settings);
  return kernel_diagnostics(output.layers.back(), {});
}

// Every number within what float32 rows allow: 1e-4 of its size (entropies and divergences are sums
// of logarithms of float32 weights); the effective rank within 1e-3 (float32 singular values).
TEST(KernelDiagnostics, EveryKernelMatchesTheFloat64Reference) {
  configure_threads(2);
  LoadedModel model = load_model(kFolder + "model.safetensors", {}, torch::kCPU);
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 7u);
  for (const auto& c : cases) {
    const std::string variant = c.at("variant");
    SCOPED_TRACE(variant);
    const KernelDiagnostics diagnostics = diagnostics_of(model, variant);
    EXPECT_EQ(diagnostics.queries, 17);
    EXPECT_TRUE(diagnostics.scale_note.empty()) << diagnostics.scale_note;
    ASSERT_EQ(diagnostics.heads.size(), c.at("heads").size());
    for (size_t h = 0; h < diagnostics.heads.size(); ++h) {
      const auto& expected = c.at("heads")[h];
      const HeadKernelDiagnostics& got = diagnostics.heads[h];
      auto near = [&](const char* key, double value, double tolerance) {
        const double want = expected.at(key).get<double>();
        EXPECT_NEAR(value, want, tolerance * std::max(1.0, std::abs(want))) << key << " of head " << h;
      };
      near("entropy", got.entropy, 1e-4);
      near("row_max", got.row_max, 1e-4);
      near("negative_mass", got.negative_mass, 1e-4);
      ASSERT_TRUE(got.local_mass.has_value());
      near("local_mass", *got.local_mass, 1e-4);
      near("kl_to_softmax", got.kl_to_softmax, 1e-4);
      near("js_to_softmax", got.js_to_softmax, 1e-4);
      ASSERT_TRUE(got.scale_shift.has_value());
      near("scale_shift", *got.scale_shift, 1e-4);
      near("effective_rank", got.spectrum.effective_rank, 1e-3);
      ASSERT_EQ(got.lost_negative_share.has_value(), !expected.at("lost_negative_share").is_null());
      if (got.lost_negative_share) near("lost_negative_share", *got.lost_negative_share, 1e-4);
    }
  }
}

// What the papers argue: FLatten's and ReLU linear attention's rows do not move when a query is
// scaled (InLine's non-injectivity), InLine's and softmax's do; softmax is its own reference.
TEST(KernelDiagnostics, InjectivityAndDroppedProductsSeparateTheKernels) {
  LoadedModel model = load_model(kFolder + "model.safetensors", {}, torch::kCPU);
  const auto softmax = diagnostics_of(model, "softmax");
  const auto linear = diagnostics_of(model, "linear");
  const auto in_line = diagnostics_of(model, "inline");
  const auto pola = diagnostics_of(model, "pola");
  for (size_t h = 0; h < softmax.heads.size(); ++h) {
    EXPECT_LT(softmax.heads[h].js_to_softmax, 1e-6);
    EXPECT_LT(*linear.heads[h].scale_shift, 1e-4) << "ReLU linear rows are scale invariant";
    EXPECT_GT(*in_line.heads[h].scale_shift, 0.1) << "InLine's rows move with the query's scale";
    EXPECT_GT(*softmax.heads[h].scale_shift, 0.05);
    EXPECT_GT(*linear.heads[h].lost_negative_share, 0.3);
    EXPECT_FALSE(pola.heads[h].lost_negative_share.has_value()) << "PolaFormer keeps both signs";
    EXPECT_GT(in_line.heads[h].negative_mass, 0.0);
  }
}

// `analyze --analysis kernel-diagnostics` writes the table, the CSV and the figure for each --variants kernel.
TEST(KernelDiagnostics, AnalyzeWritesTheComparison) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_kernel_diagnostics";
  std::filesystem::remove_all(out);
  testing::CliRequest request({"analyze", "--analysis", "kernel-diagnostics", "--model", kFolder + "model.safetensors",
                               "--image", std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--variants",
                               "softmax,linear,inline,pola", "--out", out.string()});
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  ASSERT_EQ(summary.at("variants").size(), 4u);
  EXPECT_EQ(summary.at("variants")[3].at("kernel"), "pola");
  EXPECT_TRUE(summary.at("variants")[1].at("heads")[0].at("lost_negative_share").is_number());
  EXPECT_TRUE(summary.at("variants")[3].at("heads")[0].at("lost_negative_share").is_null());
  EXPECT_TRUE(std::filesystem::exists(out / "kernel_diagnostics.csv"));
  EXPECT_TRUE(std::filesystem::exists(out / "kernel_diagnostics.png"));
}

// Bad settings are refused naming them.
TEST(KernelDiagnostics, BadSettingsAreRefused) {
  LoadedModel model = load_model(kFolder + "model.safetensors", {}, torch::kCPU);
  c10::InferenceMode inference_mode;
  const ForwardOutput output = model.forward(read_npy(kFolder + "input.npy"), AttentionSettings{});
  KernelDiagnosticsSettings even;
  even.local_window = 4;
  EXPECT_THROW(kernel_diagnostics(output.layers.back(), even), std::invalid_argument);
  KernelDiagnosticsSettings unit;
  unit.query_scale = 1.0;
  EXPECT_THROW(kernel_diagnostics(output.layers.back(), unit), std::invalid_argument);
  EXPECT_EQ(sampled_queries(1000, 4), (std::vector<int64_t>{0, 333, 666, 999}));
}

}  // namespace test_kernel_diagnostics
}  // namespace attnscope
