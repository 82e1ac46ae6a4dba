#include "analysis/perturbation.h"

#include <torch/torch.h>

#include <cmath>

namespace attnscope {

namespace F = torch::nn::functional;

const std::vector<EnumEntry<Replacement>>& EnumTable<Replacement>::entries() {
  static const std::vector<EnumEntry<Replacement>> table = {{Replacement::Blur, "blur"},
                                                            {Replacement::Mean, "mean"},
                                                            {Replacement::Black, "black"},
                                                            {Replacement::Zero, "zero"}};
  return table;
}

Replacement parse_replacement(const std::string& name) { return parse_enum_named<Replacement>("replacement", name); }

std::string to_string(Replacement replacement) { return enum_name(replacement); }

torch::Tensor gaussian_blur(const torch::Tensor& images, double sigma) {
  if (sigma <= 0) return images;
  const int64_t height = images.size(2), width = images.size(3);
  auto blur_along = [&](const torch::Tensor& x, int64_t side, bool rows) {
    const int64_t radius = std::min<int64_t>(int64_t(std::ceil(3.0 * sigma)), side - 1);
    if (radius <= 0) return x;
    auto offsets = torch::arange(-radius, radius + 1, torch::TensorOptions().dtype(torch::kDouble));
    auto kernel = (-(offsets * offsets) / (2.0 * sigma * sigma)).exp();
    kernel = (kernel / kernel.sum()).to(x.scalar_type()).to(x.device());
    const int64_t channels = x.size(1);
    auto weight = rows ? kernel.view({1, 1, -1, 1}) : kernel.view({1, 1, 1, -1});
    weight = weight.expand({channels, 1, weight.size(2), weight.size(3)}).contiguous();
    const std::vector<int64_t> pad =
        rows ? std::vector<int64_t>{0, 0, radius, radius} : std::vector<int64_t>{radius, radius, 0, 0};
    const auto padded = F::pad(x, F::PadFuncOptions(pad).mode(torch::kReflect));
    return F::conv2d(padded, weight, F::Conv2dFuncOptions().groups(channels));
  };
  return blur_along(blur_along(images, height, true), width, false);
}

torch::Tensor replacement_image(const torch::Tensor& input, Replacement replacement, double sigma,
                                const Normalization& normalization) {
  switch (replacement) {
    case Replacement::Blur:
      return gaussian_blur(input, sigma);
    case Replacement::Mean:
      return input.mean({2, 3}, /*keepdim=*/true).expand_as(input).contiguous();
    case Replacement::Black: {
      auto black = torch::empty({1, 3, 1, 1}, input.options());
      for (int c = 0; c < 3; ++c) black[0][c] = -normalization.mean[size_t(c)] / normalization.std[size_t(c)];
      return black.expand_as(input).contiguous();
    }
    case Replacement::Zero:
      return torch::zeros_like(input);
  }
  throw std::logic_error("replacement_image: unknown replacement");
}

torch::Tensor cell_pixels(const torch::Tensor& cells, int grid_h, int grid_w, int height, int width) {
  // Pixel y lies in cell r when r H / grid_h <= y < (r + 1) H / grid_h (integer division), that is
  // r = ceil((y + 1) grid_h / H) - 1.
  auto cell_of_row = ((torch::arange(height, torch::kLong) + 1) * grid_h - 1).div(height, "floor");
  auto cell_of_col = ((torch::arange(width, torch::kLong) + 1) * grid_w - 1).div(width, "floor");
  auto cell_index = cell_of_row.unsqueeze(1) * grid_w + cell_of_col.unsqueeze(0);  // [H, W]
  auto chosen = torch::zeros({int64_t(grid_h) * grid_w}, torch::kBool);
  if (cells.numel() > 0) chosen.index_fill_(0, cells.to(torch::kCPU, torch::kLong), true);
  return chosen.index({cell_index});
}

}  // namespace attnscope
