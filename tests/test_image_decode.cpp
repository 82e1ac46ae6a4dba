// The engine-only build's PNG and JPEG decoders (core/image_decode.cpp: libpng and libjpeg-turbo,
// which travel to a GPU machine) against OpenCV's imread, which the default build uses: the same
// pixels on every bundled image, every PIL-written fixture and the PNG and JPEG variants OpenCV
// writes (16-bit, gray, alpha, progressive, optimised, restart markers), and the decoder's reason for a
// broken file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/image.h"
#include "core/image_decode.h"
#include "core/image_header.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;

// The engine-only build's decoder, for any file.
RgbImage decode_with_libraries(const std::string& path) { return decode_png_or_jpeg(path, read_image_header(path)); }

void expect_same_pixels(const std::string& path) {
  SCOPED_TRACE(path);
  const RgbImage by_opencv = decode_image_pixels(path, read_image_header(path));
  const RgbImage by_libraries = decode_with_libraries(path);
  ASSERT_EQ(by_libraries.rows, by_opencv.rows);
  ASSERT_EQ(by_libraries.cols, by_opencv.cols);
  int differing = 0;
  for (size_t i = 0; i < by_opencv.bytes(); ++i) differing += by_opencv.data()[i] != by_libraries.data()[i];
  EXPECT_EQ(differing, 0) << "of " << by_opencv.bytes() << " values";
}

std::vector<std::string> png_and_jpeg_files(const fs::path& folder) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string extension = entry.path().extension().string();
    if (extension == ".png" || extension == ".jpg" || extension == ".jpeg") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ImageDecode, BundledImagesDecodeToOpenCVsPixels) {
  const auto files = png_and_jpeg_files(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "images");
  EXPECT_GE(files.size(), 9u);
  for (const std::string& file : files) expect_same_pixels(file);
}

// noise, gradient, gray, RGBA, palette, 16-bit gray and RGB PNGs and a JPEG, as PIL writes them
// (tests/python/make_image_fixtures.py).
TEST(ImageDecode, PilWrittenFixturesDecodeToOpenCVsPixels) {
  const fs::path folder = fs::path(ATTNSCOPE_TEST_DATA_DIR) / "image_fixtures";
  const auto index = nlohmann::json::parse(read_file_contents(folder / "index.json"));
  int decoded = 0;
  for (const auto& image : index.at("images")) {
    const std::string file = (folder / image.at("file").get<std::string>()).string();
    const std::string format = read_image_header(file).format;
    if (format != "PNG" && format != "JPEG") continue;
    expect_same_pixels(file);
    ++decoded;
  }
  EXPECT_GE(decoded, 7);
}

TEST(ImageDecode, OpenCvWrittenVariantsDecodeToOpenCVsPixels) {
  TestFolder folder("image-decode");
  cv::RNG rng(7);
  cv::Mat colour(61, 77, CV_8UC3), colour16(23, 31, CV_16UC3), gray(40, 33, CV_8UC1), bgra(19, 29, CV_8UC4),
      gray16(17, 13, CV_16UC1);
  for (cv::Mat* mat : {&colour, &gray, &bgra}) rng.fill(*mat, cv::RNG::UNIFORM, 0, 256);
  for (cv::Mat* mat : {&colour16, &gray16}) rng.fill(*mat, cv::RNG::UNIFORM, 0, 65536);
  // A smooth picture too: JPEG's artefacts on noise and on gradients exercise different paths.
  cv::Mat smooth(120, 90, CV_8UC3);
  for (int y = 0; y < smooth.rows; ++y)
    for (int x = 0; x < smooth.cols; ++x)
      smooth.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(2 * x), uchar(2 * y), uchar(x + y));
  const std::vector<std::pair<std::string, std::pair<cv::Mat, std::vector<int>>>> cases = {
      {"colour.png", {colour, {}}},
      {"colour16.png", {colour16, {}}},
      {"gray.png", {gray, {}}},
      {"gray16.png", {gray16, {}}},
      {"bgra.png", {bgra, {}}},
      {"colour_q95.jpg", {colour, {cv::IMWRITE_JPEG_QUALITY, 95}}},
      {"smooth_q75.jpg", {smooth, {cv::IMWRITE_JPEG_QUALITY, 75}}},
      {"smooth_progressive.jpg", {smooth, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}}},
      {"smooth_optimized.jpg", {smooth, {cv::IMWRITE_JPEG_OPTIMIZE, 1}}},
      {"smooth_restarts.jpg", {smooth, {cv::IMWRITE_JPEG_RST_INTERVAL, 3}}},
      {"smooth_chroma_q30.jpg", {smooth, {cv::IMWRITE_JPEG_CHROMA_QUALITY, 30}}},
      {"gray.jpg", {gray, {}}},
  };
  for (const auto& [name, image] : cases) {
    const std::string path = folder.file(name);
    ASSERT_TRUE(cv::imwrite(path, image.first, image.second)) << name;
    expect_same_pixels(path);
    if (read_image_header(path).format == "JPEG") {
      EXPECT_FALSE(jpeg_ends_early(path)) << name;
    }
  }
}

// A JPEG cut short (a download that stopped) decodes in both builds to an image whose last rows are
// gray, with only a libjpeg warning; PIL refuses it, and so does attnscope, before either decoder
// runs. Every whole JPEG (baseline, progressive, restart markers, PIL's, bundled) is accepted, and
// so are bytes after the end marker, which PIL ignores.
TEST(ImageDecode, TruncatedJpegsAreRefusedAsPilRefusesThem) {
  TestFolder folder("image-truncated");
  cv::Mat smooth(120, 90, CV_8UC3);
  for (int y = 0; y < smooth.rows; ++y)
    for (int x = 0; x < smooth.cols; ++x)
      smooth.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(2 * x), uchar(2 * y), uchar(x + y));
  for (const auto& [name, parameters] :
       std::vector<std::pair<std::string, std::vector<int>>>{{"baseline.jpg", {}},
                                                             {"progressive.jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},
                                                             {"restarts.jpg", {cv::IMWRITE_JPEG_RST_INTERVAL, 2}}}) {
    SCOPED_TRACE(name);
    const std::string whole = folder.file(name);
    ASSERT_TRUE(cv::imwrite(whole, smooth, parameters));
    const std::string bytes = read_file_contents(whole);
    EXPECT_FALSE(jpeg_ends_early(whole));
    EXPECT_NO_THROW(load_image_rgb(whole, kLargestMaxPixels));
    const std::string trailing = folder.file("trailing_" + name);
    write_file_contents(trailing, bytes + std::string(100, '\x5a'));
    EXPECT_FALSE(jpeg_ends_early(trailing));
    // Cut in the scan data, and just before the end marker: both decoders still return an image.
    for (const size_t keep : {bytes.size() * 2 / 3, bytes.size() - 2}) {
      const std::string cut = folder.file("cut_" + std::to_string(keep) + "_" + name);
      write_file_contents(cut, bytes.substr(0, keep));
      EXPECT_TRUE(jpeg_ends_early(cut)) << keep;
      EXPECT_NO_THROW(decode_with_libraries(cut)) << "libjpeg refuses it now: the check may be moot";
      try {
        load_image_rgb(cut, kLargestMaxPixels);
        ADD_FAILURE() << "a JPEG cut at " << keep << " of " << bytes.size() << " bytes was decoded";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("a truncated JPEG"), std::string::npos) << e.what();
      }
    }
  }
  for (const std::string& file : png_and_jpeg_files(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "images"))
    EXPECT_FALSE(jpeg_ends_early(file)) << file;
  const fs::path fixtures = fs::path(ATTNSCOPE_TEST_DATA_DIR) / "image_fixtures";
  for (const std::string& file : png_and_jpeg_files(fixtures)) EXPECT_FALSE(jpeg_ends_early(file)) << file;
}

std::string decoder_error(const std::string& path) {
  try {
    decode_with_libraries(path);
  } catch (const std::exception& e) {  // ImageError, or the header reader's refusal
    return e.what();
  }
  return "(no error)";
}

// A PNG cut short or with damaged bytes is refused naming the chunk and the cause, before OpenCV's
// libpng writes its own "libpng error" line and the file is called "not a supported image format";
// every whole PNG (bundled, PIL's, with bytes after IEND) passes the check.
TEST(ImageDecode, TruncatedAndDamagedPngsAreNamed) {
  TestFolder folder("image-png-chunks");
  const std::string bytes = read_file_contents(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "images" / "sign_4.png");
  const size_t idat = bytes.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  auto refusal = [&](const std::string& name, const std::string& content) {
    const std::string path = folder.file(name);
    write_file_contents(path, content);
    try {
      load_image_rgb(path, kLargestMaxPixels);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(decoded)");
  };
  EXPECT_NE(refusal("cut.png", bytes.substr(0, 300)).find("a truncated PNG: its IDAT chunk at byte"),
            std::string::npos);
  EXPECT_NE(refusal("no_iend.png", bytes.substr(0, bytes.size() - 12)).find("before its IEND chunk"),
            std::string::npos);
  std::string damaged = bytes;
  for (size_t k = idat + 20; k < idat + 60; ++k) damaged[k] = char(damaged[k] ^ 0x55);
  EXPECT_NE(refusal("damaged.png", damaged).find("a corrupt PNG: its IDAT chunk"), std::string::npos);
  EXPECT_EQ(refusal("trailing.png", bytes + "trailing bytes"), "(decoded)");
  for (const std::string& file : png_and_jpeg_files(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "images"))
    EXPECT_EQ(png_chunk_problem(file), "") << file;
  for (const std::string& file : png_and_jpeg_files(fs::path(ATTNSCOPE_TEST_DATA_DIR) / "image_fixtures"))
    if (decoder_error(file) == "(no error)") {
      EXPECT_EQ(png_chunk_problem(file), "") << file;
    }
}

TEST(ImageDecode, RefusesBrokenFilesWithTheDecodersReason) {
  TestFolder folder("image-decode");
  const std::string png = folder.file("whole.png");
  cv::Mat colour(40, 40, CV_8UC3, cv::Scalar(10, 200, 30));
  ASSERT_TRUE(cv::imwrite(png, colour));
  std::string bytes = read_file_contents(png);
  // The image data cut off half way: libpng's reason, not a crash or a half-black image.
  const std::string truncated = folder.file("truncated.png");
  write_file_contents(truncated, bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(decoder_error(truncated).find("PNG decoder: "), std::string::npos) << decoder_error(truncated);
  // A flipped bit in IHDR's checksum.
  bytes[29] = char(bytes[29] ^ 0x01);
  const std::string bad_crc = folder.file("bad_crc.png");
  write_file_contents(bad_crc, bytes);
  EXPECT_NE(decoder_error(bad_crc).find("PNG decoder: "), std::string::npos) << decoder_error(bad_crc);
  // A JPEG whose frame header claims 7-bit samples.
  const std::string jpeg = folder.file("whole.jpg");
  ASSERT_TRUE(cv::imwrite(jpeg, colour));
  std::string jpeg_bytes = read_file_contents(jpeg);
  const size_t frame = jpeg_bytes.find("\xFF\xC0");
  ASSERT_NE(frame, std::string::npos);
  jpeg_bytes[frame + 4] = 7;  // marker (2), length (2), then the sample precision
  const std::string seven_bits = folder.file("seven_bits.jpg");
  write_file_contents(seven_bits, jpeg_bytes);
  const std::string message = decoder_error(seven_bits);
  EXPECT_NE(message.find("JPEG decoder: "), std::string::npos) << message;
  // A format only OpenCV reads: the engine-only build says what to do.
  const std::string bmp = folder.file("colour.bmp");
  ASSERT_TRUE(cv::imwrite(bmp, colour));
  EXPECT_NE(decoder_error(bmp).find("a BMP file: the engine-only build (ATTNSCOPE_ENGINE_ONLY) decodes PNG and JPEG"),
            std::string::npos)
      << decoder_error(bmp);
}

}  // namespace
}  // namespace attnscope
