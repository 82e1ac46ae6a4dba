// Image loading, Pillow-exact bicubic resampling, timm's eval transform and tensor conversion.
// Resampling follows Pillow's libImaging/Resample.c step for step: attention maps are compared
// with Python runs, so the model must see the very bytes PIL would have given it.
#include "core/image.h"
#include "core/excerpt.h"
#include "core/image_decode.h"
#include "core/image_header.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace attnscope {
namespace {

// ---------------------------------------------------------------------------------------------
// Pillow's resampler (ImagingResample with the BICUBIC filter, 8 bits per channel).

constexpr double kBicubicSupport = 2.0;   // the kernel is zero beyond |x| = 2
constexpr double kBilinearSupport = 1.0;  // the triangle is zero beyond |x| = 1
// Pillow's fixed point: 8 bits of result, 2 bits of headroom for the kernel's negative lobes.
constexpr int kPrecisionBits = 32 - 8 - 2;

// Keys' cubic convolution kernel with a = -0.5, written exactly as Pillow evaluates it.
double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Pillow's bilinear filter: a triangle.
double bilinear_kernel(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// For each output position along one axis: the input window and its fixed-point weights.
struct AxisWeights {
  int taps = 0;                  // stride between positions in `weights`
  std::vector<int> first;        // first input index of the window
  std::vector<int> count;        // number of inputs in the window
  std::vector<int32_t> weights;  // count[i] weights at i * taps, each scaled by 2^kPrecisionBits
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the full-image box [0, in_size].
// When shrinking, the kernel is stretched by the scale factor, which is the antialiasing.
AxisWeights compute_axis_weights(int in_size, int out_size, Interpolation filter) {
  const bool bilinear = filter == Interpolation::Bilinear;
  // Pillow passes the box as float; (float)in_size is exact for any realistic image size.
  const float box_begin = 0.0f, box_end = static_cast<float>(in_size);
  const double scale = static_cast<double>(box_end - box_begin) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = (bilinear ? kBilinearSupport : kBicubicSupport) * filter_scale;

  AxisWeights axis;
  axis.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  axis.first.resize(out_size);
  axis.count.resize(out_size);
  axis.weights.assign(static_cast<size_t>(out_size) * axis.taps, 0);
  std::vector<double> weights(axis.taps);
  for (int out = 0; out < out_size; ++out) {
    const double center = box_begin + (out + 0.5) * scale;
    const double inverse_scale = 1.0 / filter_scale;
    // Truncating casts round here because the operands are shifted by +0.5, as in Pillow.
    const int begin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int end = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int count = end - begin;
    double total = 0.0;
    for (int i = 0; i < count; ++i) {
      const double x = (i + begin - center + 0.5) * inverse_scale;
      weights[i] = bilinear ? bilinear_kernel(x) : bicubic_kernel(x);
      total += weights[i];
    }
    int32_t* fixed = &axis.weights[static_cast<size_t>(out) * axis.taps];
    for (int i = 0; i < count; ++i) {
      const double w = total != 0.0 ? weights[i] / total : weights[i];
      // Round half away from zero, in Pillow's exact expression order.
      fixed[i] = w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                       : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    axis.first[out] = begin;
    axis.count[out] = count;
  }
  return axis;
}

// Pillow's clip8: drop the fraction bits (arithmetic shift), then saturate.
inline uint8_t clip8(int32_t accumulator) {
  const int32_t value = accumulator >> kPrecisionBits;
  return static_cast<uint8_t>(value < 0 ? 0 : (value > 255 ? 255 : value));
}

constexpr int32_t kRoundingBias = 1 << (kPrecisionBits - 1);

// Horizontal pass over source rows [row_begin, row_end) of an 8-bit 3-channel image.
RgbImage resample_horizontal(const RgbImage& src, int row_begin, int row_end, const AxisWeights& axis, int out_width) {
  RgbImage dst(row_end - row_begin, out_width);
  at::parallel_for(row_begin, row_end, 16, [&](int64_t rows_begin, int64_t rows_end) {
    for (int y = int(rows_begin); y < int(rows_end); ++y) {
      const uint8_t* in = src.row(y);
      uint8_t* out = dst.row(y - row_begin);
      for (int x = 0; x < out_width; ++x) {
        const int32_t* k = &axis.weights[static_cast<size_t>(x) * axis.taps];
        const uint8_t* window = in + 3 * axis.first[x];
        int32_t red = kRoundingBias, green = kRoundingBias, blue = kRoundingBias;
        for (int i = 0; i < axis.count[x]; ++i) {
          red += window[3 * i + 0] * k[i];
          green += window[3 * i + 1] * k[i];
          blue += window[3 * i + 2] * k[i];
        }
        out[3 * x + 0] = clip8(red);
        out[3 * x + 1] = clip8(green);
        out[3 * x + 2] = clip8(blue);
      }
    }
  });
  return dst;
}

// Vertical pass; `row_offset` is the source row that `src` starts at (see resize_bicubic_pil).
// Integer sums do not depend on the order of accumulation, so rows are walked in turn.
RgbImage resample_vertical(const RgbImage& src, int row_offset, const AxisWeights& axis, int out_height) {
  RgbImage dst(out_height, src.cols);
  const int values_per_row = src.cols * 3;
  at::parallel_for(0, out_height, 16, [&](int64_t rows_begin, int64_t rows_end) {
    std::vector<int32_t> sums(values_per_row);
    for (int y = int(rows_begin); y < int(rows_end); ++y) {
      const int32_t* k = &axis.weights[static_cast<size_t>(y) * axis.taps];
      std::fill(sums.begin(), sums.end(), kRoundingBias);
      for (int i = 0; i < axis.count[y]; ++i) {
        const uint8_t* in = src.row(axis.first[y] - row_offset + i);
        for (int v = 0; v < values_per_row; ++v) sums[v] += in[v] * k[i];
      }
      uint8_t* out = dst.row(y);
      for (int v = 0; v < values_per_row; ++v) out[v] = clip8(sums[v]);
    }
  });
  return dst;
}

void require_pixels(const RgbImage& rgb, const char* function) {
  if (rgb.empty())
    throw ImageError(std::string(function) + " needs a non-empty image, got " + std::to_string(rgb.cols) + "x" +
                     std::to_string(rgb.rows));
}

// ---------------------------------------------------------------------------------------------
// torchvision's CenterCrop and timm's eval transform.

// Python's int(round(diff / 2.0)) for diff >= 0: halves round to even.
int python_round_half(int diff) {
  int half = diff / 2;
  if (diff % 2 == 1 && half % 2 == 1) ++half;
  return half;
}

// torchvision CenterCrop: zero-pads a too-small image first, then crops around the centre.
RgbImage center_crop(const RgbImage& image, int crop_height, int crop_width) {
  RgbImage source = image;
  if (crop_width > source.cols || crop_height > source.rows) {
    const int pad_x = std::max(crop_width - source.cols, 0);
    const int pad_y = std::max(crop_height - source.rows, 0);
    source = RgbImage(image.rows + pad_y, image.cols + pad_x);  // black border
    for (int y = 0; y < image.rows; ++y)
      std::memcpy(source.row(pad_y / 2 + y) + size_t(pad_x / 2) * 3, image.row(y), image.row_bytes());
  }
  const int top = python_round_half(source.rows - crop_height);
  const int left = python_round_half(source.cols - crop_width);
  return source.crop(top, left, crop_height, crop_width);
}

// timm transforms_imagenet_eval: Resize(scale_size, bicubic) then CenterCrop(img_size).
RgbImage timm_eval_transform(const RgbImage& rgb, int height, int width, double crop_pct, Interpolation filter) {
  int resized_height = 0, resized_width = 0;
  if (height == width) {
    // Resize(int): the shorter side becomes floor(size / crop_pct), the longer one keeps the
    // aspect ratio truncated, as torchvision's _compute_resized_output_size does it.
    const int64_t short_target = static_cast<int64_t>(std::floor(height / crop_pct));
    const int64_t short_side = std::min(rgb.rows, rgb.cols);
    const int64_t long_side = std::max(rgb.rows, rgb.cols);
    const auto long_target =
        static_cast<int64_t>(static_cast<double>(short_target * long_side) / static_cast<double>(short_side));
    const bool portrait = rgb.cols <= rgb.rows;
    resized_width = static_cast<int>(portrait ? short_target : long_target);
    resized_height = static_cast<int>(portrait ? long_target : short_target);
  } else {
    // timm: scale_size = tuple(int(x / crop_pct) for x in img_size), an exact (h, w) resize.
    resized_height = static_cast<int>(height / crop_pct);
    resized_width = static_cast<int>(width / crop_pct);
  }
  if (resized_height <= 0 || resized_width <= 0) {
    throw ImageError("timm resize of a " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                     " image gives an empty image");
  }
  // A long thin image (100000 x 1) would be scaled to millions of pixels per row before the crop.
  if (int64_t(resized_height) * resized_width > (int64_t(1) << 26))
    throw ImageError("timm resize of a " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                     " image would need " + std::to_string(resized_width) + "x" + std::to_string(resized_height) +
                     " pixels: the aspect ratio is too extreme; crop the image or use --resize fit");
  return center_crop(resize_pil(rgb, resized_width, resized_height, filter), height, width);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const std::vector<EnumEntry<ResizeMode>>& EnumTable<ResizeMode>::entries() {
  static const std::vector<EnumEntry<ResizeMode>> table = {
      {ResizeMode::Auto, "auto"}, {ResizeMode::Timm, "timm"}, {ResizeMode::Fit, "fit"}, {ResizeMode::None, "none"}};
  return table;
}

ResizeMode parse_resize_mode(const std::string& name) { return parse_enum_named<ResizeMode>("resize mode", name); }

std::string to_string(ResizeMode mode) { return enum_name(mode); }

std::string pixel_budget_problem(int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0 || width <= max_pixels / height) return "";
  return std::to_string(width) + "x" + std::to_string(height) + " pixels, more than --max-pixels " +
         std::to_string(max_pixels) +
         " (a guard against decompression bombs, as in Pillow); raise --max-pixels if you trust the file";
}

RgbImage load_image_rgb(const std::string& path, int64_t max_pixels) {
  auto cannot_read = [&path](const std::string& reason) {
    return ImageError("cannot read image " + path + ": " + reason);
  };
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw cannot_read("No such file or directory");
  }
  if (error) throw cannot_read(error.message());
  if (std::filesystem::is_directory(status)) throw cannot_read("is a directory");
  // A FIFO or device would block the decoder forever.
  if (!std::filesystem::is_regular_file(status)) throw cannot_read("not a regular file (a pipe, socket or device)");
  {
    // A decoder names few failures well; probe first to name the real reason.
    errno = 0;
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw cannot_read(errno != 0 ? std::strerror(errno) : "cannot open the file");
    if (probe.peek() == std::ifstream::traits_type::eof()) throw cannot_read("the file is empty");
  }
  // A 200-byte PNG can declare 30000 x 30000 pixels: the header decides before the decoder runs.
  ImageHeader header;
  try {
    header = read_image_header(path);
  } catch (const std::runtime_error& e) {
    throw cannot_read(e.what());
  }
  if (const std::string problem = pixel_budget_problem(header.width, header.height, max_pixels); !problem.empty())
    throw cannot_read("a " + header.format + " of " + problem);

  if (header.format == "JPEG" && jpeg_ends_early(path))
    throw cannot_read(
        "a truncated JPEG: its data ends before the end-of-image marker, so the last rows would be gray (PIL "
        "refuses it too: 'image file is truncated'); download or save it again");
  if (header.format == "PNG")
    if (const std::string problem = png_chunk_problem(path); !problem.empty()) throw cannot_read(problem);
  try {
    return decode_image_pixels(path, header);
  } catch (const ImageError& e) {
    throw cannot_read(e.what());
  }
}

const std::vector<EnumEntry<Interpolation>>& EnumTable<Interpolation>::entries() {
  static const std::vector<EnumEntry<Interpolation>> table = {{Interpolation::Bicubic, "bicubic"},
                                                              {Interpolation::Bilinear, "bilinear"}};
  return table;
}

Interpolation parse_interpolation(const std::string& name) {
  return parse_enum_named<Interpolation>("interpolation", name);
}

std::string to_string(Interpolation interpolation) { return enum_name(interpolation); }

std::array<float, 3> parse_channel_values(const std::string& text, const std::string& option) {
  std::array<float, 3> values{};
  std::istringstream in(text);
  std::string part;
  int count = 0;
  while (std::getline(in, part, ',')) {
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (count >= 3 || used == 0 || used != part.size() || !std::isfinite(value)) {
      count = -1;
      break;
    }
    values[size_t(count++)] = float(value);
  }
  if (count != 3 || text.back() == ',')
    throw std::invalid_argument(option + " expects three numbers R,G,B, got '" + text.substr(0, 80) + "'");
  return values;
}

bool InputSettings::operator==(const InputSettings& other) const {
  return resize == other.resize && input_size == other.input_size && crop == other.crop &&
         interpolation == other.interpolation && mean == other.mean && std == other.std &&
         max_pixels == other.max_pixels;
}

std::string channel_values_text(const std::optional<std::array<float, 3>>& values) {
  if (!values) return "";
  std::ostringstream text;
  text << (*values)[0] << "," << (*values)[1] << "," << (*values)[2];
  return text.str();
}

std::string to_string(const InputSettings& input) {
  std::ostringstream crop;
  if (input.crop) crop << *input.crop;
  return to_string(input.resize) + " " + input.input_size.text() + " crop=" + crop.str() +
         " interpolation=" + (input.interpolation ? to_string(*input.interpolation) : "") +
         " mean=" + channel_values_text(input.mean) + " std=" + channel_values_text(input.std) +
         " max_pixels=" + std::to_string(input.max_pixels);
}

Preprocessing resolve_preprocessing(const InputSettings& input, const DeclaredPreprocessing& declared) {
  Preprocessing used;
  auto from = [&](bool given, const std::string& option, const std::string& declared_source, bool declared_has) {
    if (given) return "--" + option;
    return declared_has ? declared_source : std::string("default");
  };
  used.resize = input.resize == ResizeMode::Auto ? declared.resize.value_or(ResizeMode::Timm) : input.resize;
  used.resize_source =
      input.resize == ResizeMode::Auto ? (declared.resize ? declared.source : std::string("default")) : "--resize";
  used.crop_pct = input.crop ? *input.crop : declared.crop_pct.value_or(0.875);
  used.crop_source = from(input.crop.has_value(), "crop", declared.source, declared.crop_pct.has_value());
  used.interpolation =
      input.interpolation ? *input.interpolation : declared.interpolation.value_or(Interpolation::Bicubic);
  used.interpolation_source =
      from(input.interpolation.has_value(), "interpolation", declared.source, declared.interpolation.has_value());
  used.normalization = declared.normalization;
  used.normalization_source = declared.normalization_source.empty() ? "ImageNet" : declared.normalization_source;
  if (input.mean) used.normalization.mean = *input.mean;
  if (input.std) used.normalization.std = *input.std;
  if (input.mean || input.std)
    used.normalization_source = !input.mean ? "--std" : !input.std ? "--mean" : "--mean/--std";
  return used;
}

RgbImage resize_bicubic_pil(const RgbImage& rgb, int width, int height) {
  return resize_pil(rgb, width, height, Interpolation::Bicubic);
}

RgbImage resize_pil(const RgbImage& rgb, int width, int height, Interpolation filter) {
  require_pixels(rgb, "resize_pil");
  if (width <= 0 || height <= 0) {
    throw ImageError("cannot resize to " + std::to_string(width) + "x" + std::to_string(height));
  }
  // Pillow skips the pass for an axis whose size is unchanged; both passes run horizontal first.
  const bool resize_columns = width != rgb.cols;
  const bool resize_rows = height != rgb.rows;
  if (!resize_columns && !resize_rows) return rgb.clone();

  if (!resize_rows) {
    return resample_horizontal(rgb, 0, rgb.rows, compute_axis_weights(rgb.cols, width, filter), width);
  }
  const AxisWeights vertical = compute_axis_weights(rgb.rows, height, filter);
  if (!resize_columns) return resample_vertical(rgb, 0, vertical, height);

  // Only the source rows the vertical pass reads need the horizontal pass.
  const int first_row = vertical.first.front();
  const int end_row = vertical.first.back() + vertical.count.back();
  const RgbImage columns_resized =
      resample_horizontal(rgb, first_row, end_row, compute_axis_weights(rgb.cols, width, filter), width);
  return resample_vertical(columns_resized, first_row, vertical, height);
}

RgbImage prepare_image(const RgbImage& rgb, ResizeMode mode, int height, int width, double crop_pct,
                       Interpolation filter) {
  require_pixels(rgb, "prepare_image");
  if (height <= 0 || width <= 0) {
    throw ImageError("invalid model input size " + std::to_string(width) + "x" + std::to_string(height));
  }
  switch (mode) {
    case ResizeMode::Timm:
      if (!(crop_pct > 0.0) || !std::isfinite(crop_pct)) {
        throw ImageError("crop_pct must be a positive number, got " + std::to_string(crop_pct));
      }
      return timm_eval_transform(rgb, height, width, crop_pct, filter);
    case ResizeMode::Fit:
      return resize_pil(rgb, width, height, filter);
    case ResizeMode::Auto:
      throw ImageError("resize mode auto must be resolved against the model first");
    case ResizeMode::None:
      if (rgb.rows != height || rgb.cols != width) {
        throw ImageError("image is " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                         " but the model needs " + std::to_string(width) + "x" + std::to_string(height) +
                         " (use --resize timm or fit)");
      }
      return rgb.clone();
  }
  throw ImageError("unknown resize mode");
}

torch::Tensor image_to_tensor(const RgbImage& rgb, const Normalization& norm) {
  require_pixels(rgb, "image_to_tensor");
  const int height = rgb.rows, width = rgb.cols;
  torch::Tensor tensor = torch::empty({1, 3, height, width}, torch::kFloat32);
  float* planes = tensor.data_ptr<float>();
  for (int channel = 0; channel < 3; ++channel) {
    // Float32 steps in torchvision's order, ToTensor's x / 255 then Normalize's (x - m) / s,
    // tabulated once per channel since the input has only 256 values.
    float table[256];
    for (int value = 0; value < 256; ++value) {
      const float unit = static_cast<float>(value) / 255.0f;
      table[value] = (unit - norm.mean[channel]) / norm.std[channel];
    }
    float* plane = planes + static_cast<size_t>(channel) * height * width;
    for (int y = 0; y < height; ++y) {
      const uint8_t* row = rgb.row(y);
      for (int x = 0; x < width; ++x) plane[y * width + x] = table[row[3 * x + channel]];
    }
  }
  return tensor;
}

InputSize InputSize::parse(const std::string& text) {
  InputSize size;
  if (text.empty() || text == "native") return size;
  int height = 0, width = 0;
  char separator = 0, extra = 0;
  std::istringstream in(text);
  in >> height;
  if (in >> separator) {
    if (separator != 'x' || !(in >> width) || (in >> extra)) height = 0;
  } else {
    width = height;
  }
  if (height <= 0 || width <= 0)
    throw std::invalid_argument("--size expects native, S or HxW in pixels, got '" + text.substr(0, 40) + "'");
  if (height > kMaxInputSide || width > kMaxInputSide)
    throw std::invalid_argument("--size " + text.substr(0, 40) + ": each side must be at most " +
                                std::to_string(kMaxInputSide) + " pixels");
  size.height = height;
  size.width = width;
  return size;
}

std::string InputSize::text() const {
  if (native()) return "native";
  return height == width ? std::to_string(height) : std::to_string(height) + "x" + std::to_string(width);
}

std::pair<int, int> resolve_input_size(const InputSize& size, int native_height, int native_width, int multiple) {
  if (size.native()) return {native_height, native_width};
  if (size.height % multiple || size.width % multiple)
    throw std::invalid_argument("--size " + size.text() + " is not a multiple of " + std::to_string(multiple) +
                                ", which the model's input sides must be (for a ViT: the patch size)");
  return {size.height, size.width};
}

std::vector<std::string> list_images(const std::string& folder) {
  static const std::vector<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"};
  std::error_code error;
  std::filesystem::directory_iterator it(folder, error);
  if (error) throw std::invalid_argument("cannot read image folder " + folder + ": " + error.message());
  std::vector<std::string> images;
  // Every step with an error code: a folder that fails half way is said in these words, never as
  // the filesystem library's exception text.
  for (const std::filesystem::directory_iterator end{}; it != end; it.increment(error)) {
    if (error) break;
    const auto& entry = *it;
    // Hidden files are not the folder's images: macOS's "._x.png" holds x.png's metadata, not pixels.
    std::error_code status;
    if (!entry.is_regular_file(status) || entry.path().filename().string().rfind('.', 0) == 0) continue;
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end())
      images.push_back(entry.path().string());
  }
  if (error) throw std::invalid_argument("cannot read image folder " + folder + ": " + error.message());
  std::sort(images.begin(), images.end());
  return images;
}

}  // namespace attnscope
