// The workbench at many tokens, under Xvfb: the matrix view's block means, a cancelled exact
// spectrum and a slider change timed with the pointer moving and at rest (views/panel_maps.h,
// viewer/gui_benchmark.h, viewer/frame_pacing.h).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/assets.h"
#include "gui_fixture.h"
#include "random_vit.h"
#include "viewer/frame_pacing.h"

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

// With no pointer moving the workbench draws two frames after anything happens, then sleeps: until
// an event, or while a run goes on, until its result or 0.25 s (the progress bar moves).
TEST(RestingPace, TwoSettlingFramesThenItSleeps) {
  using Wait = RestingPace::Wait;
  RestingPace pace;
  for (int frame = 0; frame < 3; ++frame) EXPECT_EQ(pace.next(false), Wait::SettlingFrame) << frame;
  EXPECT_EQ(pace.next(false), Wait::Event);  // idle: no timeout, no CPU
  for (int wake = 0; wake < 3; ++wake) {
    EXPECT_EQ(pace.next(true), Wait::SettlingFrame);
    EXPECT_EQ(pace.next(true), Wait::SettlingFrame);
    EXPECT_EQ(pace.next(true), Wait::EventOrTimeout);  // running: wakes at least every 0.25 s
  }
  EXPECT_EQ(pace.next(true), Wait::SettlingFrame);
  pace.something_happened();  // a change restarts the settling frames
  EXPECT_EQ(pace.next(true), Wait::SettlingFrame);
  EXPECT_EQ(pace.next(true), Wait::SettlingFrame);
  EXPECT_EQ(pace.next(true), Wait::EventOrTimeout);
  EXPECT_DOUBLE_EQ(RestingPace::kRunningTimeoutSeconds, 0.25);
}

// The number after `label` in the benchmark's report, from `from` on (-1: not found).
double reported_number(const std::string& report, const std::string& label, size_t from) {
  const size_t at = report.find(label, from);
  return at == std::string::npos ? -1.0 : std::stod(report.substr(at + label.size()));
}

// The benchmark times a p change three ways: with the pointer moving where nothing changes (frames at
// 60 Hz, those equal to the screen skipped), moving across a map (its tooltip follows: every frame
// differs) and at rest, where the frames are the workbench's own (RestingPace): the change's frame,
// two settling frames, then three per wake, one wake per 0.25 s at most, until the result's.
TEST_F(GuiTest, TheBenchmarkTimesASliderChangeWithThePointerMovingAndAtRest) {
  const std::string weights = save_random_vit(folder_ / "vit1601.safetensors", 40, 23);
  const nlohmann::json session = {{"model", weights}, {"image", asset_path("images/chelsea.png")}};
  ASSERT_EQ(run_gui(session, 4, "--bench 1"), 0) << log();
  const std::string report = log();
  const size_t moving = report.find("p changed with the pointer moving where nothing changes");
  const size_t hovering = report.find("p changed with the pointer moving across a map");
  const size_t at_rest = report.find("p changed with the pointer at rest");
  ASSERT_NE(moving, std::string::npos) << report;
  ASSERT_NE(hovering, std::string::npos) << report;
  ASSERT_NE(at_rest, std::string::npos) << report;
  const std::string frames = "frames drawn while the forward ran (median):";
  const std::string latency = "slider change -> updated pixels (median):";
  const std::string slowest = "slider change -> updated pixels (max):";
  for (const size_t mode : {moving, hovering, at_rest}) {
    EXPECT_GT(reported_number(report, latency, mode), 0.0) << report;
    EXPECT_GE(reported_number(report, slowest, mode), reported_number(report, latency, mode)) << report;
    EXPECT_GE(reported_number(report, frames, mode), 1.0) << report;  // the change's own frame
  }
  // Frames equal to the screen are skipped (the first load's at least, at 60 Hz).
  EXPECT_GT(reported_number(report, "frames skipped as showing the pixels already on screen:", 0), 0.0) << report;
  const double latency_at_rest = reported_number(report, latency, at_rest);
  EXPECT_LE(reported_number(report, frames, at_rest), 2.0 + 3.0 * std::ceil(latency_at_rest / 250.0)) << report;
  EXPECT_NE(report.find("linear layers: "), std::string::npos) << report;
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
