// What an image looks like with parts of it taken away: the replacement images that deletion and
// insertion curves and integrated gradients' baseline use, and the pixel mask of a set of map cells.
#pragma once

#include "core/enum_names.h"

#include <torch/types.h>

#include <string>

#include "core/image.h"

namespace attnscope {

enum class Replacement {
  Blur,   // the image blurred (Gaussian, sigma = one map cell, reflect border): local content gone
  Mean,   // every pixel the image's mean colour
  Black,  // pixel value 0 (before normalisation)
  Zero,   // 0 in the normalised input (the ImageNet mean colour for ImageNet statistics; Captum's default baseline)
};
template <>
struct EnumTable<Replacement> {
  static const std::vector<EnumEntry<Replacement>>& entries();
};
Replacement parse_replacement(const std::string& name);  // blur, mean, black, zero
std::string to_string(Replacement replacement);

// The replacement for a normalised input [1, 3, H, W]; `sigma` in pixels for Blur.
torch::Tensor replacement_image(const torch::Tensor& input, Replacement replacement, double sigma,
                                const Normalization& normalization);

// A Gaussian blur of [B, C, H, W] with `sigma` pixels, kernel radius ceil(3 sigma) (at most the
// image side - 1), reflect padding, separable; the image itself when sigma <= 0.
torch::Tensor gaussian_blur(const torch::Tensor& images, double sigma);

// The pixels [H, W] of a cell of a grid_h x grid_w map over an H x W image: rows
// [r H / grid_h, (r + 1) H / grid_h), columns likewise (integer division).
// `cells` [K] int64 row-major cell indices -> bool [H, W], true inside any of them.
torch::Tensor cell_pixels(const torch::Tensor& cells, int grid_h, int grid_w, int height, int width);

}  // namespace attnscope
