// "Sign in clutter": a generated 10-class task (read the one digit, drawn on a plate, among capital
// letters and shapes on a textured background) for training small demo ViTs with known target geometry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>
#include <opencv2/core.hpp>

namespace attnscope {

// One distractor letter as drawn: what captions of the image (the bundled CLIP's training) name.
struct GlyphLetter {
  char letter = 'A';  // one of the distractor letters (capital)
  cv::Scalar colour;  // its ink, RGB 0..255
  cv::Rect box;       // every pixel it touches (a later letter may cover part of it)
};

struct GlyphSample {
  cv::Mat rgb;                       // CV_8UC3, RGB, size x size
  int label = 0;                     // the digit, 0..9
  cv::Rect box;                      // the target: the plate the digit is drawn on
  cv::Mat mask;                      // CV_8UC1, 255 on the target (its plate and digit), 0 elsewhere
  cv::Scalar plate_colour;           // RGB 0..255, light (each channel 215..255)
  std::vector<GlyphLetter> letters;  // in drawing order
};

struct GlyphTaskOptions {
  int size = 96;  // glyph sizes scale with it (digits 24-36 px and letters 12-22 px at 112)
  int min_distractors = 4;
  int max_distractors = 8;
};

// Deterministic in seed: the same seed gives the same bytes; consecutive seeds are uncorrelated.
GlyphSample make_glyph_sample(uint64_t seed, const GlyphTaskOptions& options = {});

// The same sample (identical bytes), plus where the clutter was drawn: clutter_mask is CV_8UC1,
// 255 wherever a distractor changed a pixel. For tests of the no-overlap guarantee.
GlyphSample make_glyph_sample(uint64_t seed, const GlyphTaskOptions& options, cv::Mat* clutter_mask);

// Samples first_seed .. first_seed + count - 1 as model input, generated in parallel.
struct GlyphBatch {
  torch::Tensor images;  // [B, 3, H, W] float32, (x / 255 - ImageNet mean) / ImageNet std
  torch::Tensor labels;  // [B] int64
  torch::Tensor masks;   // [B, 1, H, W] float32, 0 or 1
  std::vector<cv::Rect> boxes;
};

GlyphBatch make_glyph_batch(uint64_t first_seed, int count, const GlyphTaskOptions& options = {});

// Training uses seeds [0, kHeldOutSeedBase); held-out evaluation uses seeds from it upwards.
constexpr uint64_t kHeldOutSeedBase = 1'000'000'000'000ULL;

std::vector<std::string> glyph_class_names();  // "0".."9"

// Writes glyph_<seed>.png (default options) for count seeds plus labels.csv
// (seed,label,x,y,w,h) into folder, creating it if needed. For looking at the task.
void write_glyph_samples_png(const std::string& folder, int count, uint64_t first_seed);

// Writes the same samples as one images.npy (uint8 [count, H, W, 3], RGB), labels.csv as above, and
// letters.csv (seed,letter,r,g,b,x,y,w,h: every distractor letter, its ink and box), for training
// outside attnscope (scripts/train_demo_clip.py reads them with numpy alone).
void write_glyph_samples_npy(const std::string& folder, int count, uint64_t first_seed);

}  // namespace attnscope
