// Figure export on synthetic figures: ticks and layout, PDFs render with pdftoppm, SVGs parse as
// XML, raster tiles equal the colour-mapped NPY written beside them, and files are written
// atomically without overwriting unless asked (tests/test_engine_figures.cpp: figures of a model).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/colormap_image.h"
#include "core/cv_image.h"
#include "core/npy.h"
#include "exports/export.h"
#include "figures/ticks.h"
#include "tests/figure_fixture.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_figures {

// The colour of a value straight from the LUT, as figure.json describes the mapping.
cv::Vec3b lut_colour(const ColorScale& scale, float value) {
  const cv::Mat table = colormap_table(scale.colormap);
  const double t = (std::clamp(value, scale.vmin, scale.vmax) - scale.vmin) / (scale.vmax - scale.vmin);
  return table.at<cv::Vec3b>(int(std::lround(t * 255.0)));
}

GridMap random_values(int rows, int cols, float lo, float hi, int seed) {
  cv::Mat values(rows, cols, CV_32FC1);
  cv::RNG rng(static_cast<uint64>(seed));
  rng.fill(values, cv::RNG::UNIFORM, lo, hi);
  return {rows, cols, std::vector<float>(values.ptr<float>(), values.ptr<float>() + values.total())};
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
  cv::Mat background;
  cv::resize(blocks, background, {64, 64}, 0, 0, cv::INTER_NEAREST);
  overlay.background = to_rgb_image(background);
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

// The session file of a default session (what the bundles here record).
const nlohmann::json& empty_session() {
  static const AppState defaults;
  static const nlohmann::json session = to_json(defaults);
  return session;
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
    ASSERT_EQ(values.size(0), heatmap.values.grid_h);
    ASSERT_EQ(values.size(1), heatmap.values.grid_w);
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
          const cv::Mat background = to_mat(heatmap.background);
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

// At print size no text is under 5 pt and the body text is 7-9 pt; every text's ink stays inside the
// page and apart from every other text (a tick label's exponent from its base as well).
TEST(FigureLayout, TextAtPrintSizeIsLegibleInsideThePageAndApart) {
  const Figure figure = synthetic_figure();
  expect_print_ready(figure, FigureStyle{});
  const FigureStyle double_column = style_for_width(figure, FigureStyle{}, 6.75 * 72);
  EXPECT_GE(double_column.font_size, kJournalFont);
  expect_print_ready(figure, double_column);
  // Its three columns, a log plot and two colour bars cannot be a single column even at 6 pt: refused.
  EXPECT_THROW(style_for_width(figure, FigureStyle{}, 3.25 * 72), std::invalid_argument);
}

// Stacking keeps every panel where its figure had it, below the figures before it, with its own
// scale and links, and names that stay unique.
TEST(FigureLayout, StackedFiguresKeepTheirPanelsScalesAndLinks) {
  Figure narrow(1, 2);
  narrow.scales.push_back({Colormap::Magma, 0.0f, 2.0f, "narrow"});
  HeatmapPanel map;
  map.values = random_values(2, 2, 0.0f, 1.0f, 4);
  narrow.at(0, 1) = {"only", "plain", map};
  Figure wide = synthetic_figure();
  wide.links.push_back({0, 1, 1, 1, 2, 2});
  const Figure stacked = stacked_figures({narrow, wide}, {"top", "bottom"});
  validate_figure(stacked);
  ASSERT_EQ(stacked.rows, 3);
  ASSERT_EQ(stacked.cols, 3);
  EXPECT_EQ(stacked.row_labels, (std::vector<std::string>{"top", "bottom first row", "second"}));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(stacked.at(0, 2).content));
  EXPECT_EQ(stacked.at(0, 1).data_name, "top_plain");
  EXPECT_EQ(stacked.at(1, 0).data_name, "bottom_plain");  // the same name in both: prefixed apart
  EXPECT_EQ(std::get<HeatmapPanel>(stacked.at(0, 1).content).scale, 0);
  const int bottom_scale = std::get<HeatmapPanel>(wide.at(0, 0).content).scale;
  EXPECT_EQ(std::get<HeatmapPanel>(stacked.at(1, 0).content).scale, 1 + bottom_scale);
  EXPECT_EQ(stacked.scales.size(), 1 + wide.scales.size());
  ASSERT_EQ(stacked.links.size(), 1u);
  EXPECT_EQ(stacked.links[0].from_panel, 1 * 3 + 0);  // the wide figure's panel (0, 0), now in row 1
  EXPECT_EQ(stacked.links[0].to_panel, 1 * 3 + 1);    // its panel (0, 1), now in row 1
  EXPECT_THROW(stacked_figures({narrow}, {}), std::invalid_argument);
}

TEST_F(FigureTest, PngTilesEqualTheColourMappedNpy) {
  const Figure figure = synthetic_figure();
  const FigureRequest request = request_for(FigureFormat::Png);
  const ExportedFigure exported = write_figure_bundle(figure, request, empty_session(), {}, folder_.string(), "fig");
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
  const ExportedFigure exported = write_figure_bundle(figure, request, empty_session(), {}, folder_.string(), "fig");
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
  write_figure_bundle(figure, request_for(FigureFormat::Svg), empty_session(), {}, folder_.string(), "fig");
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
  write_figure_bundle(figure, request, empty_session(), {}, folder_.string(), "fig");
  write_file_contents(path("fig.png"), "an older figure");
  try {
    write_figure_bundle(figure, request, empty_session(), {}, folder_.string(), "fig");
    FAIL() << "an existing figure was overwritten";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fig.png exists (--overwrite replaces it)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_contents(path("fig.png")), "an older figure");

  // A PDF of the same figure reuses its identical data files.
  request.format = FigureFormat::Pdf;
  EXPECT_NO_THROW(write_figure_bundle(figure, request, empty_session(), {}, folder_.string(), "fig"));
  // Different data under the same names is refused.
  Figure changed = figure;
  for (float& value : std::get<HeatmapPanel>(changed.at(0, 0).content).values.values) value += 0.01f;
  request.format = FigureFormat::Svg;
  EXPECT_THROW(write_figure_bundle(changed, request, empty_session(), {}, folder_.string(), "fig"), std::runtime_error);
  EXPECT_FALSE(fs::exists(path("fig.svg")));

  request.format = FigureFormat::Png;
  request.overwrite = true;
  write_figure_bundle(changed, request, empty_session(), {}, folder_.string(), "fig");
  EXPECT_EQ(read_file_contents(path("fig.png")), render_figure(changed, request.style, FigureFormat::Png));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(FigureTest, FailuresLeaveExistingFilesUntouchedAndNoTemporaries) {
  FigureRequest request = request_for(FigureFormat::Png);
  request.overwrite = true;
  write_file_contents(path("fig.png"), "the old figure");

  Figure broken = synthetic_figure();
  std::get<HeatmapPanel>(broken.at(0, 0).content).scale = 9;
  EXPECT_THROW(write_figure_bundle(broken, request, empty_session(), {}, folder_.string(), "fig"),
               std::invalid_argument);
  EXPECT_EQ(read_file_contents(path("fig.png")), "the old figure");

  // The data folder cannot be made (a file is in the way): nothing is replaced.
  write_file_contents(path("fig_data"), "in the way");
  EXPECT_ANY_THROW(write_figure_bundle(synthetic_figure(), request, empty_session(), {}, folder_.string(), "fig"));
  EXPECT_EQ(read_file_contents(path("fig.png")), "the old figure");
  EXPECT_TRUE(temporaries().empty());
}

}  // namespace test_figures
}  // namespace attnscope
