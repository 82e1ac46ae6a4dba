// Figure export: PDFs render with pdftoppm, SVGs parse as XML, raster tiles equal the colour-mapped
// NPY written beside them, a session reproduces the same PNG bytes, and files are written
// atomically without overwriting unless asked.
#include <gtest/gtest.h>
#include <sys/wait.h>

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
#include "figures/export.h"
#include "figures/ticks.h"
#include "models/inference.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_figures {

namespace fs = std::filesystem;

const std::string kModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

class FigureTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  std::vector<std::string> temporaries() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(folder_))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(entry.path());
    return found;
  }

  TestFolder scratch_{"figures"};
  const fs::path& folder_ = scratch_.path();
};

int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The colour of a value straight from the LUT, as figure.json describes the mapping.
cv::Vec3b lut_colour(const ColorScale& scale, float value) {
  const cv::Mat table = colormap_table(scale.colormap);
  const double t = (std::clamp(value, scale.vmin, scale.vmax) - scale.vmin) / (scale.vmax - scale.vmin);
  return table.at<cv::Vec3b>(int(std::lround(t * 255.0)));
}

cv::Mat random_values(int rows, int cols, float lo, float hi, int seed) {
  cv::Mat values(rows, cols, CV_32FC1);
  cv::RNG rng(static_cast<uint64>(seed));
  rng.fill(values, cv::RNG::UNIFORM, lo, hi);
  return values;
}

// Two scales, a plain heatmap, an overlay whose background is flat within each cell, a log plot,
// and an empty cell.
Figure synthetic_figure() {
  Figure figure(2, 3);
  figure.title = "synthetic figure";
  figure.row_labels = {"first row", "second"};
  figure.col_labels = {"a", "b", "c"};
  figure.scales.push_back({Colormap::Viridis, 0.0f, 0.8f, "weight"});
  figure.scales.push_back({Colormap::Magma, -1.0f, 1.0f, "signed"});

  HeatmapPanel plain;
  plain.values = random_values(5, 7, -0.1f, 0.9f, 1);  // beyond the scale on both sides: clamped
  figure.at(0, 0) = {"plain", "plain", plain};

  HeatmapPanel overlay;
  overlay.values = random_values(4, 4, 0.0f, 0.8f, 2);
  cv::Mat blocks(4, 4, CV_8UC3);
  cv::randu(blocks, 0, 255);
  cv::resize(blocks, overlay.background, {64, 64}, 0, 0, cv::INTER_NEAREST);
  overlay.opacity = 0.5f;
  overlay.marked_row = 1;
  overlay.marked_col = 2;
  figure.at(0, 1) = {"overlay", "overlay", overlay};

  PlotPanel plot;
  Series series{"decay", {}, {}, true, true};
  for (int i = 1; i <= 30; ++i) {
    series.x.push_back(i);
    series.y.push_back(std::pow(10.0, -0.3 * i));
  }
  plot.series.push_back(series);
  plot.series.push_back({"flat", {1, 30}, {1e-3, 1e-3}, false, true});
  plot.log_y = true;
  plot.x_label = "index";
  plot.y_label = "value";
  plot.x_guides.push_back({12.5, "rank 12"});
  plot.y_guides.push_back({1e-6, "tol"});
  figure.at(1, 0) = {"a plot", "curve", plot};

  HeatmapPanel signed_map;
  signed_map.values = random_values(3, 3, -1.0f, 1.0f, 3);
  signed_map.scale = 1;
  signed_map.x_label = "key";
  signed_map.y_label = "query";
  figure.at(1, 1) = {"signed", "signed", signed_map};
  return figure;
}

FigureRequest request_for(FigureFormat format) {
  FigureRequest request;
  request.layout = "synthetic";
  request.format = format;
  request.style.dpi = 150;
  return request;
}

// Checks every cell centre of every heatmap in an RGB raster against its NPY through the LUT.
// Plain maps must match exactly; overlays within 1 (blend rounding), up to `tolerance` more for
// rasters that went through another renderer.
void expect_tiles_match(const cv::Mat& rgb, const nlohmann::json& manifest, const Figure& figure,
                        const std::string& folder, double scale, int tolerance) {
  int checked = 0;
  for (const auto& panel : manifest["panels"]) {
    if (panel["kind"] != "heatmap") continue;
    const Panel& source = figure.at(panel["row"], panel["col"]);
    const auto& heatmap = std::get<HeatmapPanel>(source.content);
    const torch::Tensor values = read_npy(folder + "/" + panel["data"].get<std::string>());
    ASSERT_EQ(values.size(0), heatmap.values.rows);
    ASSERT_EQ(values.size(1), heatmap.values.cols);
    const ColorScale& colour_scale = figure.scales[panel["scale"].get<size_t>()];
    const auto rect = panel["content_pt"];
    const double cell_w = rect[2].get<double>() / values.size(1), cell_h = rect[3].get<double>() / values.size(0);
    for (int r = 0; r < values.size(0); ++r)
      for (int c = 0; c < values.size(1); ++c) {
        if (r == heatmap.marked_row && c == heatmap.marked_col) continue;  // outlined, centre still checked below
        const int x = int((rect[0].get<double>() + (c + 0.5) * cell_w) * scale);
        const int y = int((rect[1].get<double>() + (r + 0.5) * cell_h) * scale);
        const cv::Vec3b mapped = lut_colour(colour_scale, values[r][c].item<float>());
        cv::Vec3b expected = mapped;
        int allowed = tolerance;
        if (!heatmap.background.empty()) {
          // The synthetic background is flat within each cell: its centre pixel is the colour under it.
          const cv::Mat& background = heatmap.background;
          const cv::Vec3b under = background.at<cv::Vec3b>(int((r + 0.5) * background.rows / values.size(0)),
                                                           int((c + 0.5) * background.cols / values.size(1)));
          for (int k = 0; k < 3; ++k)
            expected[k] = cv::saturate_cast<uint8_t>((1 - heatmap.opacity) * under[k] + heatmap.opacity * mapped[k]);
          allowed += 1;
        }
        const cv::Vec3b got = rgb.at<cv::Vec3b>(y, x);
        for (int k = 0; k < 3; ++k)
          ASSERT_LE(std::abs(int(got[k]) - int(expected[k])), allowed)
              << source.title << " cell (" << r << "," << c << ") channel " << k << " at pixel (" << x << "," << y
              << "): got " << got << " expected " << expected;
        ++checked;
      }
  }
  EXPECT_EQ(checked, 5 * 7 + 4 * 4 - 1 + 3 * 3);
}

TEST(FigureTicks, NiceLinearAndDecadeLogTicks) {
  const auto linear = linear_ticks(0.0, 0.43);  // a step of 0.1 would give 5 ticks over 4 intervals > 0.43 / 4
  ASSERT_EQ(linear.size(), 3u);
  EXPECT_EQ(linear.front().text, "0.0");
  EXPECT_EQ(linear.back().text, "0.4");
  EXPECT_NEAR(linear[1].value, 0.2, 1e-12);
  EXPECT_EQ(linear_ticks(0.0, 0.05).back().text, "0.04");  // steps of 0.02
  const auto signed_ticks = linear_ticks(-1.0, 1.0);
  EXPECT_EQ(signed_ticks.front().text, "\u22121.0");
  EXPECT_EQ(linear_ticks(0, 0.75, 4)[1].text, "0.25");

  const auto decades = log_ticks(1e-5, 10.0);
  ASSERT_EQ(decades.size(), 4u);  // seven decades thinned to every second, the top one kept
  EXPECT_EQ(decades.back().exponent, "1");
  EXPECT_EQ(decades.front().exponent, "\u22125");
  EXPECT_EQ(decades.front().text, "10");
  EXPECT_TRUE(log_ticks(0.0, 1.0).empty());
}

TEST(FigureLayout, PanelsStayApartAndInsideTheFigure) {
  const Figure figure = synthetic_figure();
  FigureStyle style;
  style.dpi = 300;
  const FigureGeometry g = layout_figure(figure, style);
  ASSERT_EQ(g.panels.size(), 6u);
  ASSERT_EQ(g.colour_bars.size(), 2u);
  auto inside = [&](const Rect& r) {
    return r.x >= 0 && r.y >= 0 && r.x + r.width <= g.width && r.y + r.height <= g.height;
  };
  auto apart = [](const Rect& a, const Rect& b) {
    return a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y;
  };
  std::vector<Rect> boxes;
  for (const auto& panel : g.panels) boxes.push_back(panel.content);
  for (const auto& bar : g.colour_bars) boxes.push_back(bar);
  for (size_t i = 0; i < boxes.size(); ++i) {
    EXPECT_TRUE(inside(boxes[i])) << i;
    for (size_t j = i + 1; j < boxes.size(); ++j) EXPECT_TRUE(apart(boxes[i], boxes[j])) << i << " " << j;
  }
  // The overlay keeps its background's aspect; the 5 x 7 map is as wide as the panel.
  EXPECT_NEAR(g.panels[1].content.width, g.panels[1].content.height, 1e-9);
  EXPECT_NEAR(g.panels[0].content.width, style.panel_width, 1e-9);
  EXPECT_NEAR(g.pixels_per_point, 300.0 / 72.0, 1e-12);
  EXPECT_EQ(g.png_width, int(std::lround(g.width * 300.0 / 72.0)));

  style.png_width = 1000;
  const FigureGeometry sized = layout_figure(figure, style);
  EXPECT_EQ(sized.png_width, 1000);
  EXPECT_NEAR(sized.png_height, g.height * 1000 / g.width, 1.0);
}

TEST(FigureLayout, InconsistentFiguresAreRejected) {
  Figure figure = synthetic_figure();
  figure.row_labels.push_back("extra");
  EXPECT_THROW(validate_figure(figure), std::invalid_argument);
  figure = synthetic_figure();
  std::get<HeatmapPanel>(figure.at(0, 0).content).scale = 5;
  EXPECT_THROW(render_figure(figure, {}, FigureFormat::Png), std::invalid_argument);
  figure = synthetic_figure();
  figure.scales[0].vmax = figure.scales[0].vmin;
  EXPECT_THROW(validate_figure(figure), std::invalid_argument);
  figure = synthetic_figure();
  figure.panels.pop_back();
  EXPECT_THROW(validate_figure(figure), std::invalid_argument);
  figure = synthetic_figure();
  figure.at(1, 1).data_name = "plain";  // two panels would write plain.npy
  EXPECT_THROW(validate_figure(figure), std::invalid_argument);
  figure.at(1, 1).data_name = "../escape";
  EXPECT_THROW(validate_figure(figure), std::invalid_argument);
}

TEST_F(FigureTest, PngTilesEqualTheColourMappedNpy) {
  const Figure figure = synthetic_figure();
  const FigureRequest request = request_for(FigureFormat::Png);
  const ExportedFigure exported = write_figure_bundle(figure, request, AppState{}, {}, folder_.string(), "fig");
  EXPECT_EQ(exported.figure_path, path("fig.png"));
  const nlohmann::json manifest = nlohmann::json::parse(read_file_contents(path("fig.png.json")));
  EXPECT_EQ(manifest["png_size_px"][0], exported.geometry.png_width);

  cv::Mat bgr = cv::imread(path("fig.png"), cv::IMREAD_COLOR);
  ASSERT_FALSE(bgr.empty());
  EXPECT_EQ(bgr.cols, exported.geometry.png_width);
  EXPECT_EQ(bgr.rows, exported.geometry.png_height);
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  expect_tiles_match(rgb, manifest, figure, folder_.string(), exported.geometry.pixels_per_point, 0);

  // The plot's numbers are beside it as CSV.
  const std::string csv = read_file_contents(path("fig_data/curve.csv"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "series,index,value");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 30 + 2);
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(FigureTest, PngIsDeterministicAndTransparentOnRequest) {
  const Figure figure = synthetic_figure();
  FigureStyle style;
  const std::string first = render_figure(figure, style, FigureFormat::Png);
  EXPECT_EQ(first, render_figure(figure, style, FigureFormat::Png));

  style.transparent = true;
  write_file_contents(path("clear.png"), render_figure(figure, style, FigureFormat::Png));
  const cv::Mat bgra = cv::imread(path("clear.png"), cv::IMREAD_UNCHANGED);
  ASSERT_EQ(bgra.channels(), 4);
  EXPECT_EQ(bgra.at<cv::Vec4b>(0, 0)[3], 0);  // the corner is background
  const FigureGeometry g = layout_figure(figure, style);
  const Rect& tile = g.panels[0].content;
  EXPECT_EQ(bgra.at<cv::Vec4b>(int((tile.y + tile.height / 2) * g.pixels_per_point),
                               int((tile.x + tile.width / 2) * g.pixels_per_point))[3],
            255);
}

TEST_F(FigureTest, PdfRendersWithPdftoppmAtTheFigureSize) {
  const Figure figure = synthetic_figure();
  const FigureRequest request = request_for(FigureFormat::Pdf);
  const ExportedFigure exported = write_figure_bundle(figure, request, AppState{}, {}, folder_.string(), "fig");
  EXPECT_EQ(read_file_contents(path("fig.pdf")).substr(0, 5), "%PDF-");
  EXPECT_EQ(render_figure(figure, request.style, FigureFormat::Pdf),
            read_file_contents(path("fig.pdf")));  // fixed date

  // At 144 dpi one point is two pixels.
  ASSERT_EQ(shell("pdftoppm -r 144 -png -singlefile '" + path("fig.pdf") + "' '" + path("page") + "'"), 0);
  cv::Mat bgr = cv::imread(path("page.png"), cv::IMREAD_COLOR);
  ASSERT_FALSE(bgr.empty());
  EXPECT_NEAR(bgr.cols, 2 * exported.geometry.width, 1.0);
  EXPECT_NEAR(bgr.rows, 2 * exported.geometry.height, 1.0);
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  const nlohmann::json manifest = nlohmann::json::parse(read_file_contents(path("fig.pdf.json")));
  // Poppler samples the embedded images itself: cells keep their colour within a few levels.
  expect_tiles_match(rgb, manifest, figure, folder_.string(), 2.0, 3);
  // Text is drawn: the title row holds dark pixels.
  cv::Mat gray;
  cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
  double darkest = 255;
  cv::minMaxLoc(gray.rowRange(0, int(2 * exported.geometry.panels[0].cell.y) - 40), &darkest);
  EXPECT_LT(darkest, 80);
}

TEST_F(FigureTest, SvgIsValidXmlWithCrispEmbeddedHeatmaps) {
  const Figure figure = synthetic_figure();
  write_figure_bundle(figure, request_for(FigureFormat::Svg), AppState{}, {}, folder_.string(), "fig");
  const std::string script =
      "import sys, xml.etree.ElementTree as E\n"
      "root = E.parse(sys.argv[1]).getroot()\n"
      "assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n"
      "images = [e for e in root.iter() if e.tag.endswith('}image')]\n"
      "assert len(images) == 3, len(images)\n"
      "assert all(e.get('image-rendering') == 'optimizeSpeed' for e in images)\n";
  write_file_contents(path("check.py"), script);
  EXPECT_EQ(shell(std::string(ATTNSCOPE_PYTHON) + " '" + path("check.py") + "' '" + path("fig.svg") + "'"), 0);
}

TEST_F(FigureTest, ExistingFilesAreRefusedUnlessOverwriteAndDataIsShared) {
  const Figure figure = synthetic_figure();
  FigureRequest request = request_for(FigureFormat::Png);
  write_figure_bundle(figure, request, AppState{}, {}, folder_.string(), "fig");
  write_file_contents(path("fig.png"), "an older figure");
  try {
    write_figure_bundle(figure, request, AppState{}, {}, folder_.string(), "fig");
    FAIL() << "an existing figure was overwritten";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fig.png exists (--overwrite replaces it)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_contents(path("fig.png")), "an older figure");

  // A PDF of the same figure reuses its identical data files.
  request.format = FigureFormat::Pdf;
  EXPECT_NO_THROW(write_figure_bundle(figure, request, AppState{}, {}, folder_.string(), "fig"));
  // Different data under the same names is refused.
  Figure changed = figure;
  std::get<HeatmapPanel>(changed.at(0, 0).content).values += 0.01f;
  request.format = FigureFormat::Svg;
  EXPECT_THROW(write_figure_bundle(changed, request, AppState{}, {}, folder_.string(), "fig"), std::runtime_error);
  EXPECT_FALSE(fs::exists(path("fig.svg")));

  request.format = FigureFormat::Png;
  request.overwrite = true;
  write_figure_bundle(changed, request, AppState{}, {}, folder_.string(), "fig");
  EXPECT_EQ(read_file_contents(path("fig.png")), render_figure(changed, request.style, FigureFormat::Png));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(FigureTest, FailuresLeaveExistingFilesUntouchedAndNoTemporaries) {
  FigureRequest request = request_for(FigureFormat::Png);
  request.overwrite = true;
  write_file_contents(path("fig.png"), "the old figure");

  Figure broken = synthetic_figure();
  std::get<HeatmapPanel>(broken.at(0, 0).content).scale = 9;
  EXPECT_THROW(write_figure_bundle(broken, request, AppState{}, {}, folder_.string(), "fig"), std::invalid_argument);
  EXPECT_EQ(read_file_contents(path("fig.png")), "the old figure");

  // The data folder cannot be made (a file is in the way): nothing is replaced.
  write_file_contents(path("fig_data"), "in the way");
  EXPECT_ANY_THROW(write_figure_bundle(synthetic_figure(), request, AppState{}, {}, folder_.string(), "fig"));
  EXPECT_EQ(read_file_contents(path("fig.png")), "the old figure");
  EXPECT_TRUE(temporaries().empty());
}

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
  state.figure.variants = "softmax,linear";
  state.figure.layers = "0,-1";
  state.head = 1;
  state.query = "2,3";
  const FigureRequest request = FigureRequest::from_state(state);
  const cv::Mat prepared = prepare_model_input(load_image_rgb(image_), state.input_settings(), *model_);
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
  const torch::Tensor drawn = torch::from_blob(panel.values.data, {panel.values.rows * panel.values.cols}).clone();
  EXPECT_TRUE(torch::equal(drawn, row.slice(0, layout.prefix_tokens()).to(torch::kFloat).contiguous()));
  double lo = 0, hi = 0;
  for (const auto& p : figure.panels) {
    double panel_lo, panel_hi;
    cv::minMaxLoc(std::get<HeatmapPanel>(p.content).values, &panel_lo, &panel_hi);
    lo = std::min(lo, panel_lo);
    hi = std::max(hi, panel_hi);
  }
  EXPECT_FLOAT_EQ(figure.scales.at(0).vmax, float(hi));  // one scale shared by every panel
  EXPECT_FLOAT_EQ(figure.scales.at(0).vmin, float(lo));

  state.head = 2;
  EXPECT_THROW(build_figure(FigureRequest::from_state(state), *model_, prepared, "x"), std::invalid_argument);
}

TEST_F(EngineFigureTest, MatrixBesideItsSpectrumWithTheRankMarked) {
  AppState state;
  state.figure.layout = "matrix-spectrum";
  state.attention.variant = Variant::Linear;
  const cv::Mat prepared = prepare_model_input(load_image_rgb(image_), state.input_settings(), *model_);
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
  EXPECT_EQ(std::get<HeatmapPanel>(figure.at(0, 0).content).values.rows, matrix.size(0));
}

TEST_F(EngineFigureTest, GradCamBesideAttentionAndRollout) {
  AppState state;
  state.figure.layout = "gradcam-attention";
  state.figure.variants = "softmax,window:window=3";
  const FigureRequest request = FigureRequest::from_state(state);
  EXPECT_EQ(request.variants[1].label, "window w=3");
  const cv::Mat prepared = prepare_model_input(load_image_rgb(image_), state.input_settings(), *model_);
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
      torch::from_blob(gradcam_panel.values.data, {gradcam_panel.values.rows, gradcam_panel.values.cols});
  EXPECT_TRUE(torch::allclose(drawn, gradcam.scaled, 1e-6, 1e-6));

  const InferenceResult inference = run_inference(*model_, prepared, request.variants[1].settings);
  c10::InferenceMode guard;
  const RolloutResult rollout = attention_rollout(inference.forward.layers, RolloutOptions{});
  const auto& rollout_panel = std::get<HeatmapPanel>(figure.at(1, 2).content);
  const torch::Tensor rolled =
      torch::from_blob(rollout_panel.values.data, {rollout_panel.values.rows, rollout_panel.values.cols});
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
  const cv::Mat prepared = prepare_model_input(load_image_rgb(image_), state.input_settings(), *model_);
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
      {out, "--image FILE or --images DIR is required"},
      {image + out + " --images " + path("empty"), "give --image or --images, not both"},
      {out + " --images " + path("missing"), "cannot read image folder"},
      {out + " --images " + path("empty"), "no images in"},
      {image + out + " --format jpeg", "--format expects png, svg or pdf"},
      {image + out + " --layout pie", "unknown layout 'pie'"},
      {image + out + " --variants focused:q=1", "is not one of model=, p=, window=, anchors=, dwc=, norm="},
      {image + out + " --layer 9", "layer 9: the model has 2 blocks"},
      {image + out + " --layout grid-heads --heads 0,5", "head 5: the model has 2 heads"},
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

}  // namespace test_figures
}  // namespace attnscope
