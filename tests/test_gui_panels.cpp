// The workbench as a researcher uses it, driven headlessly: the colour scale modes on a near-uniform
// map, a checkpoint per panel (each with its own grid, variant, parameters and prediction), the
// Export button writing exactly what is on screen (the mean view), and a DWC switch that agrees
// with the panel's title.
#include <cmath>

#include "analysis/focus_metrics.h"
#include "core/npy.h"
#include "core/value_scale.h"
#include "gui_fixture.h"

namespace attnscope {
namespace test_gui_panels {

// The engine's last-layer row of `query` (prefix keys dropped) for one panel's model and settings.
std::vector<float> panel_row(const std::string& model_path, const std::string& arch, const AttentionSettings& settings,
                             const std::string& image, const std::string& query, int head, int layer = -1) {
  LoadedModel model = load_model(model_path, ArchOverrides::parse(arch), torch::kCPU);
  const InferenceResult result = run_inference(
      model, prepare_model_input(load_image_rgb(image, kDefaultMaxPixels), InputSettings{}, model), settings);
  const AttentionCapture& capture =
      result.forward.layers[size_t(resolve_layer_index(layer, int(result.forward.layers.size())))];
  const torch::Tensor row =
      capture.row(0, head, resolve_query(query, capture.layout).token).slice(0, capture.layout.prefix_tokens());
  const torch::Tensor flat = row.contiguous().to(torch::kFloat);
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

// Every view's gray level per patch against the shared scale the engine's values give in `mode`.
class GuiPanelsTest : public GuiTest {
 protected:
  std::vector<double> levels_of(const nlohmann::json& view) const {
    cv::Mat gray;
    cv::cvtColor(cv::imread(shot()), gray, cv::COLOR_BGR2GRAY);
    return cell_levels(gray, view, view["grid"][0], view["grid"][1]);
  }
};

// Anchor attention swapped into FLatten's first block (30 anchors pooled from K): a map within a few
// per cent of uniform. 0..max (the default) shows it nearly flat, min..max stretches it over the
// whole map (the checkerboard that misleads), log and x uniform put it where their bars say; the
// bar names the mode.
TEST_F(GuiPanelsTest, ScaleModesOnANearUniformMap) {
  const std::string model = asset_path("models/flatten.safetensors");
  nlohmann::json session = {{"model", model},      {"image", asset_path("images/chelsea.png")},
                            {"variant", "anchor"}, {"layer", 0},
                            {"query", "cls"},      {"colormap", "gray"},
                            {"opacity", 1.0},      {"alpha", "constant"}};
  AttentionSettings settings;
  settings.variant = Variant::Anchor;
  const std::vector<float> row = panel_row(model, "", settings, session["image"], "cls", 0, 0);
  const float smallest = *std::min_element(row.begin(), row.end()), largest = *std::max_element(row.begin(), row.end());
  ASSERT_GT(smallest / largest, 0.9) << "the map should be within 10 % of uniform";
  const int keys = int(row.size()) + 1;  // the class token is a key too

  for (const char* mode : {"zero-max", "min-max", "log", "uniform", "fixed:0,0.05"}) {
    SCOPED_TRACE(mode);
    session["scale"] = mode;
    ASSERT_EQ(run_gui(session), 0) << log();
    const nlohmann::json info = shot_info();
    ASSERT_EQ(info["views"].size(), 1u) << info.dump();
    const ScaleSpec spec = parse_scale_spec(mode);
    const double factor = display_factor(spec, keys);
    ValueRange range;
    for (float v : row) range.include(v * factor);
    const ValueScale scale = resolve_value_scale(spec, Colormap::Gray, range);
    EXPECT_EQ(info["scale"]["label"], scale.label);
    const std::vector<double> levels = levels_of(info["views"][0]);
    double lowest = 255;
    for (size_t i = 0; i < row.size(); ++i) {
      EXPECT_NEAR(levels[i], scale.table_index(row[i] * factor), 1.5) << "patch " << i;
      lowest = std::min(lowest, levels[i]);
    }
    if (spec.mode == ScaleMode::ZeroMax || spec.mode == ScaleMode::Uniform) {
      EXPECT_GT(lowest, 225);  // nearly flat, as the map is
    }
    if (spec.mode == ScaleMode::MinMax) {
      EXPECT_LT(lowest, 2);  // full contrast
    }
  }
}

// softmax.safetensors next to linear.safetensors, and p = 1 next to p = 8, on the same image and
// query: each panel runs its own checkpoint with its own parameters, shows its own grid and its
// prediction; a DINOv2 file (patch 14, registers, no classes) next to them shows its own grid and
// "features, no classes".
TEST_F(GuiPanelsTest, ACheckpointPerPanel) {
  const std::string dinov2 = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/dinov2_reg.pth";
  const std::string image = asset_path("images/sign_4.png");
  nlohmann::json session = {{"model", asset_path("models/flatten.safetensors")},
                            {"image", image},
                            {"variant", "focused"},
                            {"p", 1},
                            {"dwc", "off"},
                            {"compare",
                             {{{"variant", "focused"}, {"p", 8}},
                              {{"model", asset_path("models/softmax.safetensors")}, {"variant", "native"}},
                              {{"model", dinov2}, {"variant", "native"}}}},
                            {"colormap", "gray"},
                            {"scale", "min-max"},
                            {"alpha", "constant"},
                            {"opacity", 1.0},
                            {"query", "cls"}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "");
  ASSERT_EQ(info["panels"].size(), 4u) << info.dump();
  const auto& panels = info["panels"];
  EXPECT_EQ(panels[0]["model"], asset_path("models/flatten.safetensors"));
  EXPECT_NE(panels[0]["description"].get<std::string>().find("p=1 "), std::string::npos);
  EXPECT_NE(panels[1]["description"].get<std::string>().find("p=8 "), std::string::npos);
  EXPECT_EQ(panels[2]["model"], asset_path("models/softmax.safetensors"));
  EXPECT_EQ(panels[2]["description"], "softmax");
  EXPECT_EQ(panels[3]["model"], dinov2);
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(panels[p]["grid"], nlohmann::json({12, 12})) << p;
    ASSERT_TRUE(panels[p].contains("top1")) << p;  // each its own prediction
    EXPECT_NE(info["headings"][p][1].get<std::string>().find("top-1: "), std::string::npos) << p;
  }
  EXPECT_NE(panels[0]["top1"]["probability"], panels[1]["top1"]["probability"]);
  EXPECT_FALSE(panels[3].contains("top1"));
  EXPECT_EQ(info["headings"][3][1], "features, no classes");

  // Four panels; each view on its panel's own grid, and DINOv2's is not the demo models'.
  ASSERT_EQ(info["views"].size(), 4u);
  EXPECT_EQ(info["views"][3]["grid"], panels[3]["key_grid"]);
  EXPECT_NE(info["views"][3]["grid"], info["views"][0]["grid"]);
  auto focused = [](double p) {
    AttentionSettings settings;
    settings.variant = Variant::Focused;
    settings.p = p;
    settings.dwc = false;
    return settings;
  };
  const std::string flatten = asset_path("models/flatten.safetensors");
  const std::vector<std::vector<float>> rows = {
      panel_row(flatten, "", focused(1), image, "cls", 0), panel_row(flatten, "", focused(8), image, "cls", 0),
      panel_row(asset_path("models/softmax.safetensors"), "", AttentionSettings{}, image, "cls", 0),
      panel_row(dinov2, "", AttentionSettings{}, image, "cls", 0)};
  // One scale over every view: each view's levels follow its own engine row on it.
  float low = 1e9f, high = -1e9f;
  for (const auto& values : rows)
    for (float v : values) low = std::min(low, v), high = std::max(high, v);
  for (size_t v = 0; v < 4; ++v) {
    const std::vector<double> levels = levels_of(info["views"][v]);
    ASSERT_EQ(levels.size(), rows[v].size()) << v;
    for (size_t i = 0; i < levels.size(); ++i)
      EXPECT_NEAR(levels[i], std::round(255.0 * (rows[v][i] - low) / (high - low)), 1.5)
          << "view " << v << " patch " << i;
  }
  // Four panels make a 2 x 2 grid here (larger maps than a row of four): no hole.
  EXPECT_EQ(info["views"][0]["y"], info["views"][1]["y"]);
  EXPECT_EQ(info["views"][2]["y"], info["views"][3]["y"]);
  EXPECT_GT(info["views"][2]["y"].get<double>(), info["views"][0]["y"].get<double>());
}

// A kernel swapped in runs without the model's DWC (it is the native kernel's): PolaFormer reads a
// DWC of its own, but on FLatten's model the switch is off for it and its title says so.
TEST_F(GuiPanelsTest, DwcSwitchIsOffForASwappedKernel) {
  nlohmann::json session = {{"model", asset_path("models/flatten.safetensors")},
                            {"image", asset_path("images/sign_4.png")},
                            {"dwc", "on"},
                            {"compare", {{{"variant", "pola"}}}}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["panels"].size(), 2u) << info.dump();
  EXPECT_TRUE(info["panels"][0]["dwc_switch"].get<bool>());
  EXPECT_TRUE(info["panels"][1]["dwc_available"].get<bool>());
  EXPECT_FALSE(info["panels"][1]["dwc_switch"].get<bool>());
  EXPECT_NE(info["panels"][1]["description"].get<std::string>().find("no dwc"), std::string::npos)
      << info["panels"][1]["description"];
}

// The DWC switch shows what the layer computed: on for FLatten's model with its DWC, off (and
// disabled) for a focused model without DWC weights, as each panel's title says.
TEST_F(GuiPanelsTest, DwcSwitchAgreesWithThePanelTitle) {
  nlohmann::json session = {
      {"model", asset_path("models/flatten.safetensors")},
      {"image", asset_path("images/sign_4.png")},
      {"dwc", "on"},
      {"compare",
       {{{"model", asset_path("models/focused.safetensors")}, {"variant", "native"}}, {{"variant", "softmax"}}}}};
  ASSERT_EQ(run_gui(session), 0) << log();
  const nlohmann::json info = shot_info();
  ASSERT_EQ(info["panels"].size(), 3u) << info.dump();
  for (const auto& panel : info["panels"]) {
    const std::string description = panel["description"];
    const bool title_says_on = description.find("dwc=on") != std::string::npos;
    EXPECT_EQ(panel["dwc_switch"].get<bool>(), title_says_on) << description;
  }
  EXPECT_TRUE(info["panels"][0]["dwc_switch"].get<bool>());
  EXPECT_FALSE(info["panels"][1]["dwc_switch"].get<bool>());
  EXPECT_FALSE(info["panels"][1]["dwc_available"].get<bool>());
  // Three panels are three columns, not a 2 x 2 grid with a hole.
  ASSERT_EQ(info["views"].size(), 3u);
  for (size_t v = 1; v < 3; ++v) {
    EXPECT_EQ(info["views"][v]["y"], info["views"][0]["y"]);
    EXPECT_GT(info["views"][v]["x"].get<double>(), info["views"][v - 1]["x"].get<double>());
  }
  // The swapped softmax on FLatten's model is named as such when it is near uniform.
  const double uniformity = info["panels"][2]["uniformity"][0];
  const std::string note = info["headings"][2][2];
  EXPECT_EQ(note.find("swapped softmax: entropy") != std::string::npos, uniformity >= 0.9) << note;
}

// The Export button writes exactly what is on screen: the panels (with their own checkpoints), the
// mean over heads, the scale mode and the colour map; the numbers behind each panel are the maps
// the workbench drew.
TEST_F(GuiPanelsTest, ExportButtonWritesTheMeanViewOnScreen) {
  const std::string image = asset_path("images/sign_4.png");
  const std::string out = (folder_ / "figures").string();
  nlohmann::json session = {{"model", asset_path("models/flatten.safetensors")},
                            {"image", image},
                            {"view", "mean"},
                            {"scale", "log"},
                            {"colormap", "magma"},
                            {"query", "4,4"},
                            {"compare", {{{"model", asset_path("models/linear.safetensors")}, {"variant", "native"}}}},
                            {"format", "png"}};
  ASSERT_EQ(run_gui(session, 4, "--export-on-screen '" + out + "'"), 0) << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "") << info.dump();
  EXPECT_NE(info["info"].get<std::string>().find("exported"), std::string::npos) << info["info"];
  EXPECT_NE(info["headings"][0][1].get<std::string>().find("mean of 3 heads"), std::string::npos);
  const fs::path manifest_path = fs::path(out) / "sign_4_panels.png.json";
  ASSERT_TRUE(fs::exists(manifest_path)) << log();
  std::ifstream manifest_file(manifest_path);
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  EXPECT_EQ(manifest["layout"], "panels");
  EXPECT_EQ(manifest["scales"][0]["colormap"], "magma");
  EXPECT_NE(manifest["scales"][0]["label"].get<std::string>().find("log"), std::string::npos);
  ASSERT_EQ(manifest["panels"].size(), 2u);
  EXPECT_NE(manifest["title"].get<std::string>().find("mean of 3 heads"), std::string::npos);
  for (size_t p = 0; p < 2; ++p) {
    const std::string model =
        p == 0 ? asset_path("models/flatten.safetensors") : asset_path("models/linear.safetensors");
    torch::Tensor mean;
    for (int h = 0; h < 3; ++h) {
      const torch::Tensor row = torch::tensor(panel_row(model, "", AttentionSettings{}, image, "4,4", h));
      mean = h ? mean + row : row;
    }
    const torch::Tensor written =
        read_npy((fs::path(out) / manifest["panels"][p]["data"].get<std::string>()).string()).reshape({-1});
    EXPECT_TRUE(torch::allclose(written, mean / 3.0, 1e-4, 1e-7)) << p;
  }
  // Its session reproduces it on the command line.
  EXPECT_TRUE(fs::exists(fs::path(out) / "sign_4_panels.png.session.json"));
}

}  // namespace test_gui_panels
}  // namespace attnscope
