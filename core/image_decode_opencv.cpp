// decode_image_pixels by OpenCV's imread: every format OpenCV 4.6 reads (the default build).
#include "core/cv_image.h"
#include "core/image_decode.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace attnscope {
namespace {

// 16-bit samples keep their high byte, which is what PIL gives for 16-bit RGB(A) PNGs.
// (PIL would clip 16-bit grayscale at 255 instead, whitening the image; we do not copy that.)
cv::Mat high_byte(const cv::Mat& image16) {
  cv::Mat image8(image16.size(), CV_MAKETYPE(CV_8U, image16.channels()));
  const int values_per_row = image16.cols * image16.channels();
  for (int y = 0; y < image16.rows; ++y) {
    const uint16_t* in = image16.ptr<uint16_t>(y);
    uint8_t* out = image8.ptr<uint8_t>(y);
    for (int v = 0; v < values_per_row; ++v) out[v] = static_cast<uint8_t>(in[v] >> 8);
  }
  return image8;
}

}  // namespace

RgbImage decode_image_pixels(const std::string& path, const ImageHeader&) {
  // IMREAD_UNCHANGED keeps 16-bit depth and alpha for us to convert like PIL, and (like PIL's
  // Image.open) ignores the EXIF orientation, so pixels match a timm pipeline's.
  cv::Mat decoded;
  try {
    decoded = cv::imread(path, cv::IMREAD_UNCHANGED);
    const bool unusual =
        !decoded.empty() && ((decoded.depth() != CV_8U && decoded.depth() != CV_16U) || decoded.channels() > 4);
    if (unusual) decoded = cv::imread(path, cv::IMREAD_COLOR);  // let OpenCV map it to 8-bit BGR
  } catch (const cv::Exception& e) {
    throw ImageError("decoder error: " + e.msg);
  }
  if (decoded.empty()) throw ImageError("not a supported image format, or the data is corrupt");

  if (decoded.depth() == CV_16U) decoded = high_byte(decoded);
  cv::Mat rgb;
  switch (decoded.channels()) {
    case 1:
      cv::cvtColor(decoded, rgb, cv::COLOR_GRAY2RGB);
      break;
    case 2: {  // gray + alpha: the alpha is dropped, as in PIL's LA -> RGB
      cv::Mat gray;
      cv::extractChannel(decoded, gray, 0);
      cv::cvtColor(gray, rgb, cv::COLOR_GRAY2RGB);
      break;
    }
    case 3:
      cv::cvtColor(decoded, rgb, cv::COLOR_BGR2RGB);
      break;
    default:  // BGRA: the alpha is dropped, not blended, as in PIL's RGBA -> RGB
      cv::cvtColor(decoded, rgb, cv::COLOR_BGRA2RGB);
      break;
  }
  return to_rgb_image(rgb);
}

}  // namespace attnscope
