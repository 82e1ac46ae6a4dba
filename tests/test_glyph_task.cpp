// The sign-in-clutter generator: determinism per seed, balanced labels, target geometry that
// agrees with the pixels, clutter that keeps clear of the target, and the batch tensors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/cv_image.h"
#include "core/image.h"
#include "core/npy.h"
#include "datasets/glyph_task.h"

namespace attnscope {
namespace test_glyph_task {

namespace fs = std::filesystem;

bool same_pixels(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

TEST(GlyphTask, SameSeedGivesIdenticalSample) {
  for (const uint64_t seed : std::array<uint64_t, 3>{0, 7, kHeldOutSeedBase + 3}) {
    const GlyphSample first = make_glyph_sample(seed);
    const GlyphSample second = make_glyph_sample(seed);
    cv::Mat clutter;
    const GlyphSample with_clutter = make_glyph_sample(seed, {}, &clutter);
    EXPECT_TRUE(same_pixels(first.rgb, second.rgb));
    EXPECT_TRUE(same_pixels(first.mask, second.mask));
    EXPECT_EQ(first.label, second.label);
    EXPECT_EQ(first.box, second.box);
    // Asking for the clutter mask must not change the sample.
    EXPECT_TRUE(same_pixels(first.rgb, with_clutter.rgb));
    EXPECT_EQ(first.box, with_clutter.box);
  }
}

TEST(GlyphTask, DifferentSeedsGiveDifferentSamples) {
  std::vector<GlyphSample> samples;
  for (uint64_t seed = 0; seed < 16; ++seed) samples.push_back(make_glyph_sample(seed));
  for (size_t i = 0; i < samples.size(); ++i)
    for (size_t j = i + 1; j < samples.size(); ++j)
      EXPECT_FALSE(same_pixels(samples[i].rgb, samples[j].rgb)) << i << " vs " << j;
}

TEST(GlyphTask, SampleFormat) {
  const GlyphSample sample = make_glyph_sample(11);
  EXPECT_EQ(sample.rgb.type(), CV_8UC3);
  EXPECT_EQ(sample.rgb.size(), cv::Size(96, 96));
  EXPECT_EQ(sample.mask.type(), CV_8UC1);
  EXPECT_EQ(sample.mask.size(), cv::Size(96, 96));
  EXPECT_EQ(cv::countNonZero((sample.mask != 0) & (sample.mask != 255)), 0) << "mask is not binary";

  GlyphTaskOptions larger;
  larger.size = 160;
  const GlyphSample big = make_glyph_sample(11, larger);
  EXPECT_EQ(big.rgb.size(), cv::Size(160, 160));
  EXPECT_EQ(big.mask.size(), cv::Size(160, 160));
}

TEST(GlyphTask, LabelsAreDigitsAndBalanced) {
  std::array<int, 10> counts{};
  const int total = 2000;
  for (uint64_t seed = 0; seed < total; ++seed) {
    const int label = make_glyph_sample(seed).label;
    ASSERT_GE(label, 0);
    ASSERT_LE(label, 9);
    ++counts[label];
  }
  // Expected 200 each, binomial sd about 13.4: 140..260 is a 4.5 sd band.
  for (int digit = 0; digit < 10; ++digit) {
    EXPECT_GE(counts[digit], 140) << "digit " << digit;
    EXPECT_LE(counts[digit], 260) << "digit " << digit;
  }
}

TEST(GlyphTask, TargetGeometryAgreesWithPixels) {
  const cv::Rect image(0, 0, 96, 96);
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const GlyphSample sample = make_glyph_sample(seed);
    ASSERT_FALSE(sample.box.empty());
    EXPECT_EQ(sample.box & image, sample.box) << "box leaves the image";
    // The mask is the whole sign: exactly the box.
    EXPECT_EQ(cv::countNonZero(sample.mask), sample.box.area());
    EXPECT_EQ(cv::countNonZero(sample.mask(sample.box)), sample.box.area());
    // Digits 24-36 px at 112 (20.6-30.9 px at 96) plus stroke and plate padding.
    EXPECT_GE(sample.box.height, 22);
    EXPECT_LE(sample.box.height, 42);
  }
}

TEST(GlyphTask, SignIsALightPlateWithADarkDigit) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const GlyphSample sample = make_glyph_sample(seed);
    cv::Mat luma;
    cv::cvtColor(sample.rgb(sample.box), luma, cv::COLOR_RGB2GRAY);
    // The plate's corners are never covered by the digit.
    EXPECT_GE(luma.at<uint8_t>(0, 0), 200);
    EXPECT_GE(luma.at<uint8_t>(luma.rows - 1, luma.cols - 1), 200);
    double darkest = 0;
    cv::minMaxLoc(luma, &darkest);
    EXPECT_LE(darkest, 20) << "no ink on the plate";
    // Ink covers a real share of the plate: a digit, not a speck.
    const double ink_share = cv::countNonZero(luma < 100) / static_cast<double>(luma.total());
    EXPECT_GT(ink_share, 0.08);
    EXPECT_LT(ink_share, 0.6);
  }
}

TEST(GlyphTask, ClutterKeepsClearOfTargetBox) {
  int samples_with_clutter = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    cv::Mat clutter;
    const GlyphSample sample = make_glyph_sample(seed, {}, &clutter);
    ASSERT_EQ(clutter.type(), CV_8UC1);
    ASSERT_EQ(clutter.size(), sample.rgb.size());
    if (cv::countNonZero(clutter) > 0) ++samples_with_clutter;
    EXPECT_LE(cv::countNonZero(clutter(sample.box)), 2) << "seed " << seed;
  }
  EXPECT_EQ(samples_with_clutter, 300);
}

TEST(GlyphTask, DistractorCountFollowsOptions) {
  GlyphTaskOptions none;
  none.min_distractors = 0;
  none.max_distractors = 0;
  cv::Mat clutter;
  make_glyph_sample(5, none, &clutter);
  EXPECT_EQ(cv::countNonZero(clutter), 0);
}

TEST(GlyphTask, RejectsBadOptions) {
  GlyphTaskOptions tiny;
  tiny.size = 16;
  EXPECT_THROW(make_glyph_sample(0, tiny), std::invalid_argument);
  GlyphTaskOptions inverted;
  inverted.min_distractors = 5;
  inverted.max_distractors = 2;
  EXPECT_THROW(make_glyph_sample(0, inverted), std::invalid_argument);
  EXPECT_THROW(make_glyph_batch(0, -1), std::invalid_argument);
}

TEST(GlyphTask, BatchMatchesSamples) {
  const uint64_t first_seed = kHeldOutSeedBase + 100;
  const int count = 6;
  const GlyphBatch batch = make_glyph_batch(first_seed, count);
  ASSERT_EQ(batch.images.sizes(), torch::IntArrayRef({count, 3, 96, 96}));
  ASSERT_EQ(batch.labels.sizes(), torch::IntArrayRef({count}));
  ASSERT_EQ(batch.masks.sizes(), torch::IntArrayRef({count, 1, 96, 96}));
  EXPECT_EQ(batch.images.scalar_type(), torch::kFloat32);
  EXPECT_EQ(batch.labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(batch.masks.scalar_type(), torch::kFloat32);
  ASSERT_EQ(batch.boxes.size(), static_cast<size_t>(count));

  for (int index = 0; index < count; ++index) {
    const GlyphSample sample = make_glyph_sample(first_seed + index);
    EXPECT_EQ(batch.labels[index].item<int64_t>(), sample.label);
    EXPECT_EQ(batch.boxes[index], sample.box);
    EXPECT_TRUE(torch::equal(batch.images[index], image_to_tensor(to_rgb_image(sample.rgb))[0]));

    cv::Mat mask_from_batch(96, 96, CV_32FC1, batch.masks[index][0].contiguous().data_ptr<float>());
    cv::Mat expected;
    sample.mask.convertTo(expected, CV_32F, 1.0 / 255);
    EXPECT_EQ(cv::norm(mask_from_batch, expected, cv::NORM_INF), 0);
  }
  const torch::Tensor mask_values = std::get<0>(at::_unique(batch.masks));
  EXPECT_TRUE(torch::equal(mask_values, torch::tensor({0.0f, 1.0f})));

  // ImageNet normalisation, checked by hand on one pixel of the first sample.
  const GlyphSample first = make_glyph_sample(first_seed);
  const cv::Vec3b pixel = first.rgb.at<cv::Vec3b>(40, 70);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int channel = 0; channel < 3; ++channel) {
    const float expected = (pixel[channel] / 255.0f - mean[channel]) / std[channel];
    EXPECT_NEAR(batch.images[0][channel][40][70].item<float>(), expected, 1e-5);
  }
}

TEST(GlyphTask, EmptyBatch) {
  const GlyphBatch batch = make_glyph_batch(0, 0);
  EXPECT_EQ(batch.images.sizes(), torch::IntArrayRef({0, 3, 96, 96}));
  EXPECT_TRUE(batch.boxes.empty());
}

TEST(GlyphTask, ClassNamesAreDigits) {
  const std::vector<std::string> names = glyph_class_names();
  ASSERT_EQ(names.size(), 10u);
  for (int digit = 0; digit < 10; ++digit) EXPECT_EQ(names[digit], std::to_string(digit));
}

TEST(GlyphTask, WritesPngsAndLabels) {
  const fs::path folder = fs::temp_directory_path() / ("attnscope_glyph_" + std::to_string(::getpid()));
  write_glyph_samples_png(folder.string(), 3, 20);
  std::ifstream csv(folder / "labels.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "seed,label,x,y,w,h");
  for (uint64_t seed = 20; seed < 23; ++seed) {
    const GlyphSample sample = make_glyph_sample(seed);
    ASSERT_TRUE(std::getline(csv, line));
    const cv::Rect& box = sample.box;
    EXPECT_EQ(line, std::to_string(seed) + "," + std::to_string(sample.label) + "," + std::to_string(box.x) + "," +
                        std::to_string(box.y) + "," + std::to_string(box.width) + "," + std::to_string(box.height));
    cv::Mat read_back = cv::imread((folder / ("glyph_" + std::to_string(seed) + ".png")).string());
    ASSERT_FALSE(read_back.empty());
    cv::cvtColor(read_back, read_back, cv::COLOR_BGR2RGB);
    EXPECT_TRUE(same_pixels(read_back, sample.rgb));
  }
  EXPECT_FALSE(std::getline(csv, line));
  fs::remove_all(folder);
}

// The letters a sample lists are the letters it drew: inside the image, clear of the sign, each box
// holding clutter ink of the listed colour.
TEST(GlyphTask, ListedLettersAreTheDrawnOnes) {
  int listed = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    cv::Mat clutter;
    const GlyphSample sample = make_glyph_sample(seed, GlyphTaskOptions{}, &clutter);
    for (const GlyphLetter& letter : sample.letters) {
      ++listed;
      EXPECT_NE(std::string("ACEFHJKLMNPRTUVWXY").find(letter.letter), std::string::npos);
      EXPECT_EQ(letter.box & cv::Rect(0, 0, 96, 96), letter.box) << "seed " << seed;
      EXPECT_EQ((letter.box & sample.box).area(), 0) << "seed " << seed;
      EXPECT_GT(cv::countNonZero(clutter(letter.box)), 0) << "seed " << seed;
      // An anti-aliased pixel of coverage a is a*colour + (1-a)*under, so it is within (1-a)*255 of
      // the ink in every channel; the clutter mask (drawn with 255) gives a. Some pixel of at least
      // half coverage must meet that bound for the listed colour.
      bool inked = false;
      for (int y = letter.box.y; y < letter.box.br().y && !inked; ++y)
        for (int x = letter.box.x; x < letter.box.br().x && !inked; ++x) {
          const int coverage = clutter.at<uint8_t>(y, x);
          if (coverage < 128) continue;
          const cv::Vec3b pixel = sample.rgb.at<cv::Vec3b>(y, x);
          inked = true;
          for (int channel = 0; channel < 3; ++channel)
            inked = inked && std::abs(int(pixel[channel]) - int(letter.colour[channel])) <= 255 - coverage + 1;
        }
      EXPECT_TRUE(inked) << "seed " << seed << " letter " << letter.letter;
    }
    for (int channel = 0; channel < 3; ++channel) EXPECT_GE(sample.plate_colour[channel], 215);
  }
  EXPECT_GT(listed, 40 * 2);  // mostly letters among 4-8 distractors
}

TEST(GlyphTask, WritesNpyLabelsAndLetters) {
  const fs::path folder = fs::temp_directory_path() / ("attnscope_glyph_npy_" + std::to_string(::getpid()));
  write_glyph_samples_npy(folder.string(), 3, 30);
  const torch::Tensor images = read_npy((folder / "images.npy").string());
  ASSERT_EQ(images.sizes(), torch::IntArrayRef({3, 96, 96, 3}));
  ASSERT_EQ(images.scalar_type(), torch::kUInt8);
  std::ifstream labels(folder / "labels.csv"), letters(folder / "letters.csv");
  std::string line;
  std::getline(labels, line);
  EXPECT_EQ(line, "seed,label,x,y,w,h");
  std::getline(letters, line);
  EXPECT_EQ(line, "seed,letter,r,g,b,x,y,w,h");
  for (uint64_t seed = 30; seed < 33; ++seed) {
    const GlyphSample sample = make_glyph_sample(seed);
    const cv::Mat written(96, 96, CV_8UC3, images[int64_t(seed - 30)].data_ptr<uint8_t>());
    EXPECT_TRUE(same_pixels(written, sample.rgb)) << "seed " << seed;
    ASSERT_TRUE(std::getline(labels, line));
    EXPECT_EQ(line.substr(0, line.find(',', line.find(',') + 1)),
              std::to_string(seed) + "," + std::to_string(sample.label));
    for (const GlyphLetter& letter : sample.letters) {
      ASSERT_TRUE(std::getline(letters, line));
      EXPECT_EQ(line, std::to_string(seed) + "," + letter.letter + "," + std::to_string(int(letter.colour[0])) + "," +
                          std::to_string(int(letter.colour[1])) + "," + std::to_string(int(letter.colour[2])) + "," +
                          std::to_string(letter.box.x) + "," + std::to_string(letter.box.y) + "," +
                          std::to_string(letter.box.width) + "," + std::to_string(letter.box.height));
    }
  }
  EXPECT_FALSE(std::getline(labels, line));
  EXPECT_FALSE(std::getline(letters, line));
  fs::remove_all(folder);
}

}  // namespace test_glyph_task
}  // namespace attnscope
