// The workbench under Xvfb, for the GUI tests: a session file drives it, it renders some frames and
// writes a screenshot plus shot.png.json (where each view was drawn, what each panel shows), and
// the tests compare pixels with the engine's own numbers.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/assets.h"
#include "core/image.h"
#include "models/inference.h"
#include "session/app_state.h"
#include "tests/test_folder.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace fs = std::filesystem;

const std::string kModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

inline bool have_xvfb() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

class GuiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)";
  }

  nlohmann::json base_session() const {
    return {{"model", kModel},    {"arch", "heads=2"},  {"image", asset_path("images/chelsea.png")},
            {"colormap", "gray"}, {"scale", "min-max"}, {"alpha", "constant"},
            {"opacity", 1.0},     {"layer", -1}};
  }

  // Runs the workbench headlessly on `session`; returns its exit code and leaves shot.png(.json).
  int run_gui(const nlohmann::json& session, int frames = 4, const std::string& extra = "") {
    const std::string session_path = (folder_ / "session.json").string();
    std::ofstream(session_path) << session.dump(2);
    // The workbench's recent-files list goes to the test's folder, not the developer's ~/.config.
    const std::string command =
        "XDG_CONFIG_HOME='" + (folder_ / "config").string() + "' xvfb-run -a -s '-screen 0 1600x1000x24' " +
        std::string(ATTNSCOPE_CLI) + " gui --session '" + session_path + "' --frames " + std::to_string(frames) +
        " --screenshot '" + shot() + "' " + extra + " > '" + (folder_ / "log.txt").string() + "' 2>&1";
    const int status = testing::cli_system(command);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string shot() const { return (folder_ / "shot.png").string(); }
  nlohmann::json shot_info() const {
    std::ifstream in(shot() + ".json");
    return nlohmann::json::parse(in);
  }
  std::string log() const {
    std::ifstream in(folder_ / "log.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The engine's attention row over the patch grid for the session's settings, [grid_h * grid_w].
  std::vector<float> engine_row(const nlohmann::json& session, Variant variant, int head) const {
    AppState state;
    apply_json(state, session);
    state.attention.variant = variant;
    LoadedModel model = load_model(kModel, ArchOverrides::parse("heads=2"), torch::kCPU);
    const RgbImage prepared =
        prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
    const InferenceResult result = run_inference(model, prepared, state.attention);
    const TokenLayout& layout = result.forward.layout;
    const int token = resolve_query(state.query, layout).token;
    const torch::Tensor row =
        result.forward.layers.back().row(0, head, token).slice(0, layout.prefix_tokens()).contiguous();
    return std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
  }

  // Mean gray level of the inner half of every patch cell of a drawn view.
  static std::vector<double> cell_levels(const cv::Mat& gray, const nlohmann::json& view, int grid_h, int grid_w) {
    std::vector<double> levels;
    const double cell_w = view["width"].get<double>() / grid_w, cell_h = view["height"].get<double>() / grid_h;
    for (int r = 0; r < grid_h; ++r)
      for (int c = 0; c < grid_w; ++c) {
        const cv::Rect inner(int(view["x"].get<double>() + (c + 0.25) * cell_w),
                             int(view["y"].get<double>() + (r + 0.25) * cell_h), int(cell_w / 2), int(cell_h / 2));
        levels.push_back(cv::mean(gray(inner))[0]);
      }
    return levels;
  }

  // The engine's last-layer T x T matrix of `head` for a session on any model, with the input
  // prepared as the workbench prepares it.
  static std::pair<TokenLayout, torch::Tensor> engine_matrix(const nlohmann::json& session,
                                                             const std::string& model_path, int head) {
    AppState state;
    apply_json(state, session);
    LoadedModel model = load_model(model_path, {}, torch::kCPU);
    const RgbImage prepared =
        prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
    const InferenceResult result = run_inference(model, prepared, state.attention);
    return {result.forward.layout, result.forward.layers.back().matrix(0, head)};
  }

  static std::vector<float> as_vector(const torch::Tensor& values) {
    const torch::Tensor flat = values.contiguous().to(torch::kFloat);
    return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
  }

  // The gray level of every patch cell of the screenshot's only view, after checking that the
  // workbench drew one view, without error, on the engine's grid.
  std::vector<double> first_view_levels(const TokenLayout& layout) const {
    const nlohmann::json info = shot_info();
    EXPECT_EQ(info["error"], "");
    if (info["views"].size() != 1u) {
      ADD_FAILURE() << info.dump();
      return std::vector<double>(size_t(layout.patch_tokens()), 0.0);
    }
    EXPECT_EQ(info["grid"][0].get<int>(), layout.grid_h);
    EXPECT_EQ(info["grid"][1].get<int>(), layout.grid_w);
    cv::Mat gray;
    cv::cvtColor(cv::imread(shot()), gray, cv::COLOR_BGR2GRAY);
    return cell_levels(gray, info["views"][0], layout.grid_h, layout.grid_w);
  }

  static int argmax(const std::vector<float>& values) {
    return int(std::max_element(values.begin(), values.end()) - values.begin());
  }

  TestFolder scratch_{"gui"};  // kept on failure, to look at the screenshot
  const fs::path& folder_ = scratch_.path();
};

}  // namespace attnscope
