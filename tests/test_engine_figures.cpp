// Figures from a model: the exported layouts hold the engine's own numbers (attention rows, the
// matrix beside its spectrum, Grad-CAM beside attention and rollout, the focusing demonstration),
// figure requests come from the shared options, and the CLI reports bad input and runs over folders.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "core/npy.h"
#include "exports/export.h"
#include "models/inference.h"
#include "tests/figure_fixture.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_figures {

TEST(FigureRequestTest, OptionsComeFromTheSharedState) {
  AppState state;
  set_option(state, "layout", "grid-heads");
  set_option(state, "format", "pdf");
  set_option(state, "variants", "softmax,focused:p=2:norm=head");
  set_option(state, "heads", "0,1");
  set_option(state, "overwrite", "on");
  set_option(state, "colormap", "magma");
  const FigureRequest request = FigureRequest::from_state(state);
  EXPECT_EQ(request.format, FigureFormat::Pdf);
  EXPECT_TRUE(request.overwrite);
  EXPECT_EQ(request.colormap, Colormap::Magma);
  ASSERT_EQ(request.variants.size(), 2u);
  EXPECT_EQ(request.variants[1].label, "focused p=2 norm=head");
  EXPECT_EQ(request.variants[1].settings.variant, Variant::Focused);
  EXPECT_EQ(request.variants[1].settings.p, 2.0);
  EXPECT_EQ(request.variants[1].settings.norm, FocusNorm::PerHead);
  EXPECT_EQ(request.heads, (std::vector<int>{0, 1}));
  EXPECT_TRUE(request.layers.empty());  // "all"

  // The session round trip keeps every export option.
  AppState copy;
  apply_json(copy, to_json(state));
  EXPECT_EQ(to_json(copy), to_json(state));

  EXPECT_THROW(set_option(state, "variants", "focused:q=2"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "variants", "softmax,"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "variants", "nonsense"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "layers", "1,,2"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "heads", "-1"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "format", "jpeg"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "opacity", "1.5"), std::invalid_argument);
  set_option(state, "layout", "pie-chart");
  EXPECT_THROW(FigureRequest::from_state(state), std::invalid_argument);
}

class EngineFigureTest : public FigureTest {
 protected:
  void SetUp() override {
    FigureTest::SetUp();
    ArchOverrides overrides;
    overrides.values["heads"] = 2;
    model_ = std::make_unique<LoadedModel>(load_model(kModel, overrides, torch::kCPU));
    image_ = path("input.png");
    cv::Mat picture(120, 160, CV_8UC3);
    cv::randu(picture, 0, 255);
    cv::imwrite(image_, picture);
  }
  std::unique_ptr<LoadedModel> model_;
  std::string image_;
};

TEST_F(EngineFigureTest, GridPanelsHoldTheEnginesAttentionRows) {
  AppState state;
  state.figure.variants = parse_panel_list("softmax,linear", "--variants");
  state.figure.layers = {0, -1};
  state.head = 1;
  state.query = QuerySpec::parse("2,3");
  const FigureRequest request = FigureRequest::from_state(state);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), *model_);
  const Figure figure = build_figure(request, *model_, prepared, "input.png");
  ASSERT_EQ(figure.rows, 2);
  ASSERT_EQ(figure.cols, 2);
  EXPECT_EQ(figure.col_labels, (std::vector<std::string>{"layer 0", "layer 1"}));

  const InferenceResult linear = run_inference(*model_, prepared, request.variants[1].settings);
  const TokenLayout& layout = linear.forward.layout;
  c10::InferenceMode guard;
  const torch::Tensor row = linear.forward.layers[1].row(0, 1, layout.patch_token(2, 3));
  const auto& panel = std::get<HeatmapPanel>(figure.at(1, 1).content);
  EXPECT_EQ(figure.at(1, 1).data_name, "linear_l1_h1");
  EXPECT_EQ(panel.marked_row, 2);
  EXPECT_EQ(panel.marked_col, 3);
  const torch::Tensor drawn = torch::tensor(panel.values.values);
  EXPECT_TRUE(torch::equal(drawn, row.slice(0, layout.prefix_tokens()).to(torch::kFloat).contiguous()));
  double lo = 0, hi = 0;
  for (const auto& p : figure.panels) {
    const std::vector<float>& values = std::get<HeatmapPanel>(p.content).values.values;
    lo = std::min(lo, double(*std::min_element(values.begin(), values.end())));
    hi = std::max(hi, double(*std::max_element(values.begin(), values.end())));
  }
  EXPECT_FLOAT_EQ(figure.scales.at(0).vmax, float(hi));  // one scale shared by every panel
  EXPECT_FLOAT_EQ(figure.scales.at(0).vmin, float(lo));

  state.head = 2;
  EXPECT_THROW(build_figure(FigureRequest::from_state(state), *model_, prepared, "x"), std::invalid_argument);
}

// Every layout at a journal's double column (6.75 in) prints with body text at 7 pt or more, nothing
// under 5 pt and no text over another or off the page; at a single column (3.25 in) the attention
// grids and the panels fit the same way (text down to 6 pt where they must, said in a note), and a
// layout whose columns cannot fit side by side is set with its columns as rows.
TEST_F(EngineFigureTest, EveryLayoutPrintsAtJournalWidths) {
  AppState state;
  state.figure.variants = parse_panel_list("softmax,linear", "--variants");
  state.query = QuerySpec::parse("2,3");
  set_option(state, "methods", "gradcam,rollout");
  for (const FigureLayoutInfo& layout : figure_layouts()) {
    SCOPED_TRACE(layout.name);
    state.figure.layout = layout.name;
    const FigureRequest request = FigureRequest::from_state(state);
    const RgbImage prepared =
        prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), *model_);
    const Figure figure = build_figure(request, *model_, prepared, "input.png");
    const FigureStyle double_column = style_for_width(figure, request.style, 6.75 * 72);
    EXPECT_GE(double_column.font_size, kJournalFont);
    EXPECT_EQ(small_text_note(double_column), "");
    expect_print_ready(figure, double_column);
    // A single column: as built, or with its columns as rows where they cannot fit side by side
    // (gradcam-attention's three maps with their colour bars), as the bundle writer sets it.
    FigureOutput single = request;
    single.width_pt = 3.25 * 72;
    const FittedFigure fitted = fit_to_width(figure, single);
    expect_print_ready(fitted.figure, fitted.output.style);
    EXPECT_EQ(small_text_note(fitted.output.style).empty(), fitted.output.style.font_size >= kJournalFont);
    const std::string name = layout.name;
    if (name == "grid-layers" || name == "grid-heads" || name == "panels") {
      EXPECT_EQ(fitted.note, "");
    }
    if (!fitted.note.empty()) {
      EXPECT_EQ(fitted.figure.rows, figure.cols);
      EXPECT_NE(fitted.note.find("set as rows to fit 234 pt"), std::string::npos) << fitted.note;
    }
  }
}

TEST_F(EngineFigureTest, MatrixBesideItsSpectrumWithTheRankMarked) {
  AppState state;
  state.figure.layout = "matrix-spectrum";
  state.attention.variant = Variant::Linear;
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), *model_);
  const Figure figure = build_figure(FigureRequest::from_state(state), *model_, prepared, "input.png");
  ASSERT_EQ(figure.rows, 1);
  ASSERT_EQ(figure.cols, 2);
  const InferenceResult result = run_inference(*model_, prepared, state.attention);
  c10::InferenceMode guard;
  const torch::Tensor matrix = result.forward.layers.back().matrix(0, 0);
  const Spectrum spectrum = matrix_spectrum(matrix);
  const auto& plot = std::get<PlotPanel>(figure.at(0, 1).content);
  ASSERT_EQ(plot.series.at(0).y.size(), size_t(spectrum.singular_values.numel()));
  EXPECT_FLOAT_EQ(float(plot.series[0].y[3]), spectrum.singular_values[3].item<float>());
  EXPECT_TRUE(plot.log_y);
  ASSERT_EQ(plot.x_guides.size(), 1u);
  EXPECT_EQ(plot.x_guides[0].label, "rank " + std::to_string(spectrum.numerical_rank));
  // ReLU linear attention of d = 32 channels per head has rank at most 32 < T = 50.
  EXPECT_LE(spectrum.numerical_rank, 32);
  EXPECT_EQ(std::get<HeatmapPanel>(figure.at(0, 0).content).values.grid_h, matrix.size(0));
}

TEST_F(EngineFigureTest, GradCamBesideAttentionAndRollout) {
  AppState state;
  state.figure.layout = "gradcam-attention";
  state.figure.variants = parse_panel_list("softmax,window:window=3", "--variants");
  const FigureRequest request = FigureRequest::from_state(state);
  EXPECT_EQ(request.variants[1].label, "window w=3");
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), *model_);
  const Figure figure = build_figure(request, *model_, prepared, "input.png");
  ASSERT_EQ(figure.rows, 2);
  ASSERT_EQ(figure.cols, 3);
  // Grad-CAM, attention and rollout each on their own scale, each panel with its own colour bar.
  ASSERT_EQ(figure.scales.size(), 3u);
  for (const Panel& panel : figure.panels) EXPECT_TRUE(std::get<HeatmapPanel>(panel.content).colour_bar);

  const GradCamResult gradcam =
      grad_cam(model_->vit(), image_to_tensor(prepared), request.variants[1].settings, GradCamOptions{});
  const auto& gradcam_panel = std::get<HeatmapPanel>(figure.at(1, 0).content);
  EXPECT_EQ(gradcam_panel.scale, 0);
  const torch::Tensor drawn =
      torch::tensor(gradcam_panel.values.values).reshape({gradcam_panel.values.grid_h, gradcam_panel.values.grid_w});
  EXPECT_TRUE(torch::allclose(drawn, gradcam.scaled, 1e-6, 1e-6));

  const InferenceResult inference = run_inference(*model_, prepared, request.variants[1].settings);
  c10::InferenceMode guard;
  const RolloutResult rollout = attention_rollout(inference.forward.layers, RolloutOptions{});
  const auto& rollout_panel = std::get<HeatmapPanel>(figure.at(1, 2).content);
  const torch::Tensor rolled =
      torch::tensor(rollout_panel.values.values).reshape({rollout_panel.values.grid_h, rollout_panel.values.grid_w});
  EXPECT_TRUE(torch::allclose(rolled, rollout.normalised.to(torch::kFloat), 1e-6, 1e-6));
  EXPECT_EQ(std::get<HeatmapPanel>(figure.at(0, 1).content).scale, 1);  // attention on its own scale
  EXPECT_EQ(rollout_panel.scale, 2);
  EXPECT_EQ(figure.at(1, 2).data_name, "window_w=3_rollout");

  // All of it renders; the columns' labels do not overlap (columns are at least as wide as them).
  const FigureGeometry g = layout_figure(figure, FigureStyle{});
  for (int c = 0; c + 1 < figure.cols; ++c)
    EXPECT_LT(g.panels[size_t(c)].cell.x + g.panels[size_t(c)].cell.width, g.panels[size_t(c + 1)].cell.x);
  EXPECT_FALSE(render_figure(figure, FigureStyle{}, FigureFormat::Png).empty());
}

TEST_F(EngineFigureTest, FocusingDemonstrationFromTheAnalyses) {
  AppState state;
  state.figure.layout = "fp-demo";
  state.attention.variant = Variant::Focused;
  state.attention.p = 4;
  state.layer = 0;
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), *model_);
  const Figure figure = build_figure(FigureRequest::from_state(state), *model_, prepared, "input.png");
  ASSERT_EQ(figure.rows, 2);
  ASSERT_EQ(figure.cols, 3);
  const ScoreExample example = example_focus_scores(4.0);
  const auto& scores = std::get<PlotPanel>(figure.at(0, 2).content);
  ASSERT_EQ(scores.series.size(), 2u);
  ASSERT_EQ(scores.series[1].y.size(), size_t(example.after.numel()));
  EXPECT_DOUBLE_EQ(scores.series[1].y[0], example.after[0].item<double>());

  const InferenceResult inference = run_inference(*model_, prepared, state.attention);
  c10::InferenceMode guard;
  FocusStudyOptions options;
  options.p = 4.0;
  const FocusStudy study = study_focusing(inference.forward.layers[0], 0, options);
  const auto& entropy = std::get<PlotPanel>(figure.at(1, 1).content);
  EXPECT_EQ(entropy.series.at(0).y, study.entropy);
  EXPECT_EQ(entropy.x_guides.at(0).value, 4.0);
  const auto& histogram = std::get<PlotPanel>(figure.at(1, 0).content);
  EXPECT_EQ(histogram.series.at(1).y.size(), size_t(study.histogram_after.numel()));
  EXPECT_FALSE(render_figure(figure, FigureStyle{}, FigureFormat::Pdf).empty());
}

TEST_F(EngineFigureTest, CliReportsBadInputOnOneLine) {
  const std::string cli = std::string(ATTNSCOPE_CLI) + " export --model " + kModel + " --arch heads=2";
  const std::string image = " --image " + image_;
  const std::string out = " --out " + path("out");
  fs::create_directories(path("empty"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {image, "--out is required"},
      {image + out + " --images " + path("empty"), "give --image or --images, not both"},
      {out + " --images " + path("missing"), "cannot read image folder"},
      {out + " --images " + path("empty"), "no images in"},
      {image + out + " --format jpeg", "--format expects png, svg or pdf"},
      {image + out + " --layout pie", "unknown layout 'pie'"},
      {image + out + " --variants focused:q=1",
       "is not one of model=, p=, window=, anchors=, agents=, pola-alpha=, dwc=, norm="},
      {image + out + " --layer 9", "layer 9: the model has 2 blocks"},
      {image + out + " --layout grid-heads --heads 0,5", "--heads 5: this layer has 2 heads"},
      {image + out + " --layout grid-heads --heads 1,1", "--heads names head 1 twice"},
      {image + out + " --layers 0,-2", "--layers names block 0 twice (0 and -2)"},
  };
  for (const auto& [arguments, phrase] : cases) {
    SCOPED_TRACE(arguments);
    EXPECT_EQ(shell(cli + arguments + " > /dev/null 2> " + path("err.txt")), 1);
    const std::string errors = read_file_contents(path("err.txt"));
    EXPECT_NE(errors.find(phrase), std::string::npos) << errors;
    EXPECT_EQ(std::count(errors.begin(), errors.end(), '\n'), 1) << errors;
  }
  EXPECT_FALSE(fs::exists(path("out/input_grid-layers.png")));
}

// The CLI over a folder: one figure per image, one bad image reported without stopping the others,
// and a written session reproducing the same PNG bytes.
TEST_F(EngineFigureTest, CliBatchReportsBadImagesAndSessionsReproduceFigures) {
  const fs::path images = folder_ / "images";
  fs::create_directories(images);
  for (const char* name : {"b.png", "a.jpg"}) {
    cv::Mat picture(100 + name[0], 140, CV_8UC3);
    cv::randu(picture, 0, 255);
    cv::imwrite((images / name).string(), picture);
  }
  write_file_contents((images / "broken.png").string(), "not an image");
  write_file_contents((images / "notes.txt").string(), "ignored");

  const std::string cli = std::string(ATTNSCOPE_CLI) + " export --model " + kModel + " --arch heads=2";
  const std::string err = path("stderr.txt");
  const std::string batch =
      cli + " --images " + images.string() + " --out " + path("out") + " --variants softmax,focused --layers 0,1";
  EXPECT_EQ(shell(batch + " > /dev/null 2> " + err), 1);
  const std::string errors = read_file_contents(err);
  EXPECT_NE(errors.find("broken.png"), std::string::npos) << errors;
  EXPECT_EQ(errors.find("a.jpg:"), std::string::npos) << errors;
  EXPECT_TRUE(fs::exists(path("out/a_grid-layers.png")));
  EXPECT_TRUE(fs::exists(path("out/b_grid-layers.png")));
  EXPECT_TRUE(fs::exists(path("out/b_grid-layers_data/focused_l1_h0.npy")));
  EXPECT_FALSE(fs::exists(path("out/notes_grid-layers.png")));

  // Again into the same folder: refused, unless --overwrite.
  EXPECT_EQ(shell(cli + " --image " + (images / "a.jpg").string() + " --out " + path("out") +
                  " --variants softmax,focused --layers 0,1 > /dev/null 2> " + err),
            1);
  EXPECT_NE(read_file_contents(err).find("exists (--overwrite replaces it)"), std::string::npos)
      << read_file_contents(err);
  EXPECT_EQ(shell(cli + " --image " + (images / "a.jpg").string() + " --out " + path("out") +
                  " --variants softmax,focused --layers 0,1 --overwrite > /dev/null 2> " + err),
            0)
      << read_file_contents(err);

  // The session written beside the figure reproduces it byte for byte elsewhere.
  EXPECT_EQ(shell(std::string(ATTNSCOPE_CLI) + " export --session " + path("out/a_grid-layers.png.session.json") +
                  " --out " + path("again") + " > /dev/null 2> " + err),
            0)
      << read_file_contents(err);
  EXPECT_EQ(read_file_contents(path("again/a_grid-layers.png")), read_file_contents(path("out/a_grid-layers.png")));
  EXPECT_TRUE(temporaries().empty());
}

// A session's side-by-side panels are its figure's rows, from `export --session` as from the
// workbench's Export, and the session written beside the figure holds the same panels.
TEST_F(EngineFigureTest, SessionComparePanelsBecomeTheFiguresRows) {
  cv::Mat picture(96, 120, CV_8UC3);
  cv::randu(picture, 0, 255);
  const std::string image = path("cat.png");
  cv::imwrite(image, picture);
  const std::string session = path("compare.session.json");
  write_file_contents(
      session,
      nlohmann::json(
          {{"model", kModel}, {"arch", "heads=2"}, {"image", image}, {"compare", "focused:p=2"}, {"layers", "0,1"}})
          .dump());
  const std::string err = path("stderr.txt");
  ASSERT_EQ(shell(std::string(ATTNSCOPE_CLI) + " export --session " + session + " --out " + path("out") +
                  " > /dev/null 2> " + err),
            0)
      << read_file_contents(err);
  // Two rows: panel 1 (the session's variant) and the compare panel with its own p.
  EXPECT_TRUE(fs::exists(path("out/cat_grid-layers_data/native_l1_h0.npy")));
  EXPECT_TRUE(fs::exists(path("out/cat_grid-layers_data/focused_p=2_l1_h0.npy")));
  const nlohmann::json written =
      nlohmann::json::parse(read_file_contents(path("out/cat_grid-layers.png.session.json")));
  EXPECT_NE(written.at("compare").dump().find("focused"), std::string::npos) << written.dump();
  // The written session reproduces the figure, both rows.
  ASSERT_EQ(shell(std::string(ATTNSCOPE_CLI) + " export --session " + path("out/cat_grid-layers.png.session.json") +
                  " --out " + path("again") + " > /dev/null 2> " + err),
            0)
      << read_file_contents(err);
  EXPECT_EQ(read_file_contents(path("again/cat_grid-layers.png")), read_file_contents(path("out/cat_grid-layers.png")));
}

}  // namespace test_figures
}  // namespace attnscope
