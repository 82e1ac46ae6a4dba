// Images in and out: decoding with OpenCV, timm's evaluation transform (PIL-exact bicubic),
// and conversion to the normalised input tensor a ViT expects.
#pragma once

#include <array>
#include <stdexcept>
#include <string>

#include <torch/types.h>
#include <opencv2/core.hpp>

namespace attnscope {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How an image of any size becomes the model's input size.
enum class ResizeMode {
  Timm,  // timm eval: shorter side to floor(size / crop_pct), bicubic, centre crop
  Fit,   // squash the whole image to the input size, bicubic
  None,  // the image must already have the input size
};

ResizeMode parse_resize_mode(const std::string& name);  // "timm" | "fit" | "none"
std::string to_string(ResizeMode mode);

struct Normalization {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // ImageNet defaults (timm/DeiT)
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// Pillow's decompression bomb guard (PIL.Image.MAX_IMAGE_PIXELS): the default of --max-pixels.
constexpr int64_t kDefaultMaxPixels = 89'478'485;
constexpr int64_t kLargestMaxPixels = int64_t(1) << 30;  // OpenCV's own limit

// Decodes any image OpenCV reads into 8-bit RGB (3 channels; gray and alpha are converted). The
// size in its header is checked against `max_pixels` before anything is decoded.
cv::Mat load_image_rgb(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);

// PIL's Image.resize(..., BICUBIC) on 8-bit RGB, bit-exact (antialiased when shrinking).
cv::Mat resize_bicubic_pil(const cv::Mat& rgb, int width, int height);

// The RGB image the model sees, before normalisation: [height x width] 8-bit RGB.
cv::Mat prepare_image(const cv::Mat& rgb, ResizeMode mode, int height, int width, double crop_pct = 0.875);

// 8-bit RGB [H x W] -> float tensor [1, 3, H, W], (x / 255 - mean) / std.
torch::Tensor image_to_tensor(const cv::Mat& rgb, const Normalization& norm = {});

}  // namespace attnscope
