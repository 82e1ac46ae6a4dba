// "Export what is on screen" writes the numbers the screen drew: every view is switched on in turn
// (the attention panels as one head, the mean and every head, rows and columns, and each analysis
// view), the button is pressed, and the exported data is compared with the numbers each texture on
// screen was made from (the workbench lists them in its screenshot's JSON under "shown").
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/npy.h"
#include "tests/gui_fixture.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_export_screen {

class ExportScreenTest : public GuiTest {
 public:
  // Runs the workbench on `session`, presses "Export what is on screen" and returns the shot's JSON.
  nlohmann::json export_on_screen(nlohmann::json session) {
    session["format"] = "png";
    EXPECT_EQ(run_gui(session, 4, "--export-on-screen '" + out() + "'"), 0) << log();
    const nlohmann::json info = shot_info();
    EXPECT_EQ(info["error"], "") << info.dump();
    return info;
  }
  std::string out() const { return (folder_ / "figures").string(); }

  // The manifest of the figure "<stem>.png" the export wrote.
  nlohmann::json manifest(const std::string& stem) const {
    std::ifstream in(fs::path(out()) / (stem + ".png.json"));
    EXPECT_TRUE(in.good()) << stem << " was not written; " << log();
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
  }
  // The data file of the figure's panel `index` (in figure order).
  std::string panel_data(const nlohmann::json& figure, size_t index) const {
    return (fs::path(out()) / figure["panels"][index]["data"].get<std::string>()).string();
  }
};

std::vector<float> floats(const nlohmann::json& values) { return values.get<std::vector<float>>(); }

std::vector<float> npy_floats(const std::string& path) {
  const torch::Tensor values = read_npy(path).to(torch::kFloat).reshape({-1}).contiguous();
  return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
}

// The screen's entries of one kind, in the order they were drawn.
std::vector<nlohmann::json> shown_of(const nlohmann::json& info, const std::string& kind) {
  std::vector<nlohmann::json> entries;
  for (const auto& entry : info["shown"])
    if (entry["kind"] == kind) entries.push_back(entry);
  return entries;
}

// The exported panels figure holds, panel by panel, the attention maps the screen drew: a row per
// head for "heads", else one row; a column per panel.
void expect_panels_equal_screen(const nlohmann::json& info, const nlohmann::json& figure, const std::string& out) {
  const std::vector<nlohmann::json> shown = shown_of(info, "attention");
  ASSERT_FALSE(shown.empty()) << info.dump();
  const int columns = int(info["panels"].size());
  int heads_per_panel = 0;
  for (const auto& entry : shown) heads_per_panel += entry["panel"] == 0;
  ASSERT_EQ(figure["panels"].size(), size_t(columns * heads_per_panel));
  std::vector<int> seen(size_t(columns), 0);
  for (const auto& entry : shown) {
    const int panel = entry["panel"], row = seen[size_t(panel)]++;
    const auto& exported = figure["panels"][size_t(row * columns + panel)];
    SCOPED_TRACE(exported.dump());
    const std::vector<float> written = npy_floats((fs::path(out) / exported["data"].get<std::string>()).string());
    const std::vector<float> drawn = floats(entry["values"]);
    ASSERT_EQ(written.size(), drawn.size());
    for (size_t i = 0; i < drawn.size(); ++i) EXPECT_FLOAT_EQ(written[i], drawn[i]) << "cell " << i;
  }
}

void expect_same_numbers(const std::vector<float>& written, const std::vector<float>& drawn) {
  ASSERT_EQ(written.size(), drawn.size());
  for (size_t i = 0; i < drawn.size(); ++i) EXPECT_EQ(written[i], drawn[i]) << "value " << i;
}

// (x, y) pairs of one series of an exported plot's CSV ("series,x,y").
std::vector<std::pair<double, double>> csv_series(const std::string& path, const std::string& series) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::pair<double, double>> points;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string name, x, y;
    std::getline(fields, name, ',');
    std::getline(fields, x, ',');
    std::getline(fields, y, ',');
    if (name == series || series.empty()) points.push_back({std::stod(x), std::stod(y)});
  }
  return points;
}

nlohmann::json two_panels(const std::string& view) {
  return {{"model", asset_path("models/flatten.safetensors")},
          {"image", asset_path("images/sign_4.png")},
          {"view", view},
          {"query", "4,4"},
          {"compare", {{{"model", asset_path("models/linear.safetensors")}, {"variant", "native"}}}}};
}

// The analysis view's one map of `kind` on screen against the first panel of its exported figure.
void expect_view_map_exported(const ExportScreenTest& test, const nlohmann::json& info, const std::string& kind,
                              const std::string& stem) {
  const std::vector<nlohmann::json> shown = shown_of(info, kind);
  ASSERT_EQ(shown.size(), 1u) << kind;
  expect_same_numbers(npy_floats(test.panel_data(test.manifest(stem), 0)), floats(shown.front()["values"]));
}

TEST_F(ExportScreenTest, AttentionPanelsAndTheMatrixView) {
  nlohmann::json session = two_panels("head");
  session["head"] = 1;
  session["analysis"] = "spectrum";
  const nlohmann::json info = export_on_screen(session);
  expect_panels_equal_screen(info, manifest("sign_4_panels"), out());
  expect_view_map_exported(*this, info, "matrix", "sign_4_spectrum-view");
}

TEST_F(ExportScreenTest, MeanOverHeadsOfColumnsAndGradCam) {
  nlohmann::json session = two_panels("mean");
  session["direction"] = "in";
  session["analysis"] = "gradcam";
  const nlohmann::json info = export_on_screen(session);
  expect_panels_equal_screen(info, manifest("sign_4_panels"), out());
  expect_view_map_exported(*this, info, "gradcam", "sign_4_gradcam-view");
}

TEST_F(ExportScreenTest, EveryHeadAndRollout) {
  nlohmann::json session = two_panels("heads");
  session["analysis"] = "rollout";
  session["fusion"] = "max";
  const nlohmann::json info = export_on_screen(session);
  expect_panels_equal_screen(info, manifest("sign_4_panels"), out());
  expect_view_map_exported(*this, info, "figure", "sign_4_rollout-view");
}

TEST_F(ExportScreenTest, Attribution) {
  nlohmann::json session = two_panels("head");
  session["analysis"] = "attribution";
  session["method"] = "gradcam++";
  const nlohmann::json info = export_on_screen(session);
  // The attention panels show the attribution maps in this view.
  const std::vector<nlohmann::json> maps = shown_of(info, "attribution");
  ASSERT_EQ(maps.size(), 2u);
  const nlohmann::json figure = manifest("sign_4_attribution-view");
  for (size_t p = 0; p < maps.size(); ++p)
    expect_same_numbers(npy_floats(panel_data(figure, p)), floats(maps[p]["values"]));
}

// The agents & polarities view draws every panel whose kernel has parts, one below the other: the
// agent demo's 36 agents (6 rows), then its PolaFormer swap's two rows.
TEST_F(ExportScreenTest, KernelPartsOfEveryPanel) {
  const nlohmann::json session = {
      {"model", asset_path("models/agent.safetensors")},
      {"image", asset_path("images/sign_4.png")},
      {"view", "head"},
      {"query", "3,4"},
      {"analysis", "kernel-parts"},
      {"compare", {{{"model", asset_path("models/agent.safetensors")}, {"variant", "pola"}}}}};
  export_on_screen(session);
  const nlohmann::json figure = manifest("sign_4_kernel-parts-view");
  const auto labels = figure["row_labels"].get<std::vector<std::string>>();
  ASSERT_EQ(labels.size(), 7u) << figure.dump();
  EXPECT_EQ(labels.front(), "panel1");
  EXPECT_EQ(labels.back(), "panel2");
  std::vector<std::string> data;
  for (const auto& panel : figure["panels"]) data.push_back(panel.value("data", ""));
  EXPECT_NE(std::find_if(data.begin(), data.end(),
                         [](const std::string& name) { return name.find("panel1_agent35.npy") != std::string::npos; }),
            data.end());
  EXPECT_NE(
      std::find_if(data.begin(), data.end(),
                   [](const std::string& name) { return name.find("panel2_opposite_sign.npy") != std::string::npos; }),
      data.end());
}

TEST_F(ExportScreenTest, FocusAndMetricsPlots) {
  nlohmann::json session = two_panels("head");
  session["analysis"] = "fp";
  nlohmann::json info = export_on_screen(session);
  const std::vector<nlohmann::json> focus = shown_of(info, "fp");
  ASSERT_EQ(focus.size(), 1u);
  const nlohmann::json fp_figure = manifest("sign_4_fp-view");
  // Panel 2 of the f_p figure is the mean row entropy over p.
  const auto entropy = csv_series(panel_data(fp_figure, 2), "");
  const std::vector<float> ps = floats(focus.front()["p"]), shown_entropy = floats(focus.front()["entropy"]);
  ASSERT_EQ(entropy.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_FLOAT_EQ(float(entropy[i].first), ps[i]);
    EXPECT_FLOAT_EQ(float(entropy[i].second), shown_entropy[i]);
  }

  session["analysis"] = "metrics";
  fs::remove_all(out());  // the panels figure is the same: a second export would be refused
  info = export_on_screen(session);
  const nlohmann::json metrics_figure = manifest("sign_4_metrics-view");
  const auto exported = csv_series(panel_data(metrics_figure, 0), "panel_2");  // entropy of panel 2's heads
  std::vector<double> shown_entropy_panel2;
  for (const auto& row : info["metrics"])
    if (row["panel"] == 1) shown_entropy_panel2.push_back(row["entropy"]);
  ASSERT_EQ(exported.size(), shown_entropy_panel2.size());
  for (size_t h = 0; h < exported.size(); ++h) EXPECT_NEAR(exported[h].second, shown_entropy_panel2[h], 1e-7);
}

// A folder chosen with the images option's Browse... (the button's request, the browser opened on the
// folder, "Choose this folder") runs the ERF view over it: the exported figure's session names it.
TEST_F(ExportScreenTest, AFolderChosenInTheBrowserRunsTheFolderView) {
  const std::string images = (folder_ / "glyphs").string();
  const CommandRun glyphs = run_attnscope("glyphs --count 2 --out '" + images + "'", folder_);
  ASSERT_EQ(glyphs.exit_code, 0) << glyphs.err;
  nlohmann::json session = two_panels("head");
  session["analysis"] = "erf";
  session["format"] = "png";
  ASSERT_EQ(run_gui(session, 4, "--choose-folder 'images=" + images + "' --export-on-screen '" + out() + "'"), 0)
      << log();
  EXPECT_EQ(shot_info()["error"], "") << shot_info().dump();
  std::ifstream saved(fs::path(out()) / "sign_4_erf-view.png.session.json");
  ASSERT_TRUE(saved.good()) << log();
  EXPECT_EQ(nlohmann::json::parse(saved).at("images"), fs::absolute(images).string());
  // A name that is no option is refused, not ignored (exit 2; xvfb-run may report its own cleanup).
  EXPECT_NE(run_gui(session, 4, "--choose-folder 'nonsense=" + images + "'"), 0);
  EXPECT_NE(log().find("--choose-folder expects NAME=DIR"), std::string::npos) << log();
}

// The statistics over a folder (issue 26): the ERF of each panel's model side by side, the head
// scatter and the CKA heatmap, run by the worker over a folder of glyph images, and DINO's masks of the
// image, export what was drawn.
TEST_F(ExportScreenTest, FolderStatistics) {
  const std::string images = (folder_ / "glyphs").string();
  const CommandRun glyphs = run_attnscope("glyphs --count 3 --out '" + images + "'", folder_);
  ASSERT_EQ(glyphs.exit_code, 0) << glyphs.err;
  nlohmann::json session = two_panels("head");
  session["images"] = images;

  session["analysis"] = "erf";
  nlohmann::json info = export_on_screen(session);
  const std::vector<nlohmann::json> maps = shown_of(info, "figure");
  ASSERT_EQ(maps.size(), 2u);  // one ERF per panel
  const nlohmann::json erf = manifest("sign_4_erf-view");
  for (size_t p = 0; p < maps.size(); ++p)
    expect_same_numbers(npy_floats(panel_data(erf, p)), floats(maps[p]["values"]));

  session["analysis"] = "cka";
  fs::remove_all(out());
  info = export_on_screen(session);
  expect_view_map_exported(*this, info, "figure", "sign_4_cka-view");

  session["analysis"] = "dino-masks";  // every head's mask together, then each head's: 1 + 3 maps
  fs::remove_all(out());
  info = export_on_screen(session);
  const std::vector<nlohmann::json> masks = shown_of(info, "figure");
  ASSERT_EQ(masks.size(), 4u);
  const nlohmann::json dino = manifest("sign_4_dino-masks-view");
  for (size_t m = 0; m < masks.size(); ++m)
    expect_same_numbers(npy_floats(panel_data(dino, m)), floats(masks[m]["values"]));

  session["analysis"] = "headstats";
  fs::remove_all(out());
  info = export_on_screen(session);
  const std::vector<nlohmann::json> plots = shown_of(info, "figure-plot");
  ASSERT_EQ(plots.size(), 2u);  // distance and entropy
  const nlohmann::json heads = manifest("sign_4_headstats-view");
  for (size_t plot = 0; plot < plots.size(); ++plot) {
    for (const auto& series : plots[plot]["series"]) {
      std::string name = series["label"];  // the CSV names a series with spaces as underscores
      std::replace(name.begin(), name.end(), ' ', '_');
      const auto exported = csv_series(panel_data(heads, plot), name);
      const std::vector<double> ys = series["y"];
      ASSERT_EQ(exported.size(), ys.size()) << series["label"];
      ASSERT_EQ(ys.size(), 12u);  // 4 layers x 3 heads of flatten.safetensors, and of linear.safetensors
      for (size_t i = 0; i < ys.size(); ++i) EXPECT_NEAR(exported[i].second, ys[i], 1e-6 * std::abs(ys[i]));
    }
  }
}

// The case that broke: L2ViT's global layer with "after the LCM" on. The export wrote the map
// before the LCM, and its session said "after".
// Every heatmap of a registry view drawn from its figure (the "figure" entries, in drawing order)
// against the exported figure's data file of the same name.
void expect_figure_view_exported(const ExportScreenTest& test, const nlohmann::json& info, const std::string& stem) {
  const std::vector<nlohmann::json> shown = shown_of(info, "figure");
  ASSERT_FALSE(shown.empty()) << info.dump();
  const nlohmann::json figure = test.manifest(stem);
  for (const auto& entry : shown) {
    const std::string name = entry["data_name"];
    SCOPED_TRACE(name);
    size_t found = figure["panels"].size();
    for (size_t index = 0; index < figure["panels"].size(); ++index)
      if (fs::path(figure["panels"][index].value("data", "")).stem() == name) found = index;
    ASSERT_LT(found, figure["panels"].size()) << figure.dump();
    expect_same_numbers(npy_floats(test.panel_data(figure, found)), floats(entry["values"]));
  }
}

// The representation views (features, similarity, norms) on a model with a class token: each
// heatmap is the patch grid, prefix tokens left out, and exports as drawn.
TEST_F(ExportScreenTest, RepresentationViews) {
  for (const std::string analysis : {"pca", "similarity", "norms"}) {
    SCOPED_TRACE(analysis);
    nlohmann::json session = {{"model", asset_path("models/flatten.safetensors")},
                              {"image", asset_path("images/sign_4.png")},
                              {"query", "3,4"},
                              {"analysis", analysis}};
    const nlohmann::json info = export_on_screen(session);
    expect_figure_view_exported(*this, info, "sign_4_" + analysis + "-view");
    for (const auto& entry : shown_of(info, "figure")) EXPECT_EQ(entry["values"].size(), 12u * 12u);
    fs::remove_all(out());
  }
}

// The residual-stream views (issue 35): DLA with a head ablated (the ablated head writes nothing, and
// every panel's maps are the ablated model's), the logit lens at the layer slider's block, and
// activation patching into the similarity view's second image.
TEST_F(ExportScreenTest, ResidualStreamViews) {
  const nlohmann::json base = {{"model", asset_path("models/flatten.safetensors")},
                               {"image", asset_path("images/sign_4.png")}};
  nlohmann::json dla = base;
  dla["analysis"] = "dla";
  dla["ablate"] = "3.1";
  nlohmann::json info = export_on_screen(dla);
  expect_figure_view_exported(*this, info, "sign_4_dla-view");
  // The panel's title says the head is ablated (issue 58: no title said so).
  EXPECT_NE(info["headings"][0][0].get<std::string>().find("ablate 3.1"), std::string::npos) << info["headings"];
  expect_panels_equal_screen(info, manifest("sign_4_panels"), out());
  const std::vector<nlohmann::json> grid = shown_of(info, "figure");
  ASSERT_EQ(grid.size(), 1u);
  const std::vector<float> heads = floats(grid.front()["values"]);
  ASSERT_EQ(heads.size(), 4u * 3u);  // 4 layers x 3 heads
  EXPECT_EQ(heads[3 * 3 + 1], 0.0f);
  EXPECT_NE(heads[3 * 3 + 0], 0.0f);
  fs::remove_all(out());

  nlohmann::json lens = base;
  lens["analysis"] = "logit-lens";
  lens["layer"] = 1;
  info = export_on_screen(lens);
  expect_figure_view_exported(*this, info, "sign_4_logit-lens-view");
  for (const auto& entry : shown_of(info, "figure")) EXPECT_EQ(entry["values"].size(), 12u * 12u);
  fs::remove_all(out());

  nlohmann::json patching = base;
  patching["analysis"] = "patching";
  patching["image2"] = asset_path("images/sign_1.png");
  info = export_on_screen(patching);
  expect_figure_view_exported(*this, info, "sign_4_patching-view");
}

// The SAE view (issue 57): the map drawn and exported is the feature's activation over the patches
// as the CLI computes it, read before the session's own intervention at the SAE's point, while the
// panel's forward runs with a feature switched off.
TEST_F(ExportScreenTest, SaeFeatureView) {
  nlohmann::json session = {{"model", asset_path("models/flatten.safetensors")},
                            {"image", asset_path("images/sign_4.png")},
                            {"analysis", "sae"},
                            {"sae", std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/sae/demo"},
                            {"feature", 262},
                            {"query", "6,2"},
                            {"sae-off", "55"}};
  const nlohmann::json info = export_on_screen(session);
  expect_figure_view_exported(*this, info, "sign_4_sae-view");
  const std::vector<nlohmann::json> maps = shown_of(info, "figure");
  ASSERT_GE(maps.size(), 1u);
  const std::vector<float> drawn = floats(maps.front()["values"]);
  ASSERT_EQ(drawn.size(), 144u);
  const fs::path cli = folder_ / "cli";
  ASSERT_EQ(testing::cli_system(std::string(ATTNSCOPE_CLI) + " analyze --analysis sae --sae '" + ATTNSCOPE_SOURCE_DIR +
                                "/assets/sae/demo' --feature 262 --query 6,2 --out '" + cli.string() + "' > /dev/null"),
            0);
  const torch::Tensor feature = read_npy((cli / "sae_feature_262.npy").string());
  for (size_t i = 0; i < drawn.size(); ++i) EXPECT_NEAR(drawn[i], feature[int64_t(i) + 1].item<float>(), 1e-5) << i;
}

// The text-prompted CLIP views (issue 34): panel 1, the bundled CLIP, maps the prompt field's text
// and heads with its zero-shot top prompt; panel 2, a classifier, says why it has no text target.
// The map drawn is the map exported, and it is `analyze textspan`'s row of that prompt (min-max);
// the top prompt is `analyze zero-shot`'s. Without a prompt file the list is the file's template
// over its class names.
TEST_F(ExportScreenTest, ClipPromptViews) {
  const std::string prompts = (folder_ / "prompts.txt").string();
  std::ofstream(prompts) << "the digit 4\nthe digit 8\na red R\n";
  nlohmann::json session = {
      {"model", asset_path("models/clip.safetensors")},
      {"image", asset_path("images/sign_4.png")},
      {"analysis", "textspan"},
      {"prompt", "the digit 8"},
      {"prompts", prompts},
      {"compare", {{{"model", asset_path("models/softmax.safetensors")}, {"variant", "native"}}}}};
  nlohmann::json info = export_on_screen(session);
  expect_figure_view_exported(*this, info, "sign_4_textspan-view");
  const nlohmann::json& panels = info["clip_prompt"]["panels"];
  ASSERT_EQ(panels.size(), 2u) << info.dump();
  EXPECT_EQ(panels[0]["error"], "");
  EXPECT_EQ(panels[0]["prompt"], "the digit 8");
  EXPECT_NE(panels[1]["error"].get<std::string>().find("text tower"), std::string::npos) << panels[1].dump();

  const std::string cli = std::string(ATTNSCOPE_CLI) + " analyze --model '" + asset_path("models/clip.safetensors") +
                          "' --image '" + asset_path("images/sign_4.png") + "' --prompts '" + prompts + "' --out '";
  const fs::path textspan = folder_ / "textspan", zero_shot = folder_ / "zero_shot";
  ASSERT_EQ(testing::cli_system(cli + textspan.string() + "' --analysis textspan > /dev/null"), 0);
  ASSERT_EQ(testing::cli_system(cli + zero_shot.string() + "' --analysis zero-shot > /dev/null"), 0);
  const torch::Tensor row = read_npy((textspan / "textspan.npy").string())[1].to(torch::kDouble);
  const torch::Tensor expected = ((row - row.min()) / (row.max() - row.min())).reshape({-1});
  const std::vector<nlohmann::json> shown = shown_of(info, "figure");
  ASSERT_FALSE(shown.empty());
  const std::vector<float> drawn = floats(shown.front()["values"]);
  ASSERT_EQ(drawn.size(), size_t(expected.numel()));
  // The screen's product is the CLI's, in another order of float64 sums: min-max over values of
  // order 1e-2 keeps them within 1e-9; float32 storage rounds at 6e-8.
  for (size_t i = 0; i < drawn.size(); ++i) EXPECT_NEAR(drawn[i], expected[int64_t(i)].item<double>(), 1e-6) << i;
  std::ifstream summary(zero_shot / "summary.json");
  EXPECT_EQ(panels[0]["top_prompt"], nlohmann::json::parse(summary)["top"]["prompt"]);
  fs::remove_all(out());

  session.erase("prompts");
  session.erase("compare");
  session["analysis"] = "legrad";
  info = export_on_screen(session);
  expect_figure_view_exported(*this, info, "sign_4_legrad-view");
  const nlohmann::json& listed = info["clip_prompt"]["panels"][0];
  EXPECT_EQ(listed["error"], "") << listed.dump();
  EXPECT_NE(listed["list"].get<std::string>().find("'the digit {}' over 10 class names"), std::string::npos)
      << listed.dump();
  EXPECT_EQ(listed["top_prompt"].get<std::string>().rfind("the digit ", 0), 0u) << listed.dump();
}

// A CLIP file beside a vocab.json without its merges.txt: the CLIP panel names the missing file
// where its map would be, and the run itself (the other views) goes on.
TEST_F(ExportScreenTest, ClipViewWithABrokenVocabularySaysWhy) {
  const fs::path folder = folder_ / "clip_folder";
  fs::create_directories(folder);
  fs::copy_file(asset_path("models/clip.safetensors"), folder / "clip.safetensors");
  std::ofstream(folder / "vocab.json") << "{}";
  const nlohmann::json info = export_on_screen({{"model", (folder / "clip.safetensors").string()},
                                                {"image", asset_path("images/sign_4.png")},
                                                {"analysis", "textspan"},
                                                {"prompt", "the digit 4"}});
  const nlohmann::json& panel = info["clip_prompt"]["panels"][0];
  EXPECT_NE(panel["error"].get<std::string>().find("merges.txt"), std::string::npos) << panel.dump();
}

TEST_F(ExportScreenTest, L2VitAfterTheLcm) {
  const nlohmann::json session = {{"model", asset_path("models/l2vit_hierarchical.safetensors")},
                                  {"image", asset_path("images/sign_4.png")},
                                  {"layer", 1},
                                  {"query", "12,12"},
                                  {"lcm", "after"}};
  const nlohmann::json info = export_on_screen(session);
  const nlohmann::json figure = manifest("sign_4_panels");
  expect_panels_equal_screen(info, figure, out());
  // And it is the map after the LCM, not before it.
  LoadedModel model = load_model(session["model"].get<std::string>(), {}, torch::kCPU);
  const RgbImage prepared = prepare_model_input(load_image_rgb(session["image"].get<std::string>(), kDefaultMaxPixels),
                                                InputSettings{}, model);
  const InferenceResult result = run_inference(model, prepared, AttentionSettings{});
  const AttentionCapture& capture = result.forward.layers[1];
  ASSERT_TRUE(capture.has_lcm());
  const torch::Tensor before = capture.key_grid(capture.row(0, 0, capture.layout.patch_token(12, 12)));
  const torch::Tensor written = read_npy(panel_data(figure, 0));
  EXPECT_GT((written - before).abs().max().item<double>(), 1e-3) << "the export shows the map before the LCM";
  std::ifstream session_file(fs::path(out()) / "sign_4_panels.png.session.json");
  EXPECT_EQ(nlohmann::json::parse(session_file)["lcm"], "after");
}

}  // namespace test_export_screen
}  // namespace attnscope
