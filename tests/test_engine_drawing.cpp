// What the engine draws without OpenCV (`run`, `analyze`, the figures and exports, in both builds)
// against OpenCV itself: the colour tables against applyColorMap, the overlay
// against cv::resize's nearest neighbour and saturate_cast (and addWeighted), the PNG encoder against
// imencode.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/cv_image.h"
#include "core/image.h"
#include "core/image_encode.h"
#include "core/value_overlay.h"

namespace attnscope {
namespace test_engine_drawing {

RgbImage noise_image(int rows, int cols, unsigned seed) {
  RgbImage image(rows, cols);
  for (size_t i = 0; i < image.bytes(); ++i) image.data()[i] = uint8_t((seed + i * 2654435761u) >> 13);
  return image;
}

TEST(EngineDrawing, ColourTablesAreOpenCvsApplyColorMap) {
  cv::Mat ramp(256, 1, CV_8UC1);
  for (int i = 0; i < 256; ++i) ramp.at<uint8_t>(i) = uint8_t(i);
  const std::pair<Colormap, int> maps[] = {{Colormap::Viridis, cv::COLORMAP_VIRIDIS},
                                           {Colormap::Magma, cv::COLORMAP_MAGMA},
                                           {Colormap::Inferno, cv::COLORMAP_INFERNO},
                                           {Colormap::Turbo, cv::COLORMAP_TURBO},
                                           {Colormap::Jet, cv::COLORMAP_JET}};
  for (const auto& [colormap, opencv_id] : maps) {
    cv::Mat bgr;
    cv::applyColorMap(ramp, bgr, opencv_id);
    const ColourTable& table = colour_table(colormap);
    for (int i = 0; i < 256; ++i) {
      const cv::Vec3b expected = bgr.at<cv::Vec3b>(i);
      ASSERT_EQ(table[size_t(i)], (std::array<uint8_t, 3>{expected[2], expected[1], expected[0]}))
          << to_string(colormap) << " entry " << i;
    }
  }
  EXPECT_EQ(colour_table(Colormap::Gray)[77], (std::array<uint8_t, 3>{77, 77, 77}));
}

// The overlay as it was drawn with OpenCV: values resized to the image (INTER_NEAREST), each pixel
// blended with saturate_cast.
cv::Mat opencv_overlay(const cv::Mat& rgb, const cv::Mat& values, const ValueScale& scale, double opacity,
                       OverlayAlpha mode) {
  const ColourTable& table = colour_table(scale.colormap);
  cv::Mat full;
  cv::resize(values, full, rgb.size(), 0, 0, cv::INTER_NEAREST);
  cv::Mat blended(rgb.size(), CV_8UC3);
  for (int y = 0; y < rgb.rows; ++y)
    for (int x = 0; x < rgb.cols; ++x) {
      const double value = double(full.at<float>(y, x));
      const double a = scale.alpha(value, opacity, mode);
      const auto& colour = table[size_t(scale.table_index(value))];
      for (int c = 0; c < 3; ++c)
        blended.at<cv::Vec3b>(y, x)[c] =
            cv::saturate_cast<uint8_t>(rgb.at<cv::Vec3b>(y, x)[c] * (1.0 - a) + colour[size_t(c)] * a);
    }
  return blended;
}

TEST(EngineDrawing, OverlayIsOpenCvsNearestResizeAndBlend) {
  // Grids that do not divide the image (14 x 14 over 224 does; 7 x 5 over 201 x 224, 37 x 37 over
  // 518 x 518 and a grid larger than the image do not), both alpha modes, a diverging scale.
  const struct {
    int grid_rows, grid_cols, rows, cols;
  } cases[] = {{14, 14, 224, 224}, {7, 5, 201, 224}, {37, 37, 518, 518}, {9, 11, 6, 7}, {1, 1, 3, 5}};
  for (const auto& shape : cases) {
    cv::Mat values(shape.grid_rows, shape.grid_cols, CV_32FC1);
    for (int i = 0; i < int(values.total()); ++i) values.at<float>(i) = float(std::sin(i * 0.37) * 0.8);
    ValueRange range;
    range.include(values.ptr<float>(), values.total());
    const RgbImage image = noise_image(shape.rows, shape.cols, unsigned(shape.rows));
    for (const char* spec : {"zero-max", "min-max"})
      for (OverlayAlpha mode : {OverlayAlpha::Value, OverlayAlpha::Constant}) {
        const ValueScale scale = resolve_value_scale(parse_scale_spec(spec), Colormap::Turbo, range);
        const RgbImage ours = overlay_values(image, {values.ptr<float>(), values.rows, values.cols}, scale, 0.55, mode);
        const cv::Mat expected = opencv_overlay(to_mat(image), values, scale, 0.55, mode);
        EXPECT_TRUE(ours.same_pixels(to_rgb_image(expected)))
            << shape.grid_rows << "x" << shape.grid_cols << " over " << shape.rows << "x" << shape.cols << " " << spec;
      }
  }
  EXPECT_THROW(overlay_values(noise_image(4, 4, 1), {nullptr, 0, 0}, ValueScale{}, 0.5, OverlayAlpha::Constant),
               std::invalid_argument);
}

// What the workbench's map shader blends per screen pixel: each cell's colour and weight. Blended
// over the image as the shader blends them (the cell a pixel falls in, single-precision weight), they
// give overlay_values' pixels, within one level where the weight's float rounding meets a tie.
TEST(EngineDrawing, ScreenCellsBlendToTheExportedOverlay) {
  const struct {
    int grid_rows, grid_cols, rows, cols;
  } cases[] = {{14, 14, 224, 224}, {7, 5, 201, 224}, {9, 11, 6, 7}};
  for (const auto& shape : cases) {
    std::vector<float> values(size_t(shape.grid_rows * shape.grid_cols));
    for (size_t i = 0; i < values.size(); ++i) values[i] = float(std::sin(double(i) * 0.37) * 0.8);
    const ValueGrid grid{values.data(), shape.grid_rows, shape.grid_cols};
    ValueRange range;
    range.include(values.data(), values.size());
    const RgbImage image = noise_image(shape.rows, shape.cols, unsigned(shape.rows));
    for (const char* spec : {"zero-max", "min-max", "log"})
      for (OverlayAlpha mode : {OverlayAlpha::Value, OverlayAlpha::Constant}) {
        const ValueScale scale = resolve_value_scale(parse_scale_spec(spec), Colormap::Viridis, range);
        const std::vector<float> cells = colour_and_weight_values(grid, scale, 0.55, mode);
        ASSERT_EQ(cells.size(), values.size() * 4);
        const RgbImage colours = colour_values(grid, scale);
        for (int y = 0; y < shape.grid_rows; ++y)
          for (int x = 0; x < shape.grid_cols; ++x) {
            const float* cell = &cells[size_t(y * shape.grid_cols + x) * 4];
            for (int c = 0; c < 3; ++c) EXPECT_EQ(cell[c] * 255.0f, float(colours.row(y)[3 * x + c])) << spec;
            EXPECT_EQ(cell[3], float(scale.alpha(double(grid.at(y, x)), 0.55, mode))) << spec;
          }
        const RgbImage exported = overlay_values(image, grid, scale, 0.55, mode);
        // Each pixel's cell as OpenCV's nearest neighbour picks it, the source overlay_values follows.
        cv::Mat stretched;
        cv::resize(cv::Mat(shape.grid_rows, shape.grid_cols, CV_32FC4, const_cast<float*>(cells.data())), stretched,
                   cv::Size(shape.cols, shape.rows), 0, 0, cv::INTER_NEAREST);
        for (int y = 0; y < shape.rows; ++y)
          for (int x = 0; x < shape.cols; ++x) {
            const cv::Vec4f cell = stretched.at<cv::Vec4f>(y, x);
            for (int c = 0; c < 3; ++c) {
              const float base = float(image.row(y)[3 * x + c]) / 255.0f;
              const float blended = base + (cell[c] - base) * cell[3];  // GLSL's mix
              const int difference = std::abs(int(std::lrint(blended * 255.0f)) - int(exported.row(y)[3 * x + c]));
              // The blend in double: a level apart only where it is a tie (x.5), which single
              // precision breaks either way (the weight's float rounding moves it by under 1e-5).
              const double exact = image.row(y)[3 * x + c] * (1.0 - cell[3]) + double(cell[c]) * 255.0 * cell[3];
              const bool tie = std::abs(exact - std::floor(exact) - 0.5) < 1e-4;
              ASSERT_LE(difference, tie ? 1 : 0) << spec << " at " << x << "," << y << ": " << exact;
            }
          }
      }
  }
}

// The PCA view's colours over the image (analysis_pca's colours_over_image): cv::resize nearest, then
// cv::addWeighted, whose 8-bit rounding of a near-tie depends on its single-precision arithmetic.
TEST(EngineDrawing, CellsOverlayIsOpenCvsResizeAndAddWeighted) {
  const struct {
    int grid_rows, grid_cols, rows, cols;
  } cases[] = {{14, 14, 224, 224}, {7, 5, 201, 224}, {37, 37, 518, 518}, {9, 11, 6, 7}, {1, 1, 3, 5}};
  for (const auto& shape : cases)
    for (double opacity : {0.6, 0.5, 0.35, 0.123, 1.0, 0.0}) {
      const RgbImage image = noise_image(shape.rows, shape.cols, unsigned(shape.cols));
      const RgbImage cells = noise_image(shape.grid_rows, shape.grid_cols, unsigned(shape.grid_rows * 7));
      cv::Mat stretched, expected;
      cv::resize(to_mat(cells), stretched, cv::Size(shape.cols, shape.rows), 0, 0, cv::INTER_NEAREST);
      cv::addWeighted(to_mat(image), 1.0 - opacity, stretched, opacity, 0.0, expected);
      EXPECT_TRUE(overlay_cells(image, cells, opacity).same_pixels(to_rgb_image(expected)))
          << shape.grid_rows << "x" << shape.grid_cols << " over " << shape.rows << "x" << shape.cols << " at "
          << opacity;
    }
  EXPECT_THROW(overlay_cells(noise_image(4, 4, 1), RgbImage(), 0.5), std::invalid_argument);
}

TEST(EngineDrawing, PngIsOpenCvsImencodeByteForByte) {
  for (const auto& [rows, cols] : {std::pair{224, 224}, std::pair{1, 1}, std::pair{37, 518}}) {
    const RgbImage image = noise_image(rows, cols, unsigned(cols));
    cv::Mat bgr;
    cv::cvtColor(to_mat(image), bgr, cv::COLOR_RGB2BGR);
    std::vector<uint8_t> expected;
    ASSERT_TRUE(cv::imencode(".png", bgr, expected));
    const std::string ours = encode_png(image);
    EXPECT_EQ(ours, std::string(expected.begin(), expected.end())) << rows << "x" << cols;
    // And it reads back as the same pixels.
    const std::string path = (std::filesystem::temp_directory_path() / "attnscope_encode_png_test.png").string();
    write_file_atomically(path, [&](std::ostream& out) { out.write(ours.data(), std::streamsize(ours.size())); });
    EXPECT_TRUE(load_image_rgb(path, kDefaultMaxPixels).same_pixels(image)) << rows << "x" << cols;
    std::filesystem::remove(path);
  }
  EXPECT_THROW(encode_png(RgbImage{}), ImageError);
}

}  // namespace test_engine_drawing
}  // namespace attnscope
