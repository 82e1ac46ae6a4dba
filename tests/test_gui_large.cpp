// The workbench at many tokens, under Xvfb: the matrix view's block means and a cancelled exact
// spectrum (views/panel_maps.h, viewer/gui_benchmark.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/assets.h"
#include "gui_fixture.h"
#include "random_vit.h"

namespace attnscope {

// A cancelled spectrum leaves the workbench responsive, in the running workbench: its benchmark
// opens the matrix view with every head's exact spectrum (a full SVD each at 1,601 tokens),
// presses cancel once the worker reports progress, then clicks another query. The worker must
// stop and the click's result must reach the screen (the numbers are the benchmark's, not judged).
TEST_F(GuiTest, ACancelledSpectrumLeavesTheWorkbenchAnsweringClicks) {
  const std::string weights = save_random_vit(folder_ / "vit1601.safetensors", 40, 21);
  const nlohmann::json session = {{"model", weights}, {"image", asset_path("images/chelsea.png")}};
  ASSERT_EQ(run_gui(session, 4, "--bench 1"), 0) << log();
  const std::string report = log();
  EXPECT_NE(report.find("cancelled spectrum (every head's full SVD at 1601 tokens): the worker stopped mid-way"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("the next click -> updated pixels"), std::string::npos) << report;
}

// Above 1,024 tokens a side the matrix view draws block means (2x2 at 1,601 tokens): what the
// screen shows is the engine's full matrix pooled over those blocks, the last ones partial.
TEST_F(GuiTest, MatrixViewOfManyTokensShowsTheBlockMeansOfTheEngineMatrix) {
  const std::string weights = save_random_vit(folder_ / "vit1601.safetensors", 40, 22);
  const nlohmann::json session = {
      {"model", weights}, {"image", asset_path("images/chelsea.png")}, {"analysis", "spectrum"}, {"head", 3}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const auto [layout, matrix] = engine_matrix(session, weights, 3);
  ASSERT_EQ(layout.total_tokens(), 1601);
  const torch::Tensor expected = torch::avg_pool2d(matrix.unsqueeze(0), {2, 2}, {2, 2}, {0, 0}, true, false)[0];
  const nlohmann::json info = shot_info();
  std::vector<float> shown;
  for (const auto& entry : info["shown"])
    if (entry["kind"] == "matrix") shown = entry["values"].get<std::vector<float>>();
  ASSERT_EQ(shown.size(), size_t(801 * 801));
  // One forward each (the workbench's and this one), the same weights and input: float32 rounding.
  const torch::Tensor drawn = torch::from_blob(shown.data(), {801, 801}, torch::kFloat);
  EXPECT_LT((drawn - expected).abs().max().item<double>(), 1e-6);
}

}  // namespace attnscope
