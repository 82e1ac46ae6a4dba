// Image pipeline and .npy I/O against fixtures from tests/python/make_image_fixtures.py: PIL's
// decoding and bicubic resize, timm's eval transform and torchvision's ToTensor + Normalize.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/image.h"
#include "core/npy.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_image {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtureDir = ATTNSCOPE_TEST_DATA_DIR "/image_fixtures";

std::string fixture(const std::string& name) { return kFixtureDir + "/" + name; }

const json& fixture_index() {
  static const json index = [] {
    std::ifstream in(fixture("index.json"));
    if (!in) {
      throw std::runtime_error("missing " + fixture("index.json") +
                               ": run tests/python/make_all_fixtures.sh (ctest does)");
    }
    return json::parse(in);
  }();
  return index;
}

// An HxWx3 uint8 tensor as an RgbImage (copied, so it outlives the tensor).
RgbImage image_from_tensor(const torch::Tensor& hwc) {
  const torch::Tensor data = hwc.to(torch::kUInt8).contiguous();
  EXPECT_EQ(data.dim(), 3);
  EXPECT_EQ(data.size(2), 3);
  RgbImage image(static_cast<int>(data.size(0)), static_cast<int>(data.size(1)));
  std::memcpy(image.data(), data.data_ptr<uint8_t>(), image.bytes());
  return image;
}

RgbImage read_rgb_npy(const std::string& name) { return image_from_tensor(read_npy(fixture(name))); }

// Asserts two 8-bit RGB images are byte-identical, describing any difference.
void expect_identical(const RgbImage& actual, const RgbImage& expected, const std::string& what) {
  ASSERT_EQ(actual.rows, expected.rows) << what;
  ASSERT_EQ(actual.cols, expected.cols) << what;
  int max_abs = 0, differing = 0;
  for (size_t i = 0; i < actual.bytes(); ++i) {
    const int difference = std::abs(int(actual.data()[i]) - int(expected.data()[i]));
    max_abs = std::max(max_abs, difference);
    differing += difference != 0;
  }
  EXPECT_EQ(max_abs, 0) << what << ": " << differing << " of " << actual.bytes() << " values differ";
}

// ---------------------------------------------------------------------------------------------

TEST(ResizeMode, ParsesAndPrintsTheThreeNames) {
  for (const std::string name : {"timm", "fit", "none"}) {
    EXPECT_EQ(to_string(parse_resize_mode(name)), name);
  }
  try {
    parse_resize_mode("Timm");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown resize mode 'Timm' (expected auto, timm, fit or none)");
  }
}

TEST(LoadImage, DecodesLikePil) {
  for (const auto& image : fixture_index()["images"]) {
    const std::string file = image["file"];
    const RgbImage loaded = load_image_rgb(fixture(file), kDefaultMaxPixels);
    expect_identical(loaded, read_rgb_npy(image["decoded"]),
                     file + " (expected from " + image["decoded_by"].get<std::string>() + ")");
  }
}

TEST(LoadImage, ReportsMissingAndUnreadableFiles) {
  auto message_for = [](const std::string& path) -> std::string {
    try {
      load_image_rgb(path, kDefaultMaxPixels);
    } catch (const ImageError& e) {
      return e.what();
    }
    return "(no exception)";
  };
  const std::string missing = fixture("does_not_exist.png");
  EXPECT_EQ(message_for(missing), "cannot read image " + missing + ": No such file or directory");
  EXPECT_EQ(message_for(kFixtureDir), "cannot read image " + kFixtureDir + ": is a directory");
  EXPECT_EQ(message_for(fixture("empty.png")), "cannot read image " + fixture("empty.png") + ": the file is empty");
  for (const auto& file : fixture_index()["invalid_images"]) {
    const std::string path = fixture(file.get<std::string>());
    EXPECT_EQ(message_for(path).rfind("cannot read image " + path + ": ", 0), 0u) << message_for(path);
  }
}

TEST(ResizeBicubicPil, MatchesPilExactly) {
  int compared = 0;
  for (const auto& image : fixture_index()["images"]) {
    const RgbImage source = read_rgb_npy(image["decoded"]);
    for (const auto& resize : image["resize"]) {
      const RgbImage resized = resize_bicubic_pil(source, resize["width"], resize["height"]);
      expect_identical(resized, read_rgb_npy(resize["npy"]), resize["npy"]);
      ++compared;
    }
  }
  EXPECT_GE(compared, 40);
}

TEST(ResizeBilinearPil, MatchesPilExactly) {
  int compared = 0;
  for (const auto& image : fixture_index()["images"]) {
    const RgbImage source = read_rgb_npy(image["decoded"]);
    for (const auto& resize : image["resize_bilinear"]) {
      const RgbImage resized = resize_pil(source, resize["width"], resize["height"], Interpolation::Bilinear);
      expect_identical(resized, read_rgb_npy(resize["npy"]), resize["npy"]);
      ++compared;
    }
  }
  EXPECT_GE(compared, 40);
}

TEST(ResizeBicubicPil, SameSizeIsACopy) {
  const RgbImage source = read_rgb_npy("noise.decoded.npy");
  const RgbImage copy = resize_bicubic_pil(source, source.cols, source.rows);
  expect_identical(copy, source, "same size");
  EXPECT_NE(copy.data(), source.data());
}

TEST(ResizeBicubicPil, RejectsBadArguments) {
  const RgbImage source(10, 10);
  EXPECT_THROW(resize_bicubic_pil(source, 0, 5), ImageError);
  EXPECT_THROW(resize_bicubic_pil(source, 5, -1), ImageError);
  EXPECT_THROW(resize_bicubic_pil(RgbImage(), 5, 5), ImageError);
}

TEST(PrepareImage, TimmMatchesTheReferenceTransform) {
  int compared = 0;
  for (const auto& image : fixture_index()["images"]) {
    const RgbImage source = read_rgb_npy(image["decoded"]);
    for (const auto& timm : image["timm"]) {
      const RgbImage prepared =
          prepare_image(source, ResizeMode::Timm, timm["height"], timm["width"], timm["crop_pct"].get<double>());
      expect_identical(prepared, read_rgb_npy(timm["npy"]), timm["npy"]);
      ++compared;
    }
  }
  EXPECT_GE(compared, 40);
}

TEST(PrepareImage, FitIsAPlainResize) {
  const RgbImage source = read_rgb_npy("gradient.decoded.npy");
  expect_identical(prepare_image(source, ResizeMode::Fit, 224, 224), read_rgb_npy("gradient.resize_224x224.npy"),
                   "fit 224x224");
  expect_identical(prepare_image(source, ResizeMode::Fit, 171, 256), read_rgb_npy("gradient.resize_256x171.npy"),
                   "fit 256x171 (w x h)");
}

TEST(PrepareImage, NoneRequiresTheModelSize) {
  const RgbImage source = read_rgb_npy("gradient.decoded.npy");  // 300x200
  expect_identical(prepare_image(source, ResizeMode::None, 200, 300), source, "none");
  try {
    prepare_image(source, ResizeMode::None, 224, 224);
    FAIL() << "expected ImageError";
  } catch (const ImageError& e) {
    EXPECT_STREQ(e.what(), "image is 300x200 but the model needs 224x224 (use --resize timm or fit)");
  }
  EXPECT_THROW(prepare_image(source, ResizeMode::Timm, 224, 224, 0.0), ImageError);
  EXPECT_THROW(prepare_image(source, ResizeMode::Fit, 0, 224), ImageError);
}

TEST(ImageToTensor, MatchesToTensorAndNormalize) {
  for (const auto& image : fixture_index()["images"]) {
    const auto& config = image["tensor"];
    const RgbImage prepared = prepare_image(read_rgb_npy(image["decoded"]), ResizeMode::Timm, config["height"],
                                            config["width"], config["crop_pct"].get<double>());
    const torch::Tensor actual = image_to_tensor(prepared);
    const torch::Tensor expected = read_npy(fixture(config["npy"]));
    ASSERT_EQ(actual.sizes(), expected.sizes());
    ASSERT_EQ(actual.scalar_type(), torch::kFloat32);
    EXPECT_LE((actual - expected).abs().max().item<float>(), 1e-6f) << config["npy"];
  }
}

TEST(ImageToTensor, EndToEndFromAJpegFile) {
  const RgbImage prepared =
      prepare_image(load_image_rgb(fixture("photo.jpg"), kDefaultMaxPixels), ResizeMode::Timm, 224, 224);
  const torch::Tensor expected = read_npy(fixture("photo.tensor.npy"));
  EXPECT_LE((image_to_tensor(prepared) - expected).abs().max().item<float>(), 1e-6f);
}

TEST(ImageToTensor, UsesTheGivenNormalization) {
  RgbImage pixels(1, 2);
  for (int x = 0; x < 2; ++x) {
    pixels.row(0)[3 * x + 0] = 0;
    pixels.row(0)[3 * x + 1] = 51;
    pixels.row(0)[3 * x + 2] = 255;
  }
  Normalization identity;
  identity.mean = {0.0f, 0.0f, 0.0f};
  identity.std = {1.0f, 1.0f, 1.0f};
  const torch::Tensor tensor = image_to_tensor(pixels, identity);
  ASSERT_EQ(tensor.sizes(), (std::vector<int64_t>{1, 3, 1, 2}));
  EXPECT_FLOAT_EQ(tensor[0][0][0][1].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(tensor[0][1][0][0].item<float>(), 0.2f);
  EXPECT_FLOAT_EQ(tensor[0][2][0][1].item<float>(), 1.0f);
}

// ---------------------------------------------------------------------------------------------
// core/npy (the fixtures above depend on read_npy, so its tests live with them).

torch::ScalarType dtype_for(const std::string& descr) {
  if (descr == "<f4") return torch::kFloat32;
  if (descr == "<f8") return torch::kFloat64;
  if (descr == "|u1") return torch::kUInt8;
  if (descr == "<i4") return torch::kInt32;
  if (descr == "<i8") return torch::kInt64;
  throw std::runtime_error("test: unexpected dtype " + descr);
}

TEST(Npy, ReadsWhatNumpyWrote) {
  for (const auto& entry : fixture_index()["npy_valid"]) {
    const std::string file = entry["file"];
    const torch::Tensor tensor = read_npy(fixture(file));
    const std::vector<int64_t> shape = entry["shape"];
    EXPECT_EQ(tensor.sizes(), torch::IntArrayRef(shape)) << file;
    EXPECT_EQ(tensor.scalar_type(), dtype_for(entry["dtype"])) << file;
    const torch::Tensor expected = torch::arange(tensor.numel()).to(tensor.scalar_type());
    EXPECT_TRUE(torch::equal(tensor.reshape(-1), expected)) << file;
  }
}

TEST(Npy, RejectsBadFilesWithAReason) {
  for (const auto& entry : fixture_index()["npy_invalid"]) {
    const std::string path = fixture(entry["file"]);
    try {
      read_npy(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(entry["why"].get<std::string>()), std::string::npos) << message;
    }
  }
  EXPECT_THROW(read_npy(fixture("missing.npy")), std::runtime_error);
  EXPECT_THROW(read_npy(fixture("noise.png")), std::runtime_error);
}

class NpyWrite : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return folder_.file(name); }
  size_t files_in_folder() const { return folder_.entry_count(); }

  TestFolder folder_{"npy"};
};

TEST_F(NpyWrite, RoundTripsEachDtype) {
  const std::vector<torch::Tensor> tensors = {
      torch::randn({2, 3, 5}),
      torch::randint(0, 256, {4, 7}).to(torch::kUInt8),
      torch::randint(-1000000, 1000000, {3, 2}).to(torch::kInt64),
      torch::randn({6}).to(torch::kFloat64),
      torch::randint(-50, 50, {2, 2}).to(torch::kInt32),
      torch::tensor(3.5f),       // 0-d
      torch::zeros({0, 4}),      // empty
      torch::randn({4, 6}).t(),  // non-contiguous
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string file = path("t" + std::to_string(i) + ".npy");
    write_npy(file, tensors[i]);
    const torch::Tensor back = read_npy(file);
    EXPECT_EQ(back.scalar_type(), tensors[i].scalar_type()) << i;
    EXPECT_TRUE(torch::equal(back, tensors[i])) << i;
    // numpy aligns the data to 64 bytes; so do we.
    const auto size = fs::file_size(file);
    EXPECT_EQ((size - tensors[i].numel() * tensors[i].element_size()) % 64, 0u) << i;
  }
  EXPECT_EQ(files_in_folder(), tensors.size());  // no temporary files left behind
}

TEST_F(NpyWrite, NumpyReadsTheResult) {
  const std::string file = path("for_numpy.npy");
  write_npy(file, torch::arange(24, torch::kFloat32).reshape({2, 3, 4}));
  const std::string check = std::string(ATTNSCOPE_PYTHON) +
                            " -c \"import numpy, sys; a = numpy.load(sys.argv[1]); "
                            "sys.exit(0 if a.shape == (2, 3, 4) and a.dtype == numpy.float32 and "
                            "(a.ravel() == numpy.arange(24)).all() else 1)\" '" +
                            file + "'";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
}

TEST_F(NpyWrite, FailsCleanly) {
  EXPECT_THROW(write_npy(path("no_such_dir/x.npy"), torch::zeros({2})), std::runtime_error);
  EXPECT_THROW(write_npy(path("complex.npy"), torch::zeros({2}, torch::kComplexFloat)), std::runtime_error);
  EXPECT_THROW(write_npy(path("undefined.npy"), torch::Tensor()), std::runtime_error);
  EXPECT_EQ(files_in_folder(), 0u);
}

TEST_F(NpyWrite, ReplacesAnExistingFile) {
  const std::string file = path("replaced.npy");
  write_npy(file, torch::zeros({100}));
  write_npy(file, torch::ones({3}, torch::kInt64));
  EXPECT_TRUE(torch::equal(read_npy(file), torch::ones({3}, torch::kInt64)));
}

}  // namespace test_image
}  // namespace attnscope
