#include "models/rotary.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace attnscope {

using torch::indexing::Slice;

const std::vector<EnumEntry<RotaryKind>>& EnumTable<RotaryKind>::entries() {
  static const std::vector<EnumEntry<RotaryKind>> table = {
      {RotaryKind::None, "none"}, {RotaryKind::Axial, "axial"}, {RotaryKind::DinoV3, "dinov3"}};
  return table;
}

std::string RotaryArch::describe() const {
  if (!enabled()) return "none";
  std::ostringstream out;
  out << to_string(kind) << " (base " << temperature << ", " << (rotate_half ? "half" : "pairwise") << " rotation";
  if (grid_offset != 0) out << ", offset " << grid_offset;
  if (xy_indexing) out << ", x first";
  if (ref_grid_h > 0) out << ", rescaled to " << ref_grid_h << "x" << ref_grid_w;
  if (!periods.empty()) out << ", the file's periods";
  out << ")";
  return out.str();
}

void to_json(nlohmann::json& j, const RotaryArch& rope) {
  j = {{"kind", to_string(rope.kind)}};
  if (!rope.enabled()) return;
  j["temperature"] = rope.temperature;
  j["grid_offset"] = rope.grid_offset;
  j["grid_indexing"] = rope.xy_indexing ? "xy" : "ij";
  j["rotate_half"] = rope.rotate_half;
  if (rope.ref_grid_h > 0) j["ref_grid"] = {rope.ref_grid_h, rope.ref_grid_w};
}

namespace {

const auto kRotaryFloat = torch::TensorOptions().dtype(torch::kFloat32);

// timm build_fourier_pos_embed(in_pixels=False) + build_rotary_pos_embed: per axis the coordinates
// arange(s) + offset (rescaled by ref / s), times bands 1 / T^(i / n); each angle twice in a row.
torch::Tensor axial_angles(const RotaryArch& rope, int grid_h, int grid_w, int64_t bands_per_axis) {
  const auto bands =
      1.0 / torch::pow(rope.temperature, torch::arange(bands_per_axis, kRotaryFloat) / double(bands_per_axis));
  int64_t first = grid_h, second = grid_w;
  int64_t ref_first = rope.ref_grid_h, ref_second = rope.ref_grid_w;
  if (rope.xy_indexing) {
    std::swap(first, second);
    std::swap(ref_first, ref_second);
  }
  auto axis = [&](int64_t size, int64_t ref) {
    auto t = torch::arange(size, kRotaryFloat) + rope.grid_offset;
    return ref > 0 ? t / double(size) * double(ref) : t;
  };
  // meshgrid 'ij' over (first, second), or 'xy' (its output transposed back to rows x columns).
  auto grid = torch::meshgrid({axis(first, ref_first), axis(second, ref_second)}, rope.xy_indexing ? "xy" : "ij");
  auto coords = torch::stack({grid[0], grid[1]}, -1).unsqueeze(-1);  // [H, W, 2, 1]
  auto angles = (coords * bands).reshape({int64_t(grid_h) * grid_w, 2 * bands_per_axis});
  return angles.repeat_interleave(2, -1);
}

// timm make_coords_dinov3 + RotaryEmbeddingDinoV3 ('separate' normalisation): cell centres
// (i + 0.5 + offset) / size mapped to [-1, 1], angles 2 pi c / T^(2 i / (d / 2)), tiled.
torch::Tensor dinov3_angles(const RotaryArch& rope, int grid_h, int grid_w, int64_t bands_per_axis, int64_t head_dim) {
  torch::Tensor periods;
  if (!rope.periods.empty()) {
    if (int64_t(rope.periods.size()) != bands_per_axis)
      throw std::invalid_argument("the file's " + std::to_string(rope.periods.size()) +
                                  " rotary periods do not fit a head width of " + std::to_string(head_dim) + " (" +
                                  std::to_string(bands_per_axis) + " expected)");
    periods = torch::tensor(rope.periods, kRotaryFloat);
  } else {
    periods = torch::pow(rope.temperature, 2.0 * torch::arange(bands_per_axis, kRotaryFloat) / double(head_dim / 2));
  }
  auto coords_h = (torch::arange(0.5, double(grid_h), 1.0, kRotaryFloat) + rope.grid_offset) / double(grid_h);
  auto coords_w = (torch::arange(0.5, double(grid_w), 1.0, kRotaryFloat) + rope.grid_offset) / double(grid_w);
  auto grid = torch::meshgrid({coords_h, coords_w}, "ij");
  auto coords = 2.0 * torch::stack({grid[0], grid[1]}, -1).reshape({int64_t(grid_h) * grid_w, 2}) - 1.0;
  auto angles = (2.0 * M_PI * coords.unsqueeze(-1) / periods).flatten(1);  // [HW, 2 * bands]
  return angles.repeat({1, 2});  // timm's DINOv3 module always tiles (its rotate_half is never passed)
}

// x with each rotated pair turned a quarter: halves (-x2, x1) or neighbours (-x1, x0).
torch::Tensor quarter_turn(const torch::Tensor& x, bool rotate_half) {
  if (rotate_half) {
    auto halves = x.chunk(2, -1);
    return torch::cat({-halves[1], halves[0]}, -1);
  }
  auto even = x.index({"...", Slice(0, torch::indexing::None, 2)});
  auto odd = x.index({"...", Slice(1, torch::indexing::None, 2)});
  return torch::stack({-odd, even}, -1).reshape(x.sizes());
}

}  // namespace

torch::Tensor rotary_table(const RotaryArch& rope, int grid_h, int grid_w, int64_t head_dim,
                           const torch::Device& device) {
  if (head_dim % 4 != 0)
    throw std::invalid_argument("rotary position embedding over a head width of " + std::to_string(head_dim) +
                                ": it needs a multiple of 4 (two axes, each rotating pairs of channels)");
  const int64_t bands = head_dim / 4;
  torch::Tensor angles = rope.kind == RotaryKind::DinoV3 ? dinov3_angles(rope, grid_h, grid_w, bands, head_dim)
                                                         : axial_angles(rope, grid_h, grid_w, bands);
  return torch::cat({angles.sin(), angles.cos()}, -1).to(device);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& table, int64_t prefix, bool rotate_half) {
  auto parts = table.to(x.dtype()).chunk(2, -1);
  const auto& sin = parts[0];
  const auto& cos = parts[1];
  auto patches = x.index({Slice(), Slice(), Slice(prefix)});
  auto rotated = patches * cos + quarter_turn(patches, rotate_half) * sin;
  if (prefix == 0) return rotated;
  return torch::cat({x.index({Slice(), Slice(), Slice(0, prefix)}), rotated}, 2);
}

}  // namespace attnscope
