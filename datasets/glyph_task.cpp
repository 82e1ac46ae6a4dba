// "Sign in clutter" generator: textured background, letters and shapes as clutter, one digit on a
// plate as the target, all drawn from one seeded engine so a seed names a sample.
#include "datasets/glyph_task.h"
#include "core/cv_image.h"
#include "datasets/glyph_images.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/image.h"
#include "core/npy.h"

namespace attnscope {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kReferenceSize = 112;  // the size the pixel constants below are tuned for
// Glyph heights at the reference size. The target digit is larger and bolder than the letters
// around it: a ViT this small learns to read it in minutes only when it can find it easily.
constexpr double kMinTargetHeight = 24, kMaxTargetHeight = 36;
constexpr double kMinLetterHeight = 12, kMaxLetterHeight = 22;
constexpr int kPlatePadding = 3;          // plate pixels around the digit's footprint, at the reference size
constexpr double kMinGlyphContrast = 60;  // |luminance(colour) - mean background luminance|
constexpr double kMinShapeContrast = 40;
constexpr double kMaxBackgroundStd = 28;  // luminance std: texture stays quieter than glyphs
constexpr int kTargetMargin = 3;          // clear pixels kept between clutter and the target box

// Letters that a Hershey font draws like a digit (O/Q~0, I~1, Z~2, S~5, G~6, B~8) are left out:
// with them the task would have no single answer.
constexpr char kDistractorLetters[] = "ACEFHJKLMNPRTUVWXY";

// Script fonts are left out: their letters are hard to read at 12 px.
constexpr std::array<int, 6> kLetterFonts = {cv::FONT_HERSHEY_SIMPLEX, cv::FONT_HERSHEY_PLAIN,
                                             cv::FONT_HERSHEY_DUPLEX,  cv::FONT_HERSHEY_COMPLEX,
                                             cv::FONT_HERSHEY_TRIPLEX, cv::FONT_HERSHEY_COMPLEX_SMALL};
constexpr std::array<int, 2> kDigitFonts = {cv::FONT_HERSHEY_SIMPLEX, cv::FONT_HERSHEY_DUPLEX};

// Mixes the seed so that consecutive seeds start the engine in unrelated states.
uint64_t splitmix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(splitmix64(seed)) {}
  double uniform(double low, double high) { return std::uniform_real_distribution<double>(low, high)(engine_); }
  int integer(int low, int high) {  // inclusive
    return std::uniform_int_distribution<int>(low, high)(engine_);
  }
  bool chance(double probability) { return uniform(0, 1) < probability; }
  cv::Scalar colour() { return cv::Scalar(integer(0, 255), integer(0, 255), integer(0, 255)); }

 private:
  std::mt19937_64 engine_;
};

double luminance(const cv::Scalar& rgb) { return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]; }

// A random colour whose luminance differs from the background's mean under region by more
// than min_contrast, so that glyphs and clutter are equally visible.
cv::Scalar contrasting_colour(Random& random, const cv::Mat& background_luma, cv::Rect region, double min_contrast) {
  region &= cv::Rect(0, 0, background_luma.cols, background_luma.rows);
  const double local = region.empty() ? 128.0 : cv::mean(background_luma(region))[0];
  for (int attempt = 0; attempt < 64; ++attempt) {
    const cv::Scalar colour = random.colour();
    if (std::abs(luminance(colour) - local) > min_contrast) return colour;
  }
  return local < 128 ? cv::Scalar(255, 255, 255) : cv::Scalar(0, 0, 0);
}

// Smooth gradient, optional stripes/checker, low-frequency noise and blurred blobs, then the
// luminance spread is capped so the texture never outshouts the glyphs.
cv::Mat render_background(Random& random, int size) {
  const double unit = static_cast<double>(size) / kReferenceSize;
  cv::Mat field(size, size, CV_32FC3);

  const cv::Vec3f base(random.uniform(40, 215), random.uniform(40, 215), random.uniform(40, 215));
  const cv::Vec3f ramp(random.uniform(-70, 70), random.uniform(-70, 70), random.uniform(-70, 70));
  const double ramp_angle = random.uniform(0, 2 * kPi);

  enum class Pattern { None, Waves, Stripes, Checker };
  const Pattern pattern = random.chance(0.45) ? Pattern::None : static_cast<Pattern>(random.integer(1, 3));
  const double period = random.uniform(6, 28) * unit;
  const double pattern_angle = random.uniform(0, kPi);
  const double pattern_phase = random.uniform(0, 2 * kPi);
  const double pattern_amplitude = random.uniform(8, 26);
  cv::Vec3f pattern_tint(random.uniform(-1, 1), random.uniform(-1, 1), random.uniform(-1, 1));
  // Mostly a luminance pattern, with some colour in it.
  pattern_tint = pattern_tint * 0.5f + cv::Vec3f(1, 1, 1) * static_cast<float>(random.uniform(0.3, 1));

  const double ramp_cos = std::cos(ramp_angle), ramp_sin = std::sin(ramp_angle);
  const double wave = 2 * kPi / period;
  const double wave_cos = std::cos(pattern_angle) * wave, wave_sin = std::sin(pattern_angle) * wave;
  const double centre = (size - 1) / 2.0;
  // sin(a(x) + b(y)) from per-column and per-row tables: no transcendental per pixel.
  std::vector<double> across_sin(size), across_cos(size), across2_sin(size), across2_cos(size);
  std::vector<double> down_sin(size), down_cos(size), down2_sin(size), down2_cos(size);
  for (int i = 0; i < size; ++i) {
    const double offset = i - centre;
    across_sin[i] = std::sin(offset * wave_cos), across_cos[i] = std::cos(offset * wave_cos);
    across2_sin[i] = std::sin(-offset * wave_sin), across2_cos[i] = std::cos(-offset * wave_sin);
    down_sin[i] = std::sin(offset * wave_sin + pattern_phase);
    down_cos[i] = std::cos(offset * wave_sin + pattern_phase);
    down2_sin[i] = std::sin(offset * wave_cos + pattern_phase);
    down2_cos[i] = std::cos(offset * wave_cos + pattern_phase);
  }
  // A soft square wave: hard stripe edges would read as line segments.
  const auto soften = [](double level) { return 3 * level / std::sqrt(1 + 9 * level * level); };
  for (int y = 0; y < size; ++y) {
    cv::Vec3f* row = field.ptr<cv::Vec3f>(y);
    for (int x = 0; x < size; ++x) {
      const double dx = x - centre, dy = y - centre;
      const double along = (dx * ramp_cos + dy * ramp_sin) / size;  // about -0.7..0.7
      cv::Vec3f value = base + ramp * static_cast<float>(along);
      if (pattern != Pattern::None) {
        double level = across_sin[x] * down_cos[y] + across_cos[x] * down_sin[y];
        if (pattern != Pattern::Waves) level = soften(level);
        if (pattern == Pattern::Checker) level *= soften(across2_sin[x] * down2_cos[y] + across2_cos[x] * down2_sin[y]);
        value += pattern_tint * static_cast<float>(pattern_amplitude * level);
      }
      row[x] = value;
    }
  }

  if (random.chance(0.7)) {
    // Low-frequency noise: a few random values per side, upsampled smoothly.
    const int cells = random.integer(2, 6);
    const double amplitude = random.uniform(10, 30);
    const double tint = random.uniform(0, 0.6);
    cv::Mat coarse(cells, cells, CV_32FC3);
    for (int y = 0; y < cells; ++y)
      for (int x = 0; x < cells; ++x) {
        const double shared = random.uniform(-1, 1);
        cv::Vec3f& cell = coarse.at<cv::Vec3f>(y, x);
        for (int channel = 0; channel < 3; ++channel)
          cell[channel] = static_cast<float>(amplitude * ((1 - tint) * shared + tint * random.uniform(-1, 1)));
      }
    cv::Mat noise;
    cv::resize(coarse, noise, field.size(), 0, 0, cv::INTER_CUBIC);
    field += noise;
  }

  if (random.chance(0.6)) {
    // Blobs are low-frequency, so they are drawn and blurred at a quarter of the resolution.
    const int small = std::max(8, size / 4);
    const double small_unit = static_cast<double>(small) / kReferenceSize;
    cv::Mat paint(small, small, CV_32FC3, cv::Scalar::all(0));
    cv::Mat coverage(small, small, CV_32FC1, cv::Scalar::all(0));
    const int blobs = random.integer(1, 4);
    for (int blob = 0; blob < blobs; ++blob) {
      const cv::Point middle(random.integer(0, small - 1), random.integer(0, small - 1));
      const cv::Size axes(std::max(1, static_cast<int>(random.uniform(6, 28) * small_unit)),
                          std::max(1, static_cast<int>(random.uniform(6, 28) * small_unit)));
      const double angle = random.uniform(0, 180);
      const cv::Scalar colour(base[0] + random.uniform(-70, 70), base[1] + random.uniform(-70, 70),
                              base[2] + random.uniform(-70, 70));
      cv::ellipse(paint, middle, axes, angle, 0, 360, colour, cv::FILLED);
      cv::ellipse(coverage, middle, axes, angle, 0, 360, cv::Scalar(1), cv::FILLED);
    }
    const double sigma = random.uniform(1.0, 2.5) * small / 28.0;
    const double opacity = random.uniform(0.3, 0.7);
    cv::GaussianBlur(paint, paint, cv::Size(), sigma);  // stays premultiplied by coverage
    cv::GaussianBlur(coverage, coverage, cv::Size(), sigma);
    cv::resize(paint, paint, field.size(), 0, 0, cv::INTER_LINEAR);
    cv::resize(coverage, coverage, field.size(), 0, 0, cv::INTER_LINEAR);
    for (int y = 0; y < size; ++y) {
      cv::Vec3f* row = field.ptr<cv::Vec3f>(y);
      const cv::Vec3f* paint_row = paint.ptr<cv::Vec3f>(y);
      const float* coverage_row = coverage.ptr<float>(y);
      for (int x = 0; x < size; ++x) {
        const float alpha = static_cast<float>(opacity) * coverage_row[x];
        row[x] = row[x] * (1 - alpha) + paint_row[x] * static_cast<float>(opacity);
      }
    }
  }

  cv::Mat luma;
  cv::transform(field, luma, cv::Matx13f(0.299f, 0.587f, 0.114f));
  cv::Scalar luma_mean, luma_std;
  cv::meanStdDev(luma, luma_mean, luma_std);
  const cv::Scalar field_mean = cv::mean(field);
  // Pull the overall mean into range too, so that contrasting colours exist on both sides.
  const double target_mean = std::clamp(luma_mean[0], 50.0, 205.0);
  const double squeeze = std::min(1.0, kMaxBackgroundStd / std::max(luma_std[0], 1e-6));
  const double shift = target_mean - luma_mean[0];
  cv::Mat image(size, size, CV_8UC3);
  for (int y = 0; y < size; ++y) {
    const cv::Vec3f* row = field.ptr<cv::Vec3f>(y);
    cv::Vec3b* out = image.ptr<cv::Vec3b>(y);
    for (int x = 0; x < size; ++x)
      for (int channel = 0; channel < 3; ++channel)
        out[x][channel] =
            cv::saturate_cast<uint8_t>(field_mean[channel] + shift + squeeze * (row[x][channel] - field_mean[channel]));
  }
  return image;
}

// A text glyph: what putText needs, plus the exact footprint relative to the origin.
struct TextGlyph {
  std::string text;
  int font = 0;
  double scale = 1;
  int thickness = 1;
  cv::Rect footprint;  // every pixel putText touches, relative to the origin
};

// How a text glyph is drawn: fonts, height range (reference pixels), stroke widths, slant.
struct GlyphStyle {
  const int* fonts = nullptr;
  int font_count = 0;
  double min_height = 0, max_height = 0;
  int min_thickness = 1, max_thickness = 1;  // at the reference size; capped by height
  double italic_chance = 0;
};

const GlyphStyle kTargetStyle{
    kDigitFonts.data(), static_cast<int>(kDigitFonts.size()), kMinTargetHeight, kMaxTargetHeight, 2, 3, 0.0};
const GlyphStyle kLetterStyle{
    kLetterFonts.data(), static_cast<int>(kLetterFonts.size()), kMinLetterHeight, kMaxLetterHeight, 1, 2, 0.25};

TextGlyph random_text_glyph(Random& random, std::string text, int size, const GlyphStyle& style) {
  const double unit = static_cast<double>(size) / kReferenceSize;
  TextGlyph glyph;
  glyph.text = std::move(text);
  glyph.font = style.fonts[random.integer(0, style.font_count - 1)];
  if (random.chance(style.italic_chance)) glyph.font |= cv::FONT_ITALIC;
  const double height = random.uniform(style.min_height, style.max_height) * unit;
  int baseline = 0;
  const double unit_height = cv::getTextSize(glyph.text, glyph.font, 1.0, 1, &baseline).height;
  glyph.scale = height / unit_height;
  // Thick strokes would close the holes of small glyphs (8, 0, 6): cap thickness by height.
  const int height_cap = std::max(1, static_cast<int>(height / (8 * unit)));
  const int max_thickness =
      std::max(1, std::min(static_cast<int>(std::lround(style.max_thickness * unit)), height_cap));
  const int min_thickness = std::clamp(static_cast<int>(std::lround(style.min_thickness * unit)), 1, max_thickness);
  glyph.thickness = random.integer(min_thickness, max_thickness);

  // Measure by drawing: getTextSize omits the stroke width and the italic slant.
  const cv::Size text_size = cv::getTextSize(glyph.text, glyph.font, glyph.scale, glyph.thickness, &baseline);
  const int pad = glyph.thickness + text_size.height;
  cv::Mat canvas(text_size.height + baseline + 2 * pad, text_size.width + 2 * pad, CV_8UC1, cv::Scalar(0));
  const cv::Point origin(pad, pad + text_size.height);
  cv::putText(canvas, glyph.text, origin, glyph.font, glyph.scale, cv::Scalar(255), glyph.thickness, cv::LINE_AA);
  glyph.footprint = cv::boundingRect(canvas) - origin;
  return glyph;
}

// An origin that puts the glyph's footprint, grown by margin on every side, fully inside a
// size x size image.
cv::Point random_origin(Random& random, const TextGlyph& glyph, int size, int margin = 0) {
  const int x = random.integer(margin, std::max(margin, size - margin - glyph.footprint.width));
  const int y = random.integer(margin, std::max(margin, size - margin - glyph.footprint.height));
  return cv::Point(x - glyph.footprint.x, y - glyph.footprint.y);
}

// One piece of clutter, fully decided before drawing so it can be drawn twice identically.
struct Distractor {
  enum class Kind { Letter, Line, Circle, Box } kind = Kind::Letter;
  TextGlyph letter;
  cv::Point origin;                 // letter
  std::array<cv::Point, 4> points;  // line: [0], [1]; box: all four corners
  cv::Point centre;                 // circle
  int radius = 0;
  int thickness = 1;
  cv::Scalar colour;

  void draw(cv::Mat& image, const cv::Scalar& ink) const {
    switch (kind) {
      case Kind::Letter:
        cv::putText(image, letter.text, origin, letter.font, letter.scale, ink, letter.thickness, cv::LINE_AA);
        break;
      case Kind::Line:
        cv::line(image, points[0], points[1], ink, thickness, cv::LINE_AA);
        break;
      case Kind::Circle:
        cv::circle(image, centre, radius, ink, thickness, cv::LINE_AA);
        break;
      case Kind::Box: {
        const cv::Point* corners = points.data();
        const int corner_count = 4;
        cv::polylines(image, &corners, &corner_count, 1, true, ink, thickness, cv::LINE_AA);
        break;
      }
    }
  }
};

// A shape or letter placed clear of keep_out (the target box plus margin), or false after too
// many tries. Letters also try to stay clear of each other so they remain readable as letters.
bool place_distractor(Random& random, int size, const cv::Mat& background_luma, const cv::Rect& keep_out,
                      const std::vector<cv::Rect>& letter_boxes, bool as_letter, Distractor& out) {
  const double unit = static_cast<double>(size) / kReferenceSize;
  const cv::Rect image_rect(0, 0, size, size);
  for (int attempt = 0; attempt < 40; ++attempt) {
    Distractor candidate;
    cv::Rect extent;  // the pixels it may touch
    double min_contrast = kMinShapeContrast;
    if (as_letter) {
      candidate.kind = Distractor::Kind::Letter;
      const int letter_count = static_cast<int>(sizeof(kDistractorLetters)) - 1;
      candidate.letter = random_text_glyph(
          random, std::string(1, kDistractorLetters[random.integer(0, letter_count - 1)]), size, kLetterStyle);
      candidate.origin = random_origin(random, candidate.letter, size);
      extent = candidate.letter.footprint + candidate.origin;
      min_contrast = kMinGlyphContrast;
      if ((extent & keep_out).area() > 0) continue;
      const bool crowded =
          attempt < 20 && std::any_of(letter_boxes.begin(), letter_boxes.end(),
                                      [&](const cv::Rect& other) { return (other & extent).area() > 0; });
      if (crowded) continue;
    } else {
      candidate.thickness = random.integer(1, 3);
      const int reach = candidate.thickness;  // an anti-aliased stroke's half-width, rounded up
      const int kind = random.integer(0, 2);
      // A centre that keeps a shape reaching half_extent from it inside the image: a line or
      // box cut short by the border could pass for a "1", "7" or "L".
      const auto centre_inside = [&](cv::Point2d half_extent) {
        const double reach_x = std::min(std::abs(half_extent.x), size / 2.0 - 1);
        const double reach_y = std::min(std::abs(half_extent.y), size / 2.0 - 1);
        return cv::Point2d(random.uniform(reach_x, size - 1 - reach_x), random.uniform(reach_y, size - 1 - reach_y));
      };
      if (kind == 0) {
        // Long enough never to pass for a "1".
        candidate.kind = Distractor::Kind::Line;
        const double length = random.uniform(35, 70) * unit;
        const double angle = random.uniform(0, kPi);
        const cv::Point2d half(std::cos(angle) * length / 2, std::sin(angle) * length / 2);
        const cv::Point2d middle = centre_inside(half);
        candidate.points[0] = cv::Point(cvRound(middle.x - half.x), cvRound(middle.y - half.y));
        candidate.points[1] = cv::Point(cvRound(middle.x + half.x), cvRound(middle.y + half.y));
        cv::Point clip_start = candidate.points[0], clip_end = candidate.points[1];
        const cv::Rect grown(keep_out.x - reach, keep_out.y - reach, keep_out.width + 2 * reach,
                             keep_out.height + 2 * reach);
        if (cv::clipLine(grown, clip_start, clip_end)) continue;
        extent = cv::boundingRect(std::vector<cv::Point>{candidate.points[0], candidate.points[1]});
      } else if (kind == 1) {
        // Wider than any "0" (digits are narrower than tall). Circles may be cut by the
        // border: an arc reads as clutter, not as a digit.
        candidate.kind = Distractor::Kind::Circle;
        candidate.radius = cvRound(random.uniform(13, 26) * unit);
        candidate.centre = cv::Point(random.integer(0, size - 1), random.integer(0, size - 1));
        extent = cv::Rect(candidate.centre.x - candidate.radius, candidate.centre.y - candidate.radius,
                          2 * candidate.radius + 1, 2 * candidate.radius + 1);
      } else {
        candidate.kind = Distractor::Kind::Box;
        // Big and near-square: a narrow box with thick, anti-aliased corners reads as a "0".
        const double side = random.uniform(22, 48) * unit;
        const cv::Size2f sides(static_cast<float>(side), static_cast<float>(side * random.uniform(0.8, 1.25)));
        const float angle = static_cast<float>(random.chance(0.5) ? 0.0 : random.uniform(0, 90));
        const cv::Rect2f bounds = cv::RotatedRect(cv::Point2f(0, 0), sides, angle).boundingRect2f();
        const cv::Point2d middle = centre_inside(cv::Point2d(bounds.width / 2, bounds.height / 2));
        cv::Point2f corners[4];
        cv::RotatedRect(cv::Point2f(static_cast<float>(middle.x), static_cast<float>(middle.y)), sides, angle)
            .points(corners);
        for (int corner = 0; corner < 4; ++corner)
          candidate.points[corner] = cv::Point(cvRound(corners[corner].x), cvRound(corners[corner].y));
        extent = cv::boundingRect(std::vector<cv::Point>(candidate.points.begin(), candidate.points.end()));
      }
      extent = cv::Rect(extent.x - reach, extent.y - reach, extent.width + 2 * reach, extent.height + 2 * reach);
      // Circles and boxes are tested by their bounding box: conservative, and it also keeps
      // them from framing the target, which would point at it.
      if (candidate.kind != Distractor::Kind::Line && (extent & keep_out).area() > 0) continue;
    }
    candidate.colour = contrasting_colour(random, background_luma, extent & image_rect, min_contrast);
    out = candidate;
    return true;
  }
  return false;
}

void validate(const GlyphTaskOptions& options) {
  if (options.size < 56)
    throw std::invalid_argument("glyph task: size must be at least 56, got " + std::to_string(options.size));
  if (options.min_distractors < 0 || options.max_distractors < options.min_distractors)
    throw std::invalid_argument("glyph task: need 0 <= min_distractors <= max_distractors");
}

}  // namespace

GlyphSample make_glyph_sample(uint64_t seed, const GlyphTaskOptions& options, cv::Mat* clutter_mask) {
  validate(options);
  const int size = options.size;
  Random random(seed);

  GlyphSample sample;
  sample.label = random.integer(0, 9);
  sample.rgb = render_background(random, size);
  cv::Mat background_luma;
  cv::cvtColor(sample.rgb, background_luma, cv::COLOR_RGB2GRAY);

  const double unit = static_cast<double>(size) / kReferenceSize;
  const int plate_padding = std::max(1, static_cast<int>(std::lround(kPlatePadding * unit)));
  const TextGlyph target = random_text_glyph(random, std::to_string(sample.label), size, kTargetStyle);
  const cv::Point target_origin = random_origin(random, target, size, plate_padding);
  const cv::Rect plate = target.footprint + target_origin;
  sample.box = cv::Rect(plate.x - plate_padding, plate.y - plate_padding, plate.width + 2 * plate_padding,
                        plate.height + 2 * plate_padding) &
               cv::Rect(0, 0, size, size);
  // A light plate with black ink, like a printed sign: one polarity keeps reading the digit a
  // small problem, so that a small ViT learns the task in minutes; the plate's tint varies.
  const cv::Scalar plate_colour(random.integer(215, 255), random.integer(215, 255), random.integer(215, 255));
  const cv::Scalar ink(0, 0, 0);

  const cv::Rect keep_out(sample.box.x - kTargetMargin, sample.box.y - kTargetMargin,
                          sample.box.width + 2 * kTargetMargin, sample.box.height + 2 * kTargetMargin);
  const int distractor_count = random.integer(options.min_distractors, options.max_distractors);
  // Mostly letters: they are what makes finding the digit a search rather than a lookup.
  const int shape_count = random.integer(0, distractor_count / 2);
  std::vector<Distractor> distractors;
  std::vector<cv::Rect> letter_boxes;
  for (int index = 0; index < distractor_count; ++index) {
    Distractor distractor;
    const bool as_letter = index >= shape_count;
    if (!place_distractor(random, size, background_luma, keep_out, letter_boxes, as_letter, distractor)) continue;
    if (as_letter) letter_boxes.push_back(distractor.letter.footprint + distractor.origin);
    distractors.push_back(distractor);
  }

  // Shapes first, so letters sit on top of lines like the target does.
  for (const Distractor& distractor : distractors) {
    distractor.draw(sample.rgb, distractor.colour);
    if (distractor.kind == Distractor::Kind::Letter)
      sample.letters.push_back({distractor.letter.text[0], distractor.colour,
                                (distractor.letter.footprint + distractor.origin) & cv::Rect(0, 0, size, size)});
  }
  sample.plate_colour = plate_colour;
  cv::rectangle(sample.rgb, sample.box, plate_colour, cv::FILLED);
  cv::putText(sample.rgb, target.text, target_origin, target.font, target.scale, ink, target.thickness, cv::LINE_AA);
  sample.mask = cv::Mat::zeros(size, size, CV_8UC1);
  sample.mask(sample.box).setTo(255);  // the object is the whole sign: plate and digit

  if (clutter_mask) {
    clutter_mask->create(size, size, CV_8UC1);
    clutter_mask->setTo(0);
    for (const Distractor& distractor : distractors) distractor.draw(*clutter_mask, cv::Scalar(255));
  }
  return sample;
}

GlyphSample make_glyph_sample(uint64_t seed, const GlyphTaskOptions& options) {
  return make_glyph_sample(seed, options, nullptr);
}

GlyphBatch make_glyph_batch(uint64_t first_seed, int count, const GlyphTaskOptions& options) {
  validate(options);
  if (count < 0) throw std::invalid_argument("glyph task: negative batch size");
  const int size = options.size;
  GlyphBatch batch;
  batch.images = torch::empty({count, 3, size, size}, torch::kFloat32);
  batch.labels = torch::empty({count}, torch::kInt64);
  batch.masks = torch::empty({count, 1, size, size}, torch::kFloat32);
  batch.boxes.resize(count);
  float* images = batch.images.data_ptr<float>();
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  float* masks = batch.masks.data_ptr<float>();
  const size_t plane = static_cast<size_t>(size) * size;
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      const GlyphSample sample = make_glyph_sample(first_seed + index, options);
      const torch::Tensor image = image_to_tensor(to_rgb_image(sample.rgb)).contiguous();
      std::copy_n(image.data_ptr<float>(), 3 * plane, images + index * 3 * plane);
      float* mask = masks + index * plane;
      for (int y = 0; y < size; ++y) {
        const uint8_t* row = sample.mask.ptr<uint8_t>(y);
        for (int x = 0; x < size; ++x) mask[y * size + x] = row[x] ? 1.0f : 0.0f;
      }
      labels[index] = sample.label;
      batch.boxes[index] = sample.box;
    }
  });
  return batch;
}

std::vector<std::string> glyph_class_names() {
  std::vector<std::string> names;
  for (int digit = 0; digit < 10; ++digit) names.push_back(std::to_string(digit));
  return names;
}

namespace {

// labels.csv (and with `letters`, letters.csv) for the samples, in seed order.
void write_glyph_tables(const std::string& folder, const std::vector<GlyphSample>& samples, uint64_t first_seed,
                        bool letters) {
  std::ofstream labels(folder + "/labels.csv");
  if (!labels) throw std::runtime_error("cannot write " + folder + "/labels.csv");
  labels << "seed,label,x,y,w,h\n";
  for (size_t index = 0; index < samples.size(); ++index) {
    const GlyphSample& sample = samples[index];
    labels << first_seed + index << ',' << sample.label << ',' << sample.box.x << ',' << sample.box.y << ','
           << sample.box.width << ',' << sample.box.height << '\n';
  }
  if (!labels) throw std::runtime_error("error writing " + folder + "/labels.csv");
  if (!letters) return;
  std::ofstream table(folder + "/letters.csv");
  if (!table) throw std::runtime_error("cannot write " + folder + "/letters.csv");
  table << "seed,letter,r,g,b,x,y,w,h\n";
  for (size_t index = 0; index < samples.size(); ++index)
    for (const GlyphLetter& letter : samples[index].letters)
      table << first_seed + index << ',' << letter.letter << ',' << int(letter.colour[0]) << ','
            << int(letter.colour[1]) << ',' << int(letter.colour[2]) << ',' << letter.box.x << ',' << letter.box.y
            << ',' << letter.box.width << ',' << letter.box.height << '\n';
  if (!table) throw std::runtime_error("error writing " + folder + "/letters.csv");
}

}  // namespace

void write_glyph_samples_png(const std::string& folder, int count, uint64_t first_seed) {
  std::filesystem::create_directories(folder);
  std::vector<GlyphSample> samples;
  for (int index = 0; index < count; ++index) {
    const uint64_t seed = first_seed + index;
    GlyphSample sample = make_glyph_sample(seed);
    cv::Mat bgr;
    cv::cvtColor(sample.rgb, bgr, cv::COLOR_RGB2BGR);
    const std::string path = folder + "/glyph_" + std::to_string(seed) + ".png";
    if (!cv::imwrite(path, bgr)) throw std::runtime_error("cannot write " + path);
    sample.rgb.release();
    sample.mask.release();
    samples.push_back(std::move(sample));
  }
  write_glyph_tables(folder, samples, first_seed, false);
}

void write_glyph_samples_npy(const std::string& folder, int count, uint64_t first_seed) {
  if (count < 1) throw std::invalid_argument("glyph task: count must be positive");
  std::filesystem::create_directories(folder);
  const int size = GlyphTaskOptions{}.size;
  torch::Tensor images = torch::empty({count, size, size, 3}, torch::kUInt8);
  uint8_t* pixels = images.data_ptr<uint8_t>();
  const size_t image_bytes = size_t(size) * size * 3;
  std::vector<GlyphSample> samples(count);
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      GlyphSample sample = make_glyph_sample(first_seed + uint64_t(index));
      for (int y = 0; y < size; ++y)
        std::copy_n(sample.rgb.ptr<uint8_t>(y), size * 3, pixels + index * image_bytes + y * size * 3);
      sample.rgb.release();
      sample.mask.release();
      samples[index] = std::move(sample);
    }
  });
  write_npy(folder + "/images.npy", images);
  write_glyph_tables(folder, samples, first_seed, true);
}

GlyphImages glyph_sample_images(uint64_t seed) {
  const GlyphSample sample = make_glyph_sample(seed);
  cv::Mat mask_rgb;
  cv::cvtColor(sample.mask, mask_rgb, cv::COLOR_GRAY2RGB);
  return {to_rgb_image(sample.rgb), to_rgb_image(mask_rgb)};
}

}  // namespace attnscope
