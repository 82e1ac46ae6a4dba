// The real workbench under Xvfb: a session file sets variant, p, query and layout; the app renders
// some frames and writes a screenshot whose pixels are checked against the engine's own attention
// rows (with the gray colour map at full opacity each patch's gray level is its scaled value).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "analysis/attribution.h"
#include "analysis/focus_metrics.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "core/assets.h"
#include "core/image.h"
#include "core/recent_files.h"
#include "models/inference.h"
#include "session/app_state.h"
#include "session/session_history.h"
#include "views/option_catalog.h"

#include "gui_fixture.h"

namespace attnscope {
namespace test_gui {

TEST_F(GuiTest, OverlayHotSpotSitsWhereTheEngineRowPeaks) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["query"] = "2,4";
  session["head"] = 1;
  ASSERT_EQ(run_gui(session), 0) << log();
  const cv::Mat shot_bgr = cv::imread(shot());
  ASSERT_FALSE(shot_bgr.empty()) << log();
  EXPECT_EQ(shot_bgr.cols, 1600);
  EXPECT_EQ(shot_bgr.rows, 1000);
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["views"].size(), 1u) << info.dump();
  EXPECT_EQ(info["error"], "");
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  ASSERT_EQ(grid_h, 7);

  const std::vector<float> row = engine_row(session, Variant::Softmax, 1);
  cv::Mat gray;
  cv::cvtColor(shot_bgr, gray, cv::COLOR_BGR2GRAY);
  const std::vector<double> levels = cell_levels(gray, info["views"][0], grid_h, grid_w);
  const int hot_cell = int(std::max_element(levels.begin(), levels.end()) - levels.begin());
  EXPECT_EQ(hot_cell, argmax(row)) << "hot spot at patch " << hot_cell << ", engine peak at " << argmax(row);
  // Every patch, not only the peak: its gray level is its value on the min..max scale.
  const float vmin = *std::min_element(row.begin(), row.end()), vmax = *std::max_element(row.begin(), row.end());
  for (size_t i = 0; i < row.size(); ++i)
    EXPECT_NEAR(levels[i], std::round(255.0 * (row[i] - vmin) / (vmax - vmin)), 1.5) << "patch " << i;
}

// A Swin's shifted-window layer: the view lies on the layer's own 16x16 grid, the query's row is
// the engine's over that grid (zero outside the shifted window), and the outlined window is the
// engine's group of the query.
TEST_F(GuiTest, SwinShiftedWindowRowAndOutline) {
  const std::string model_path = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hier_cases/swin_a.safetensors";
  nlohmann::json session = {{"model", model_path}, {"image", asset_path("images/chelsea.png")},
                            {"colormap", "gray"},  {"opacity", 1.0},
                            {"alpha", "constant"}, {"layer", 1},
                            {"query", "3,3"},      {"windows", true}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["error"], "") << info.dump();
  EXPECT_EQ(info["family"], "swin");
  EXPECT_EQ(info["placement"]["access"], "shifted-window");
  EXPECT_EQ(info["placement"]["shift"], nlohmann::json::array({2, 2}));
  ASSERT_EQ(info["key_grid"], nlohmann::json::array({16, 16}));

  AppState state;
  apply_json(state, session);
  LoadedModel model = load_model(model_path, {}, torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
  const InferenceResult result = run_inference(model, prepared, state.attention);
  const AttentionCapture& layer = result.forward.layers[1];
  const int token = layer.layout.patch_token(3, 3);
  const torch::Tensor row = layer.key_grid(layer.row(0, 0, token)).reshape({-1}).contiguous();
  const std::vector<float> values(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
  // The shifted window of (3, 3): image rows and columns 2..5.
  std::vector<int> expected_window;
  for (int r = 2; r < 6; ++r)
    for (int c = 2; c < 6; ++c) expected_window.push_back(r * 16 + c);
  std::vector<int> drawn_window = info["query_window"].get<std::vector<int>>();
  std::sort(drawn_window.begin(), drawn_window.end());
  EXPECT_EQ(drawn_window, expected_window);

  cv::Mat gray;
  cv::cvtColor(cv::imread(shot()), gray, cv::COLOR_BGR2GRAY);
  ASSERT_EQ(info["views"].size(), 1u) << info.dump();
  const std::vector<double> levels = cell_levels(gray, info["views"][0], 16, 16);
  const float vmax = *std::max_element(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(levels[i], std::round(255.0 * values[i] / vmax), 2.5) << "cell " << i;
}

// `attnscope` with options only opens the workbench on the bundled FLatten demo model and sign
// image, and its overlay peaks where the engine's class-token row of the last block does.
// DINOv2 with registers: querying a register with direction "in" draws its column, the attention
// every patch gives that register, which is what the registers paper studies.
TEST_F(GuiTest, RegisterQueryShowsTheAttentionPatchesGiveIt) {
  const std::string model_path = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/dinov2_reg.pth";
  nlohmann::json session = {{"model", model_path}, {"image", asset_path("images/chelsea.png")},
                            {"colormap", "gray"},  {"scale", "min-max"},
                            {"alpha", "constant"}, {"opacity", 1.0},
                            {"layer", -1},         {"head", 1},
                            {"query", "reg1"},     {"direction", "in"}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const auto [layout, matrix] = engine_matrix(session, model_path, 1);
  ASSERT_EQ(layout.register_tokens, 4);
  const torch::Tensor column = matrix.select(1, resolve_query("reg1", layout).token).slice(0, layout.prefix_tokens());
  const std::vector<float> values = as_vector(column);
  const std::vector<double> levels = first_view_levels(layout);
  const float vmin = *std::min_element(values.begin(), values.end());
  const float vmax = *std::max_element(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(levels[i], std::round(255.0 * (values[i] - vmin) / (vmax - vmin)), 1.5) << "patch " << i;
}

// A session's patch query outside the model's grid is not replaced in silence: the workbench shows
// the layer's default query and says which query it could not take, and why.
TEST_F(GuiTest, AnOutOfGridQueryIsNamedWhereTheQueryIsShown) {
  nlohmann::json session = base_session();
  session["query"] = "20,20";
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  const std::string grid =
      std::to_string(info["grid"][0].get<int>()) + "x" + std::to_string(info["grid"][1].get<int>());
  ASSERT_LT(info["grid"][0].get<int>(), 20) << info.dump();
  EXPECT_EQ(info["query_token"], 0);
  const std::string note = info["query_note"];
  EXPECT_NE(note.find("20,20 is outside the " + grid + " patch grid; showing cls"), std::string::npos) << note;
}

// A TorchScript file opens in the workbench with the attention it reports; the hot spot is the
// recorded row's peak.
// The kernel comparison on a file that only reports its attention says why it has no numbers,
// instead of failing to draw an empty figure.
TEST_F(GuiTest, KernelComparisonOnRecordedAttentionSaysWhy) {
  nlohmann::json session = base_session();
  session["model"] = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/torchscript_cases/mixer_vit_reg2.pt";
  session.erase("arch");
  session["analysis"] = "kernel-diagnostics";
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_NE(info["error"].get<std::string>().find("no q and k"), std::string::npos) << info.dump();
}

TEST_F(GuiTest, TorchScriptModelShowsItsRecordedAttention) {
  const std::string model_path = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/torchscript_cases/mixer_vit_reg2.pt";
  nlohmann::json session = {{"model", model_path}, {"image", asset_path("images/chelsea.png")},
                            {"colormap", "gray"},  {"scale", "min-max"},
                            {"alpha", "constant"}, {"opacity", 1.0},
                            {"layer", -1},         {"head", 2},
                            {"query", "2,1"}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const auto [layout, matrix] = engine_matrix(session, model_path, 2);
  const std::vector<float> values =
      as_vector(matrix[resolve_query("2,1", layout).token].slice(0, layout.prefix_tokens()));
  const std::vector<double> levels = first_view_levels(layout);
  EXPECT_EQ(int(std::max_element(levels.begin(), levels.end()) - levels.begin()), argmax(values));
}

TEST_F(GuiTest, StartsOnTheBundledDefault) {
  const std::string command = "xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(ATTNSCOPE_CLI) +
                              " --colormap gray --opacity 1 --frames 4 --screenshot '" + shot() + "' > '" +
                              (folder_ / "log.txt").string() + "' 2>&1";
  ASSERT_EQ(testing::cli_system(command), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  EXPECT_EQ(info["model"], default_model_path());
  EXPECT_EQ(info["image"], default_image_path());
  ASSERT_EQ(info["views"].size(), 1u) << info.dump();
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  ASSERT_EQ(grid_h, 12);
  ASSERT_EQ(grid_w, 12);

  LoadedModel model = load_model(default_model_path(), {}, torch::kCPU);
  AppState state;
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(default_image_path(), kDefaultMaxPixels), state.input_settings(), model);
  const InferenceResult result = run_inference(model, prepared, state.attention);
  const int layer = info["layer"];
  const torch::Tensor row = result.forward.layers[size_t(layer)].row(0, 0, 0).slice(0, 1).contiguous();
  const std::vector<float> engine(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());

  cv::Mat gray;
  cv::cvtColor(cv::imread(shot()), gray, cv::COLOR_BGR2GRAY);
  const std::vector<double> levels = cell_levels(gray, info["views"][0], grid_h, grid_w);
  const int hot_cell = int(std::max_element(levels.begin(), levels.end()) - levels.begin());
  EXPECT_EQ(hot_cell, argmax(engine)) << "hot spot at patch " << hot_cell << ", engine peak at " << argmax(engine);
}

TEST_F(GuiTest, SideBySidePanelsShowTheirOwnVariantOnOneScale) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["compare"] = "linear";
  session["query"] = "3,3";
  session["head"] = 0;
  ASSERT_EQ(run_gui(session), 0) << log();
  const cv::Mat shot_bgr = cv::imread(shot());
  ASSERT_FALSE(shot_bgr.empty()) << log();
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["views"].size(), 2u) << info.dump();
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  cv::Mat gray;
  cv::cvtColor(shot_bgr, gray, cv::COLOR_BGR2GRAY);

  const std::vector<float> softmax = engine_row(session, Variant::Softmax, 0);
  const std::vector<float> linear = engine_row(session, Variant::Linear, 0);
  float vmin = softmax[0], vmax = softmax[0];  // one scale over both panels
  for (const auto* row : {&softmax, &linear})
    for (float v : *row) vmin = std::min(vmin, v), vmax = std::max(vmax, v);
  int differing = 0;
  std::vector<std::vector<double>> levels;
  for (int panel = 0; panel < 2; ++panel) {
    const auto& view = info["views"][size_t(panel)];
    ASSERT_EQ(view["panel"], panel);
    levels.push_back(cell_levels(gray, view, grid_h, grid_w));
    const auto& row = panel == 0 ? softmax : linear;
    for (size_t i = 0; i < row.size(); ++i)
      EXPECT_NEAR(levels[size_t(panel)][i], std::round(255.0 * (row[i] - vmin) / (vmax - vmin)), 1.5)
          << "panel " << panel << " patch " << i;
  }
  for (size_t i = 0; i < softmax.size(); ++i) differing += std::abs(levels[0][i] - levels[1][i]) > 3.0;
  // Softmax concentrates where ReLU linear attention spreads out: the panels must differ visibly.
  EXPECT_GT(differing, 10);
}

// A second file of the test model, for a model change; and a session with a kernel swap, a knob
// and an ablation, the state a model change must not carry over in silence.
std::string copy_of_the_model(const fs::path& folder) {
  const std::string other = (folder / "other.safetensors").string();
  fs::copy_file(kModel, other, fs::copy_options::overwrite_existing);
  return other;
}
nlohmann::json swapped_and_ablated(nlohmann::json session) {
  session["variant"] = "focused";
  session["p"] = 2;
  session["ablate"] = "0.1";
  return session;
}

// Opening another model (the model field's Enter, scripted by --open-model) does not carry the last
// model's kernel swap, knobs or ablations over in silence: they go back to their defaults and the
// status line names each; the new model's panel shows its own attention.
TEST_F(GuiTest, AModelChangeResetsTheLastModelsSettingsAndSaysWhich) {
  const std::string other = copy_of_the_model(folder_);
  const nlohmann::json session = swapped_and_ablated(base_session());
  ASSERT_EQ(run_gui(session, 3, "--open-model '" + other + "'"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["model"], other) << info.dump();
  const std::string note = info["info"];
  for (const char* change : {"variant focused -> native", "p 2 -> 3", "ablate 0.1 -> none"})
    EXPECT_NE(note.find(change), std::string::npos) << change << " in: " << note;
  ASSERT_EQ(info["panels"].size(), 1u) << info.dump();
  EXPECT_EQ(info["panels"][0]["model"], other) << info.dump();
  EXPECT_FALSE(info["panels"][0]["swapped"].get<bool>()) << info.dump();
}

// Ctrl+Z after a model change (scripted: --open-model, then --keys) brings the last model back with
// its kernel swap, knobs and ablations, through the session history; Ctrl+Shift+Z redoes it.
TEST_F(GuiTest, UndoAndRedoWalkTheSessionHistory) {
  const std::string other = copy_of_the_model(folder_);
  const nlohmann::json session = swapped_and_ablated(base_session());
  ASSERT_EQ(run_gui(session, 3, "--open-model '" + other + "' --keys ctrl+z"), 0) << log();
  nlohmann::json info = shot_info();
  EXPECT_EQ(info["model"], kModel) << info.dump();
  const std::string note = info["info"];
  EXPECT_EQ(note.rfind("undo: ", 0), 0u) << note;
  for (const char* option : {"model", "variant", "p", "ablate"})
    EXPECT_NE(note.find(option), std::string::npos) << option << " in: " << note;
  ASSERT_EQ(info["panels"].size(), 1u) << info.dump();
  EXPECT_EQ(info["panels"][0]["model"], kModel) << info.dump();
  EXPECT_TRUE(info["panels"][0]["swapped"].get<bool>()) << info.dump();  // focused on a softmax model again

  ASSERT_EQ(run_gui(session, 3, "--open-model '" + other + "' --keys 'ctrl+z;ctrl+shift+z'"), 0) << log();
  info = shot_info();
  EXPECT_EQ(info["model"], other) << info.dump();
  EXPECT_EQ(info["info"].get<std::string>().rfind("redo: ", 0), 0u) << info.dump();
  EXPECT_FALSE(info["panels"][0]["swapped"].get<bool>()) << info.dump();
}

// The models and images the workbench opened are remembered for File > Recent, newest first, in
// $XDG_CONFIG_HOME/attnscope/recent.json, after their result arrived (a refused model is not).
TEST_F(GuiTest, OpenedModelsAndImagesBecomeRecentFiles) {
  const std::string other = copy_of_the_model(folder_);
  ASSERT_EQ(run_gui(base_session(), 3, "--open-model '" + other + "'"), 0) << log();
  const nlohmann::json recent =
      nlohmann::json::parse(read_file_contents(folder_ / "config" / "attnscope" / "recent.json"));
  EXPECT_EQ(recent["models"], nlohmann::json({other, kModel})) << recent;
  EXPECT_EQ(recent["images"], nlohmann::json({asset_path("images/chelsea.png")})) << recent;
  // A refused model does not join the list.
  const std::string garbage = (folder_ / "garbage.safetensors").string();
  std::ofstream(garbage) << std::string(300, 'x');
  ASSERT_EQ(run_gui(base_session(), 3, "--open-model '" + garbage + "'"), 0) << log();
  const nlohmann::json again =
      nlohmann::json::parse(read_file_contents(folder_ / "config" / "attnscope" / "recent.json"));
  EXPECT_EQ(again["models"], nlohmann::json({kModel, other})) << again;
}

// The list itself: newest first, once each, at most kKept; kept across instances; a damaged file
// is an empty list, overwritten by the next addition.
TEST(WorkbenchState, RecentFilesKeepTheNewestOnceEach) {
  TestFolder folder("recent-files");
  const std::string path = (folder.path() / "deep" / "recent.json").string();
  {
    RecentFiles recent(path);
    for (int i = 0; i < 12; ++i) recent.add_model("m" + std::to_string(i));
    recent.add_model("m5");
    recent.add_image("cat.png");
    EXPECT_EQ(recent.models().front(), "m5");
    EXPECT_EQ(recent.models().size(), RecentFiles::kKept);
  }
  RecentFiles reread(path);
  EXPECT_EQ(reread.models(), (std::vector<std::string>{"m5", "m11", "m10", "m9", "m8", "m7", "m6", "m4", "m3", "m2"}));
  EXPECT_EQ(reread.images(), std::vector<std::string>{"cat.png"});
  write_file_contents(path, "{\"models\": [1, \"ok\", {\"x\": 2}], \"images\": 7");
  RecentFiles damaged(path);
  EXPECT_TRUE(damaged.models().empty());
  damaged.add_image("dog.png");
  EXPECT_EQ(RecentFiles(path).images(), std::vector<std::string>{"dog.png"});
}

// A window that does not tile the grid (8 on the bundled model's 12 x 12) is computed with narrower
// edge windows, and the panel says so instead of leaving the slider's 8 to speak for every window.
TEST_F(GuiTest, AWindowThatDoesNotTileTheGridIsNamedAsAdjusted) {
  nlohmann::json session = base_session();
  session["model"] = asset_path("models/flatten.safetensors");
  session.erase("arch");
  session["variant"] = "window";
  session["window"] = 8;
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  nlohmann::json info = shot_info();
  ASSERT_EQ(info["grid"], nlohmann::json({12, 12})) << info.dump();
  EXPECT_NE(info["panels"][0]["note"].get<std::string>().find(
                "window 8 does not tile the 12x12 grid: the last windows are 4 rows by 4 columns"),
            std::string::npos)
      << info["panels"][0]["note"];
  session["window"] = 6;  // tiles it: no note
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  info = shot_info();
  EXPECT_EQ(info["panels"][0]["note"].get<std::string>().find("does not tile"), std::string::npos) << info.dump();
}

// The image as a canvas: the wheel zooms in whole steps about the cursor (the image point under it
// stays put), and a click in the zoomed view picks the patch under it, not the one the unzoomed view
// has there.
TEST_F(GuiTest, WheelZoomsAboutTheCursorAndClicksPickThePatchUnderIt) {
  nlohmann::json session = base_session();
  session["model"] = asset_path("models/flatten.safetensors");
  session.erase("arch");
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  const nlohmann::json plain = shot_info();
  const auto& view = plain["views"][0];
  const double x = view["x"], y = view["y"], side = view["width"];
  const int grid = plain["grid"][0];
  // Two notches at a quarter of the view (zoom 1 + 2), then a click at its middle.
  const double wheel_x = x + side / 4, wheel_y = y + side / 4, click_x = x + side / 2 + 7, click_y = y + side / 2 + 7;
  ASSERT_EQ(run_gui(session, 3,
                    "--wheel '" + std::to_string(wheel_x) + "," + std::to_string(wheel_y) + ",2' --click '" +
                        std::to_string(click_x) + "," + std::to_string(click_y) + "'"),
            0)
      << log();
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["zoom"], 3) << info.dump();
  // The point under the wheel stayed: a quarter of the view is still a quarter of the image.
  const double corner_x = info["zoom_corner"][0], corner_y = info["zoom_corner"][1];
  EXPECT_NEAR(corner_x + 0.25 / 3, 0.25, 1e-4);
  EXPECT_NEAR(corner_y + 0.25 / 3, 0.25, 1e-4);
  const double u = corner_x + (click_x - x) / side / 3, v = corner_y + (click_y - y) / side / 3;
  const int col = int(u * grid), row = int(v * grid);
  EXPECT_EQ(info["query_token"], 1 + row * grid + col) << "patch (" << row << ", " << col << "): " << info.dump();
  EXPECT_NE(info["query_token"], 1 + (grid / 2) * grid + grid / 2);  // where the unzoomed view has the click
}

// A second export of the same figure from the workbench is numbered instead of refused (it named
// the command line's --overwrite, not the checkbox); with "overwrite" ticked it replaces the first.
TEST_F(GuiTest, RepeatExportsAreNumberedUnlessOverwriteIsTicked) {
  const std::string out = (folder_ / "figures").string();
  nlohmann::json session = base_session();
  for (int run = 0; run < 2; ++run) ASSERT_EQ(run_gui(session, 3, "--export-on-screen '" + out + "'"), 0) << log();
  EXPECT_TRUE(fs::exists(folder_ / "figures" / "chelsea_panels.png"));
  EXPECT_TRUE(fs::exists(folder_ / "figures" / "chelsea_panels_2.png"));
  EXPECT_TRUE(fs::exists(folder_ / "figures" / "chelsea_panels_2.png.session.json"));
  EXPECT_NE(shot_info()["info"].get<std::string>().find("chelsea_panels_2.png"), std::string::npos)
      << shot_info()["info"];
  session["overwrite"] = "on";
  ASSERT_EQ(run_gui(session, 3, "--export-on-screen '" + out + "'"), 0) << log();
  EXPECT_FALSE(fs::exists(folder_ / "figures" / "chelsea_panels_3.png"));
  EXPECT_EQ(shot_info()["error"], "") << shot_info().dump();
}

// "Preview at print size" draws what "Export what is on screen" would write, with the export's code, at
// 96 dpi: at a single column, 234 pt wide (312 px), its text 5-9 pt, nothing written. Two panels of one
// variant are numbered apart in the figure's data (their names clashed and the export was refused).
TEST_F(GuiTest, PrintPreviewShowsTheExportAtPrintSize) {
  nlohmann::json session = base_session();
  session["width-pt"] = "single";
  session["compare"] = "native,softmax";
  session["analysis"] = "metrics";
  ASSERT_EQ(run_gui(session, 3, "--print-preview"), 0) << log();
  const nlohmann::json info = shot_info();
  ASSERT_TRUE(info.contains("print_preview")) << info.dump();
  const nlohmann::json& preview = info["print_preview"];
  EXPECT_EQ(preview["error"], "") << preview.dump();
  ASSERT_EQ(preview["figures"].size(), 2u) << "the panels and the open analysis view";
  EXPECT_EQ(preview["figures"][0]["name"], "panels");
  EXPECT_EQ(preview["figures"][1]["name"], "metrics view");
  for (const auto& figure : preview["figures"]) {
    SCOPED_TRACE(figure.dump());
    EXPECT_NEAR(figure["width_pt"].get<double>(), 234.0, 1.0);
    EXPECT_NEAR(figure["width_px"].get<double>(), 312.0, 2.0) << "96 dpi";
    EXPECT_GE(figure["smallest_text_pt"].get<double>(), 5.0);
    EXPECT_LE(figure["largest_text_pt"].get<double>(), 9.0);
  }
  EXPECT_EQ(info["error"], "") << info.dump();
  EXPECT_FALSE(fs::exists(folder_ / "figures"));
}

// At 1280 x 800 the analysis column is narrower than the DLA grid's labels at the smallest font:
// the figure is drawn smaller instead of refused, its readouts above it, the panel's title naming
// the ablated head (issue 58).
TEST_F(GuiTest, DlaViewFitsA1280By800Window) {
  nlohmann::json session = base_session();
  session["model"] = asset_path("models/flatten.safetensors");
  session.erase("arch");
  session["analysis"] = "dla";
  session["ablate"] = "3.1";
  ASSERT_EQ(run_gui(session, 3, "--width 1280 --height 800"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "") << info.dump();
  bool grid_drawn = false;
  for (const auto& view : info["views"]) grid_drawn |= view["panel"] == -2 && view["width"].get<double>() > 40;
  EXPECT_TRUE(grid_drawn) << info["views"];
  EXPECT_NE(info["headings"][0][0].get<std::string>().find("ablate 3.1"), std::string::npos) << info["headings"];
}

TEST_F(GuiTest, ClickingAPatchMakesItTheQuery) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["query"] = "cls";
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json before = shot_info();
  ASSERT_EQ(before["views"].size(), 1u);
  EXPECT_EQ(before["query_token"], 0);
  const auto& view = before["views"][0];
  const int grid_h = before["grid"][0], grid_w = before["grid"][1];
  const int row = 5, col = 1;
  const double x = view["x"].get<double>() + (col + 0.5) * view["width"].get<double>() / grid_w;
  const double y = view["y"].get<double>() + (row + 0.5) * view["height"].get<double>() / grid_h;

  ASSERT_EQ(run_gui(session, 4, "--click " + std::to_string(x) + "," + std::to_string(y)), 0) << log();
  const nlohmann::json after = shot_info();
  EXPECT_EQ(after["query_token"], 1 + row * grid_w + col);  // the class token comes first
  // And the overlay now shows that patch's attention row.
  session["query"] = std::to_string(row) + "," + std::to_string(col);
  const std::vector<float> engine = engine_row(session, Variant::Softmax, 0);
  cv::Mat gray;
  cv::cvtColor(cv::imread(shot()), gray, cv::COLOR_BGR2GRAY);
  const std::vector<double> levels = cell_levels(gray, after["views"][0], grid_h, grid_w);
  const float vmin = *std::min_element(engine.begin(), engine.end());
  const float vmax = *std::max_element(engine.begin(), engine.end());
  for (size_t i = 0; i < engine.size(); ++i)
    EXPECT_NEAR(levels[i], std::round(255.0 * (engine[i] - vmin) / (vmax - vmin)), 1.5) << "patch " << i;
}

TEST_F(GuiTest, GradCamViewShowsTheEnginesMap) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["analysis"] = "gradcam";
  session["class"] = 3;
  ASSERT_EQ(run_gui(session), 0) << log();
  const cv::Mat shot_bgr = cv::imread(shot());
  ASSERT_FALSE(shot_bgr.empty()) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  const nlohmann::json* cam_view = nullptr;
  for (const auto& view : info["views"])
    if (view["panel"] == -1) cam_view = &view;
  ASSERT_NE(cam_view, nullptr) << info.dump();

  AppState state;
  apply_json(state, session);
  LoadedModel model = load_model(kModel, ArchOverrides::parse("heads=2"), torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
  GradCamOptions options;
  options.target = class_target(3);
  const GradCamResult cam = grad_cam(model.vit(), image_to_tensor(prepared), state.attention, options);
  cv::Mat gray;
  cv::cvtColor(shot_bgr, gray, cv::COLOR_BGR2GRAY);
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  const std::vector<double> levels = cell_levels(gray, *cam_view, grid_h, grid_w);
  // A map with contrast, so that matching it means something.
  EXPECT_GT(*std::max_element(levels.begin(), levels.end()) - *std::min_element(levels.begin(), levels.end()), 100.0);
  const torch::Tensor scaled = cam.scaled.reshape({-1});
  for (int i = 0; i < grid_h * grid_w; ++i)
    EXPECT_NEAR(levels[size_t(i)], std::round(255.0 * std::clamp(scaled[i].item<double>(), 0.0, 1.0)), 1.5)
        << "patch " << i;
}

TEST_F(GuiTest, VideoFramesFlowThroughTheLatestWinsWorker) {
  // A short clip of a bright square moving over a dark background.
  const std::string video = (folder_ / "clip.avi").string();
  const int frames = 24;
  {
    cv::VideoWriter writer(video, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 30.0, cv::Size(112, 112));
    ASSERT_TRUE(writer.isOpened());
    for (int i = 0; i < frames; ++i) {
      cv::Mat frame(112, 112, CV_8UC3, cv::Scalar(20, 20, 20));
      cv::rectangle(frame, cv::Rect(4 * i % 90, 40, 20, 20), cv::Scalar(255, 255, 255), cv::FILLED);
      writer.write(frame);
    }
  }
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  ASSERT_EQ(run_gui(session, 3, "--video '" + video + "'"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "") << info.dump();
  EXPECT_EQ(info["video_frames"], frames);
  // Whatever was dropped on the way, the last frame is what the views end on.
  EXPECT_EQ(info["shown_frame"], frames);
  EXPECT_GE(info["results"].get<int>(), 1);
  EXPECT_EQ(info["views"].size(), 1u);
}

// Video frames pass --max-pixels as images do (issue 60: a 3.6 MB AVI declaring 16000 x 16000 frames
// ended the workbench with an uncaught out-of-memory in the video thread): the video is refused
// naming the budget, and the workbench goes on with the image.
TEST_F(GuiTest, VideoFramesPassTheMaxPixelsGuard) {
  const std::string video = (folder_ / "large.avi").string();
  {
    cv::VideoWriter writer(video, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 30.0, cv::Size(160, 120));
    ASSERT_TRUE(writer.isOpened());
    for (int i = 0; i < 4; ++i) writer.write(cv::Mat(120, 160, CV_8UC3, cv::Scalar(40 * i, 20, 20)));
  }
  nlohmann::json session = base_session();
  session["image"] = asset_path("images/sign_4.png");  // 96 x 96: within the budget below
  session["max-pixels"] = 10000;
  ASSERT_EQ(run_gui(session, 4, "--video '" + video + "'"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_NE(info["input_error"].get<std::string>().find("160x120 pixels, more than --max-pixels 10000"),
            std::string::npos)
      << info.dump();
  EXPECT_GE(info["results"].get<int>(), 1) << "the image was not run";
}

// A video or camera that cannot be opened says so until the input changes: the inference that
// runs on the session's image meanwhile does not clear the message.
TEST_F(GuiTest, VideoErrorsStayUntilTheInputChanges) {
  const std::string text = (folder_ / "notes.mp4").string();
  std::ofstream(text) << "not a video\n";
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {(folder_ / "missing.mp4").string(), "no such video file"},
      {text, "notes.mp4"},
      {"camera:99", "camera:99"},
      {"camera:abc", "bad camera 'camera:abc'"},
  };
  for (const auto& [input, phrase] : inputs) {
    SCOPED_TRACE(input);
    ASSERT_EQ(run_gui(base_session(), 4, "--video '" + input + "'"), 0) << log();
    const nlohmann::json info = shot_info();
    EXPECT_GE(info["results"].get<int>(), 1) << "the image behind it was not run";
    EXPECT_NE(info["input_error"].get<std::string>().find(phrase), std::string::npos) << info.dump();
  }
}

TEST_F(GuiTest, BadModelShowsAnErrorAndKeepsRunning) {
  const std::string garbage = (folder_ / "garbage.safetensors").string();
  std::ofstream(garbage) << std::string(300, 'x');
  nlohmann::json session = base_session();
  session["model"] = garbage;
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_NE(info["error"].get<std::string>().find("garbage.safetensors"), std::string::npos) << info.dump();
  EXPECT_TRUE(info["views"].empty());
  EXPECT_FALSE(cv::imread(shot()).empty());
}

// A model named as the hub names it opens in the workbench from the Hugging Face cache.
// A model that fails to open while another is shown: the error names it, and the model field goes
// back to the model the panels still show (it kept the refused path).
TEST_F(GuiTest, ARefusedModelLeavesTheFieldOnTheShownModel) {
  const std::string garbage = (folder_ / "garbage.safetensors").string();
  std::ofstream(garbage) << std::string(300, 'x');
  ASSERT_EQ(run_gui(base_session(), 3, "--open-model '" + garbage + "'"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["model"], kModel) << info.dump();
  const std::string error = info["error"];
  EXPECT_NE(error.find("garbage.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("(still showing " + kModel + ")"), std::string::npos) << error;
  EXPECT_EQ(info["panels"][0]["model"], kModel) << info.dump();
}

TEST_F(GuiTest, HubNamedModelOpensFromTheCache) {
  const std::filesystem::path cache = folder_ / "hub";
  const std::string commit(40, '7');
  const std::filesystem::path snapshot = cache / "models--attnscope--demo" / "snapshots" / commit;
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(cache / "models--attnscope--demo" / "refs");
  std::ofstream(cache / "models--attnscope--demo" / "refs" / "main") << commit;
  std::filesystem::copy_file(kModel, snapshot / "model.safetensors");
  setenv("HF_HUB_CACHE", cache.string().c_str(), 1);
  nlohmann::json session = base_session();
  session["model"] = "hf-hub:attnscope/demo";
  const int code = run_gui(session, 4);
  unsetenv("HF_HUB_CACHE");
  ASSERT_EQ(code, 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info.value("error", std::string()), "") << info.dump();
  EXPECT_GE(info["results"].get<int>(), 1) << info.dump();
  // The panel's provenance (its title's tooltip): the repo, revision, commit and the file read.
  const std::string provenance = info["panels"][0]["provenance"];
  for (const std::string& part : {std::string("hf-hub:attnscope/demo"), std::string("attnscope/demo, revision main"),
                                  "commit " + commit, std::string("model.safetensors")})
    EXPECT_NE(provenance.find(part), std::string::npos) << part << " in: " << provenance;
}

TEST_F(GuiTest, SessionWithWorkbenchKeysDrivesTheHeadlessRun) {
  nlohmann::json session = base_session();
  session["variant"] = "window";
  session["compare"] = "softmax,focused";
  session["view"] = "heads";
  session["analysis"] = "spectrum";
  session["out"] = (folder_ / "run").string();
  const std::string session_path = (folder_ / "session.json").string();
  std::ofstream(session_path) << session.dump(2);
  const std::string command = std::string(ATTNSCOPE_CLI) + " run --session '" + session_path + "' > /dev/null 2>&1";
  ASSERT_EQ(testing::cli_system(command), 0);
  std::ifstream in(folder_ / "run" / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["variant"], "window");
}

TEST_F(GuiTest, RolloutViewShowsTheEnginesRollout) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["analysis"] = "rollout";
  session["fusion"] = "max";
  session["discard"] = 0.5;
  ASSERT_EQ(run_gui(session), 0) << log();
  const cv::Mat shot_bgr = cv::imread(shot());
  ASSERT_FALSE(shot_bgr.empty()) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  const nlohmann::json* rollout_view = nullptr;
  for (const auto& view : info["views"])
    if (view["panel"] == -2) rollout_view = &view;
  ASSERT_NE(rollout_view, nullptr) << info.dump();

  AppState state;
  apply_json(state, session);
  LoadedModel model = load_model(kModel, ArchOverrides::parse("heads=2"), torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
  const InferenceResult result = run_inference(model, prepared, state.attention);
  RolloutOptions options;
  options.fusion = HeadFusion::Max;
  options.discard_ratio = 0.5;
  options.query = resolve_query(state.query, result.forward.layout).token;
  const torch::Tensor map = attention_rollout(result.forward.layers, options).patch_map.reshape({-1}).contiguous();
  const std::vector<float> engine(map.data_ptr<float>(), map.data_ptr<float>() + map.numel());

  cv::Mat gray;
  cv::cvtColor(shot_bgr, gray, cv::COLOR_BGR2GRAY);
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  const std::vector<double> levels = cell_levels(gray, *rollout_view, grid_h, grid_w);
  EXPECT_GT(*std::max_element(levels.begin(), levels.end()) - *std::min_element(levels.begin(), levels.end()), 100.0);
  const float vmin = *std::min_element(engine.begin(), engine.end());
  const float vmax = *std::max_element(engine.begin(), engine.end());
  for (size_t i = 0; i < engine.size(); ++i)
    EXPECT_NEAR(levels[i], std::round(255.0 * (engine[i] - vmin) / (vmax - vmin)), 1.5) << "patch " << i;
}

// The metrics view's numbers (exported into the screenshot's JSON) against summarise_focus on the
// engine's own rows: per panel and head, with the box's mass only when a box is set.
void expect_engine_metrics(const nlohmann::json& session, const nlohmann::json& info, const std::string& box) {
  ASSERT_TRUE(info.contains("metrics")) << info.dump();
  const nlohmann::json& metrics = info["metrics"];
  ASSERT_EQ(metrics.size(), 4u) << metrics.dump();  // 2 panels x 2 heads
  AppState state;
  apply_json(state, session);
  LoadedModel model = load_model(kModel, ArchOverrides::parse("heads=2"), torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
  size_t index = 0;
  for (Variant variant : {Variant::Softmax, Variant::Linear}) {
    state.attention.variant = variant;
    const InferenceResult result = run_inference(model, prepared, state.attention);
    const TokenLayout& layout = result.forward.layout;
    const int token = resolve_query(state.query, layout).token;
    const torch::Tensor coverage = box.empty() ? torch::Tensor() : box_coverage(parse_patch_box(box), layout);
    for (int head = 0; head < 2; ++head, ++index) {
      const torch::Tensor row = result.forward.layers.back().row(0, head, token).slice(0, layout.prefix_tokens());
      const FocusSummary expected = summarise_focus(row, 10, coverage);
      const nlohmann::json& shown = metrics[index];
      EXPECT_EQ(shown["panel"], variant == Variant::Softmax ? 0 : 1);
      EXPECT_EQ(shown["head"], head);
      EXPECT_NEAR(shown["entropy"].get<double>(), expected.entropy, 1e-5) << shown.dump();
      EXPECT_NEAR(shown["top_k_mass"].get<double>(), expected.top_k_mass, 1e-5) << shown.dump();
      EXPECT_NEAR(shown["gini"].get<double>(), expected.gini, 1e-5) << shown.dump();
      if (box.empty()) {
        EXPECT_TRUE(shown["box_mass"].is_null()) << shown.dump();
      } else {
        ASSERT_TRUE(expected.box_mass.has_value());
        ASSERT_TRUE(shown["box_mass"].is_number()) << shown.dump();
        EXPECT_NEAR(shown["box_mass"].get<double>(), *expected.box_mass, 1e-5) << shown.dump();
      }
    }
  }
}

// Two panels (softmax, linear) queried at patch (3, 3) with the metrics view open.
void show_metrics(nlohmann::json& session) {
  session["variant"] = "softmax";
  session["compare"] = "linear";
  session["query"] = "3,3";
  session["analysis"] = "metrics";
}

TEST_F(GuiTest, MetricsTableMatchesTheEngineWithTheSessionsBox) {
  nlohmann::json session = base_session();
  show_metrics(session);
  session["box"] = "1,2,4,5";
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  EXPECT_EQ(info["box"], "1,2,4,5");
  expect_engine_metrics(session, info, "1,2,4,5");
  // The box is outlined on both panels' images: its top edge runs through the outline colour.
  const cv::Mat shot_bgr = cv::imread(shot());
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];
  int outlined = 0;
  for (const auto& view : info["views"]) {
    if (view["panel"] < 0) continue;
    const double cell_w = view["width"].get<double>() / grid_w, cell_h = view["height"].get<double>() / grid_h;
    const int x = int(view["x"].get<double>() + 3.5 * cell_w), y = int(view["y"].get<double>() + 1 * cell_h);
    bool found = false;
    for (int dy = -2; dy <= 2; ++dy) {
      const cv::Vec3b bgr = shot_bgr.at<cv::Vec3b>(y + dy, x);
      found = found || (bgr[0] > 200 && bgr[1] > 150 && bgr[1] < 240 && bgr[2] < 110);
    }
    outlined += found;
  }
  EXPECT_EQ(outlined, 2);
}

TEST_F(GuiTest, RightDragDrawsTheMetricsBox) {
  nlohmann::json session = base_session();
  show_metrics(session);
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json before = shot_info();
  EXPECT_EQ(before["box"], "");
  expect_engine_metrics(session, before, "");  // no box: no mass in it

  const auto& view = before["views"][0];
  const int grid_h = before["grid"][0], grid_w = before["grid"][1];
  auto centre = [&](int row, int col) {
    return std::to_string(view["x"].get<double>() + (col + 0.5) * view["width"].get<double>() / grid_w) + "," +
           std::to_string(view["y"].get<double>() + (row + 0.5) * view["height"].get<double>() / grid_h);
  };
  // From patch (4, 5) up to (1, 1): the box covers both ends whichever way it is dragged.
  ASSERT_EQ(run_gui(session, 4, "--drag " + centre(4, 5) + "," + centre(1, 1)), 0) << log();
  const nlohmann::json after = shot_info();
  EXPECT_EQ(after["box"], "1,1,5,6");
  EXPECT_EQ(after["query_token"], before["query_token"]);  // a drag is not a click
  expect_engine_metrics(session, after, "1,1,5,6");
}

TEST_F(GuiTest, AttributionViewShowsEachPanelsOwnMapWithItsDeletionAuc) {
  nlohmann::json session = base_session();
  session["variant"] = "softmax";
  session["compare"] = "linear";
  session["analysis"] = "attribution";
  session["method"] = "gradcam++";
  session["class"] = 3;
  session["gradcam-layer"] = "blocks.0.norm1";
  session["steps"] = 5;
  ASSERT_EQ(run_gui(session), 0) << log();
  const cv::Mat shot_bgr = cv::imread(shot());
  ASSERT_FALSE(shot_bgr.empty()) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  ASSERT_EQ(info["attributions"].size(), 2u) << info.dump();
  ASSERT_EQ(info["views"].size(), 2u) << info.dump();
  cv::Mat gray;
  cv::cvtColor(shot_bgr, gray, cv::COLOR_BGR2GRAY);
  const int grid_h = info["grid"][0], grid_w = info["grid"][1];

  AppState state;
  apply_json(state, session);
  LoadedModel model = load_model(kModel, ArchOverrides::parse("heads=2"), torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, kDefaultMaxPixels), state.input_settings(), model);
  const std::vector<AttentionSettings> panels = state.panel_settings();
  std::vector<std::vector<double>> levels;
  for (size_t p = 0; p < panels.size(); ++p) {
    SCOPED_TRACE("panel " + std::to_string(p));
    const auto& view = info["views"][p];
    EXPECT_EQ(view["panel"], int(p));
    AttributionRequest request;
    request.method = AttributionMethod::GradCamPlusPlus;
    request.layer = "blocks.0.norm1";
    request.target = class_target(3);
    const AttributionMap map =
        compute_attribution(model.vit(), image_to_tensor(prepared), panels[p], model.normalization, request);
    levels.push_back(cell_levels(gray, view, grid_h, grid_w));
    const torch::Tensor values = map.map.reshape({-1});
    for (int i = 0; i < grid_h * grid_w; ++i)
      EXPECT_NEAR(levels.back()[size_t(i)], std::round(255.0 * std::clamp(values[i].item<double>(), 0.0, 1.0)), 1.5)
          << "patch " << i;
    const auto& readout = info["attributions"][p];
    EXPECT_EQ(readout["method"], "gradcam++");
    EXPECT_EQ(readout["class"], 3);
    EXPECT_GE(readout["deletion_auc"].get<double>(), 0.0);
    EXPECT_GE(readout["random_deletion_auc"].get<double>(), 0.0);
  }
  // Panel 2 shows linear attention's own map, not a copy of panel 1's.
  int differing = 0;
  for (size_t i = 0; i < levels[0].size(); ++i) differing += std::abs(levels[0][i] - levels[1][i]) > 3.0;
  EXPECT_GT(differing, 5);
}

}  // namespace test_gui
}  // namespace attnscope

namespace attnscope {
namespace test_gui {

// The workbench's fields in the one option registry: a saved session restores exactly, and bad
// values are refused with the option's name.
// What a model change resets: every option of the Attention group, each named with its old and new
// value; the rest of the session (image, layer, colour map) stays.
TEST(WorkbenchState, AModelChangeResetsTheAttentionOptionsOnly) {
  AppState state;
  apply_json(state, {{"variant", "window"}, {"window", 4}, {"ablate", "1.0"}, {"layer", 2}, {"colormap", "magma"}});
  const std::vector<std::string> changed = reset_attention_options(state);
  EXPECT_EQ(changed, (std::vector<std::string>{"variant window -> native", "window 4 -> 0", "ablate 1.0 -> none"}));
  EXPECT_EQ(state.attention.variant, Variant::Native);
  EXPECT_EQ(state.attention.window, 0);
  EXPECT_EQ(state.layer, 2);
  EXPECT_EQ(state.colormap, Colormap::Magma);
  EXPECT_TRUE(reset_attention_options(state).empty());
}

// The history behind undo and redo: equal sessions are one step, a new step after an undo drops the
// undone ones, and it keeps the last kSteps.
TEST(WorkbenchState, SessionHistoryUndoesRedoesAndForgetsTheUndoneBranch) {
  SessionHistory history;
  EXPECT_FALSE(history.undo());
  history.record({{"p", "3"}});
  history.record({{"p", "3"}});
  EXPECT_FALSE(history.can_undo());
  history.record({{"p", "2"}});
  history.record({{"p", "1"}});
  EXPECT_EQ(history.undo(), nlohmann::json({{"p", "2"}}));
  EXPECT_EQ(history.undo(), nlohmann::json({{"p", "3"}}));
  EXPECT_FALSE(history.undo());
  EXPECT_EQ(history.redo(), nlohmann::json({{"p", "2"}}));
  history.record({{"p", "5"}});  // a new branch: "1" is gone
  EXPECT_FALSE(history.can_redo());
  EXPECT_EQ(history.undo(), nlohmann::json({{"p", "2"}}));
  for (size_t i = 0; i < SessionHistory::kSteps + 10; ++i) history.record({{"step", i}});
  size_t undone = 0;
  while (history.undo()) ++undone;
  EXPECT_EQ(undone, SessionHistory::kSteps - 1);
}

// A journal's columns by name: --width-pt single is 3.25 in, double 6.75 in; a number still works.
TEST(WorkbenchState, FigureWidthsTakeAJournalsColumnsByName) {
  AppState state;
  set_option(state, "width-pt", "single");
  EXPECT_EQ(state.figure.width_pt, 3.25 * 72);
  set_option(state, "width-pt", "double");
  EXPECT_EQ(state.figure.width_pt, 6.75 * 72);
  set_option(state, "width-pt", "300");
  EXPECT_EQ(state.figure.width_pt, 300);
  EXPECT_THROW(set_option(state, "width-pt", "triple"), std::invalid_argument);
}

TEST(WorkbenchState, SessionRoundTripsAndRejectsBadValues) {
  AppState state;
  apply_json(state, {{"variant", "focused"},
                     {"compare", "softmax,window,anchor"},
                     {"p", 4.5},
                     {"view", "heads"},
                     {"colormap", "magma"},
                     {"opacity", 0.25},
                     {"analysis", "gradcam"},
                     {"query", "3,4"}});
  ASSERT_EQ(state.compare.size(), 3u);
  EXPECT_EQ(state.compare[0].variant, Variant::Softmax);
  EXPECT_EQ(state.compare[2].variant, Variant::Anchor);
  const auto panels = state.panel_settings();
  ASSERT_EQ(panels.size(), 4u);
  EXPECT_EQ(panels[0].variant, Variant::Focused);
  EXPECT_EQ(panels[2].variant, Variant::Window);
  EXPECT_EQ(panels[3].p, 4.5);  // the shared knobs reach every panel

  AppState restored;
  apply_json(restored, to_json(state));
  EXPECT_EQ(to_json(restored), to_json(state));
  EXPECT_EQ(restored.colormap, Colormap::Magma);
  EXPECT_EQ(restored.opacity, 0.25);

  auto rejects = [](const nlohmann::json& json, const std::string& phrase) {
    AppState target;
    try {
      apply_json(target, json);
      ADD_FAILURE() << json.dump() << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  rejects({{"compare", "softmax,linear,focused,window"}}, "--compare");
  rejects({{"compare", "softmax,bogus"}}, "--compare");
  rejects({{"view", "all"}}, "--view");
  rejects({{"opacity", 1.5}}, "--opacity");
  rejects({{"colormap", "rainbow"}}, "--colormap");
  rejects({{"analysis", "matrix"}}, "--analysis");
  rejects({{"box", "1,2,1,5"}}, "--box");

  // The rollout and metrics views' settings are the same options `analyze` reads.
  AppState views;
  apply_json(views, {{"analysis", "rollout"}, {"fusion", "min"}, {"discard", 0.9}, {"box", "1,2,4,5"}});
  EXPECT_EQ(views.analysis, "rollout");
  EXPECT_EQ(views.fusion, HeadFusion::Min);
  EXPECT_EQ(views.discard, 0.9);
  apply_json(views, {{"analysis", "metrics"}});
  EXPECT_EQ(to_json(views)["box"], "1,2,4,5");
}

}  // namespace test_gui
}  // namespace attnscope
