// Images in: decoding (core/image_decode.h), timm's evaluation transform (PIL-exact bicubic or
// bilinear), the preprocessing a checkpoint declares and the options that override it, and
// conversion to the normalised input tensor a ViT expects.
#pragma once

#include "core/enum_names.h"
#include "core/rgb_image.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace attnscope {

// How an image of any size becomes the model's input size.
enum class ResizeMode {
  Auto,  // what the checkpoint declares (Hugging Face without a centre crop: Fit), else Timm
  Timm,  // timm eval: shorter side to floor(size / crop_pct), bicubic, centre crop
  Fit,   // squash the whole image to the input size, bicubic
  None,  // the image must already have the input size
};
template <>
struct EnumTable<ResizeMode> {
  static const std::vector<EnumEntry<ResizeMode>>& entries();
};

ResizeMode parse_resize_mode(const std::string& name);  // "auto" | "timm" | "fit" | "none"
std::string to_string(ResizeMode mode);

// The resampling filter of a resize, both Pillow-exact (antialiased when shrinking).
enum class Interpolation { Bicubic, Bilinear };
template <>
struct EnumTable<Interpolation> {
  static const std::vector<EnumEntry<Interpolation>>& entries();
};
Interpolation parse_interpolation(const std::string& name);  // "bicubic" | "bilinear"
std::string to_string(Interpolation interpolation);

// "0.5,0.5,0.5" -> {0.5, 0.5, 0.5}; throws std::invalid_argument naming `option`.
std::array<float, 3> parse_channel_values(const std::string& text, const std::string& option);

// The largest model input side in pixels (DINOv2's 518 and 1024-pixel fine-tunes fit easily).
constexpr int kMaxInputSide = 4096;

// An input resolution as --size gives it: the model's native one, or height x width pixels.
struct InputSize {
  int height = 0, width = 0;  // 0: native
  bool native() const { return height == 0; }
  // "native", "S" or "HxW", each side at most kMaxInputSide; throws std::invalid_argument naming --size.
  static InputSize parse(const std::string& text);
  std::string text() const;  // as parse takes it
  bool operator==(const InputSize& other) const { return height == other.height && width == other.width; }
};

// How an image becomes a model's input: the resize mode and the input size; the crop fraction,
// filter, mean and std as given (none: what the checkpoint declares, else timm's ImageNet defaults).
// Pillow's decompression bomb guard (PIL.Image.MAX_IMAGE_PIXELS): the default of --max-pixels.
constexpr int64_t kDefaultMaxPixels = 89'478'485;
constexpr int64_t kLargestMaxPixels = int64_t(1) << 30;  // OpenCV's own limit

// Why a frame of width x height may not be decoded under `max_pixels` ("" when it may): the one
// guard every decoded picture passes (images, video frames, folder and ablation images).
std::string pixel_budget_problem(int64_t width, int64_t height, int64_t max_pixels);

struct InputSettings {
  ResizeMode resize = ResizeMode::Auto;
  InputSize input_size;
  std::optional<double> crop;  // timm's crop_pct, in (0, 1]
  std::optional<Interpolation> interpolation;
  std::optional<std::array<float, 3>> mean, std;
  int64_t max_pixels = kDefaultMaxPixels;  // --max-pixels: every image this model reads is held to it
  bool operator==(const InputSettings& other) const;
};
std::string to_string(const InputSettings& input);  // every field, for cache keys
// "0.5,0.5,0.5": channel values as the options write them; empty for none.
std::string channel_values_text(const std::optional<std::array<float, 3>>& values);

// The input resolution for `size` given the model's native one and the multiple its sides must be;
// throws std::invalid_argument naming --size when they are not a multiple of it.
std::pair<int, int> resolve_input_size(const InputSize& size, int native_height, int native_width, int multiple);

struct Normalization {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // ImageNet defaults (timm/DeiT)
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// What a checkpoint says about its preprocessing (timm's pretrained_cfg, Hugging Face's
// preprocessor_config.json, CLIP's and DINOv2's constants); unset: it says nothing.
struct DeclaredPreprocessing {
  std::optional<ResizeMode> resize;
  std::optional<double> crop_pct;
  std::optional<Interpolation> interpolation;
  Normalization normalization;
  std::string normalization_source;  // empty: ImageNet's defaults
  std::string source;                // where resize, crop and interpolation come from
};

// The preprocessing a run uses: the options given, else the checkpoint's, else timm's defaults,
// each with where it came from ("--crop", "pretrained_cfg", "default").
struct Preprocessing {
  ResizeMode resize = ResizeMode::Timm;
  double crop_pct = 0.875;
  Interpolation interpolation = Interpolation::Bicubic;
  Normalization normalization;
  std::string resize_source, crop_source, interpolation_source, normalization_source;
};
Preprocessing resolve_preprocessing(const InputSettings& input, const DeclaredPreprocessing& declared);

// Decodes an image into 8-bit RGB (3 channels; gray and alpha are converted): any format OpenCV
// reads, PNG and JPEG in the engine-only build. The size in its header is checked against
// `max_pixels` before anything is decoded.
RgbImage load_image_rgb(const std::string& path, int64_t max_pixels);

// PIL's Image.resize(..., BICUBIC or BILINEAR) on 8-bit RGB, bit-exact (antialiased when shrinking).
RgbImage resize_pil(const RgbImage& rgb, int width, int height, Interpolation filter);
RgbImage resize_bicubic_pil(const RgbImage& rgb, int width, int height);

// The RGB image the model sees, before normalisation: [height x width] 8-bit RGB.
RgbImage prepare_image(const RgbImage& rgb, ResizeMode mode, int height, int width, double crop_pct = 0.875,
                       Interpolation filter = Interpolation::Bicubic);

// 8-bit RGB [H x W] -> float tensor [1, 3, H, W], (x / 255 - mean) / std.
torch::Tensor image_to_tensor(const RgbImage& rgb, const Normalization& norm = {});

// The images in a folder (not recursive), sorted by name: .png .jpg .jpeg .bmp .tif .tiff .webp
// (any case). Throws std::invalid_argument if the folder cannot be read.
std::vector<std::string> list_images(const std::string& folder);

}  // namespace attnscope
