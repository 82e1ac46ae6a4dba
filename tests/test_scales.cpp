// Colour scales that tell the truth: the scale modes on a near-uniform map, the diverging map for
// negative values, round colour-bar ticks, the opacity that follows the value, and the shared plot
// builders (log y where one bin dominates, rows that share one y axis, a figure made 240 pt wide).
#include <gtest/gtest.h>

#include <cmath>

#include "core/colormap_image.h"
#include "core/cv_image.h"
#include "core/value_overlay.h"
#include "core/value_scale.h"
#include "figures/plots.h"
#include "figures/render.h"
#include "figures/ticks.h"

namespace attnscope {
namespace test_scales {

// A DeiT-like class-token row within +-12 % of uniform over 197 tokens (0.00454 .. 0.00566).
std::vector<float> near_uniform_row() {
  std::vector<float> row;
  for (int i = 0; i < 197; ++i) row.push_back(float((1.0 + 0.12 * std::sin(i * 0.7)) / 197.0));
  return row;
}

ValueRange range_of(const std::vector<float>& values, double factor = 1.0) {
  ValueRange range;
  for (float v : values) range.include(v * factor);
  return range;
}

TEST(ValueScale, ZeroMaxShowsANearUniformMapAsNearlyFlat) {
  const std::vector<float> row = near_uniform_row();
  const ValueScale zero_max = resolve_value_scale(parse_scale_spec("zero-max"), Colormap::Viridis, range_of(row));
  const ValueScale min_max = resolve_value_scale(parse_scale_spec("min-max"), Colormap::Viridis, range_of(row));
  EXPECT_EQ(zero_max.vmin, 0.0);
  EXPECT_EQ(zero_max.label, "0..max");
  EXPECT_EQ(min_max.label, "min..max");
  int zero_max_low = 255, zero_max_high = 0, min_max_low = 255, min_max_high = 0;
  for (float v : row) {
    zero_max_low = std::min(zero_max_low, zero_max.table_index(v));
    zero_max_high = std::max(zero_max_high, zero_max.table_index(v));
    min_max_low = std::min(min_max_low, min_max.table_index(v));
    min_max_high = std::max(min_max_high, min_max.table_index(v));
  }
  // 0..max: every weight in the top quarter of the map (0.00454 / 0.00566 = 0.8); min..max stretches
  // the same +-12 % over the whole map, the checkerboard the issue describes.
  EXPECT_GE(zero_max_low, 200);
  EXPECT_EQ(zero_max_high, 255);
  EXPECT_EQ(min_max_low, 0);
  EXPECT_EQ(min_max_high, 255);
}

TEST(ValueScale, UniformModeReadsOneAtAUniformWeight) {
  const std::vector<float> row = near_uniform_row();
  const ScaleSpec uniform = parse_scale_spec("uniform");
  const double factor = display_factor(uniform, 197);
  EXPECT_EQ(factor, 197.0);
  const ValueScale scale = resolve_value_scale(uniform, Colormap::Viridis, range_of(row, factor));
  EXPECT_EQ(scale.vmin, 0.0);
  EXPECT_NEAR(scale.vmax, 1.12, 0.01);  // the largest weight is 1.12 x uniform
  EXPECT_NE(scale.label.find("1 = uniform"), std::string::npos);
  // A uniform weight, 1/197, sits at 1 / 1.12 of the bar.
  EXPECT_NEAR(scale.position(1.0 / 197.0 * factor), 1.0 / 1.12, 0.01);
  EXPECT_EQ(display_factor(parse_scale_spec("zero-max"), 197), 1.0);
}

TEST(ValueScale, FixedAndLogRanges) {
  const std::vector<float> row = near_uniform_row();
  const ValueScale fixed = resolve_value_scale(parse_scale_spec("fixed:0,0.01"), Colormap::Magma, range_of(row));
  EXPECT_EQ(fixed.vmin, 0.0);
  EXPECT_EQ(fixed.vmax, 0.01);
  EXPECT_EQ(fixed.label, "fixed [0, 0.01]");
  EXPECT_EQ(fixed.table_index(0.005), 128);
  EXPECT_EQ(fixed.table_index(0.02), 255);  // clamped

  ValueRange peaked;
  for (double v : {1e-20, 1e-6, 1e-3, 0.5}) peaked.include(v);
  const ValueScale log = resolve_value_scale(parse_scale_spec("log"), Colormap::Viridis, peaked);
  EXPECT_TRUE(log.log);
  EXPECT_EQ(log.vmax, 0.5);
  EXPECT_NEAR(log.vmin, 0.5e-4, 1e-12);  // four decades: smaller weights sit at the bottom
  EXPECT_EQ(log.position(1e-20), 0.0);
  EXPECT_EQ(log.position(0.0), 0.0);
  EXPECT_NEAR(log.position(0.5e-2), 0.5, 1e-9);
  const std::vector<Tick> ticks = scale_ticks(log);
  ASSERT_FALSE(ticks.empty());
  for (const Tick& tick : ticks) EXPECT_EQ(tick.text, "10");  // decades
}

TEST(ValueScale, SpecsRoundTripAndBadOnesAreRefused) {
  for (const char* text : {"zero-max", "min-max", "fixed:-0.5,2", "log", "uniform"})
    EXPECT_EQ(to_string(parse_scale_spec(text)), text);
  for (const char* text : {"", "max", "fixed:1", "fixed:2,1", "fixed:a,b", "fixed:0,nan"})
    EXPECT_THROW(parse_scale_spec(text), std::invalid_argument) << text;
  EXPECT_EQ(parse_overlay_alpha("value"), OverlayAlpha::Value);
  EXPECT_THROW(parse_overlay_alpha("half"), std::invalid_argument);
}

// FLatten's DWC makes matrix entries negative: the map becomes diverging, white at 0, and says so.
TEST(ValueScale, NegativeValuesGetADivergingMapCentredAtZero) {
  ValueRange range;
  for (double v : {-0.073, 0.0, 0.02, 0.31}) range.include(v);
  const ValueScale scale = resolve_value_scale(parse_scale_spec("zero-max"), Colormap::Viridis, range);
  EXPECT_TRUE(scale.diverging);
  EXPECT_EQ(scale.colormap, Colormap::RdBu);
  EXPECT_DOUBLE_EQ(scale.vmin, -0.31);
  EXPECT_DOUBLE_EQ(scale.vmax, 0.31);
  EXPECT_NE(scale.label.find("diverging, centred at 0"), std::string::npos);
  EXPECT_EQ(scale.table_index(0.0), 128);
  const cv::Vec3b middle = colormap_table(Colormap::RdBu).at<cv::Vec3b>(128);
  for (int c = 0; c < 3; ++c) EXPECT_GE(middle[c], 240);  // white-ish at 0
  // Value-following opacity on a diverging map: transparent at 0, opaque at both ends.
  EXPECT_NEAR(scale.alpha(0.0, 0.8, OverlayAlpha::Value), 0.0, 0.01);
  EXPECT_NEAR(scale.alpha(-0.31, 0.8, OverlayAlpha::Value), 0.8, 1e-9);
  EXPECT_NEAR(scale.alpha(0.31, 0.8, OverlayAlpha::Value), 0.8, 1e-9);
  // Non-negative maps keep their map.
  const ValueScale plain = resolve_value_scale(parse_scale_spec("zero-max"), Colormap::Viridis, range_of({0.1f, 0.4f}));
  EXPECT_FALSE(plain.diverging);
  EXPECT_EQ(plain.colormap, Colormap::Viridis);
}

// Low weights leave the image visible: the overlay's colour weight follows the value.
TEST(ValueScale, OverlayOpacityFollowsTheValue) {
  const ValueScale scale = resolve_value_scale(parse_scale_spec("zero-max"), Colormap::Gray, range_of({0.0f, 1.0f}));
  const RgbImage image = to_rgb_image(cv::Mat(2, 2, CV_8UC3, cv::Scalar(0, 200, 0)));  // a green photo
  const float values[] = {0.0f, 1.0f};
  const cv::Mat following = to_mat(overlay_values(image, {values, 1, 2}, scale, 0.6, OverlayAlpha::Value));
  const cv::Mat constant = to_mat(overlay_values(image, {values, 1, 2}, scale, 0.6, OverlayAlpha::Constant));
  EXPECT_EQ(following.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 200, 0));      // weight 0: the photo as it is
  EXPECT_EQ(following.at<cv::Vec3b>(0, 1), cv::Vec3b(153, 233, 153));  // weight 1: 0.6 of white
  EXPECT_EQ(constant.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 80, 0));        // the old wash: 0.6 of black
}

TEST(ColourBarTicks, RoundValuesNotRawExtremes) {
  ValueScale scale;
  scale.vmin = 9.832e-20;
  scale.vmax = 0.3183;
  std::vector<std::string> labels;
  for (const Tick& tick : scale_ticks(scale)) labels.push_back(plain_tick_text(tick));
  EXPECT_EQ(labels, (std::vector<std::string>{"0.0", "0.1", "0.2", "0.3"}));
  scale.vmin = 0;
  scale.vmax = 0.00566;
  for (const Tick& tick : scale_ticks(scale)) EXPECT_LE(plain_tick_text(tick).size(), 6u) << plain_tick_text(tick);
  ValueScale log;
  log.log = true;
  log.vmin = 1e-4;
  log.vmax = 1;
  EXPECT_EQ(plain_tick_text(scale_ticks(log).front()), "1e-4");
}

TEST(SharedPlots, HistogramTakesALogAxisWhereOneBinDominates) {
  std::vector<double> flat(50, 10.0), peaked(50, 2.0);
  peaked[3] = 5000;
  EXPECT_FALSE(histogram_needs_log(flat));
  EXPECT_TRUE(histogram_needs_log(peaked));
  EXPECT_TRUE(similarity_histogram_plot(flat, peaked, "f_p").log_y);
  EXPECT_FALSE(similarity_histogram_plot(flat, flat, "f_p").log_y);
}

TEST(SharedPlots, SpectrumHasItsToleranceLineAndRankMarker) {
  const PlotPanel plot = spectrum_plot({3.0, 1.0, 1e-3, 1e-9}, 3, 1e-6);
  EXPECT_TRUE(plot.log_y);
  ASSERT_EQ(plot.x_guides.size(), 1u);
  EXPECT_EQ(plot.x_guides[0].label, "rank 3");
  ASSERT_EQ(plot.y_guides.size(), 1u);
  EXPECT_EQ(plot.y_guides[0].value, 1e-6);
}

TEST(SharedPlots, RowsShareOneYAxis) {
  Figure figure(2, 1);
  figure.at(0, 0) = {"", "a", spectrum_plot({10.0, 1.0}, 2, 1e-5)};
  figure.at(1, 0) = {"", "b", spectrum_plot({0.1, 1e-3}, 2, 1e-7)};
  share_y_axis(figure, 0);
  const auto& a = std::get<PlotPanel>(figure.at(0, 0).content);
  const auto& b = std::get<PlotPanel>(figure.at(1, 0).content);
  EXPECT_EQ(a.y_lo, b.y_lo);
  EXPECT_EQ(a.y_hi, b.y_hi);
  EXPECT_LE(a.y_lo, 1e-7);
  EXPECT_GE(a.y_hi, 10.0);
}

// A paper column: --width-pt 240 makes the figure exactly that wide, however many panels it has.
TEST(FigureWidth, StyleForWidthFitsAPaperColumn) {
  for (int columns : {1, 3, 6}) {
    Figure figure(1, columns);
    figure.scales.push_back({Colormap::Viridis, 0.0f, 1.0f, "attention weight"});
    for (int c = 0; c < columns; ++c) {
      HeatmapPanel heatmap;
      heatmap.values = {12, 12, std::vector<float>(144, 0.5f)};
      figure.at(0, c) = {"panel", "p" + std::to_string(c), heatmap};
    }
    const FigureStyle style = style_for_width(figure, FigureStyle{}, 240);
    const FigureGeometry geometry = layout_figure(figure, style);
    EXPECT_LE(geometry.width, 240.0) << columns;
    EXPECT_GE(geometry.width, 239.0) << columns;
  }
}

}  // namespace test_scales
}  // namespace attnscope
