#include "analysis/dino_masks.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace attnscope {

DinoMasks dino_masks(const AttentionCapture& capture, int64_t item, double mass) {
  if (!(mass > 0.0 && mass <= 1.0))
    throw std::invalid_argument("--mass must be in (0, 1], got " + std::to_string(mass));
  const TokenLayout &queries = capture.layout, &keys = capture.key_layout;
  if (!queries.has_class_token)
    throw std::invalid_argument(capture.placement.name +
                                " has no class token: DINO's masks are of the class token's attention");
  if (capture.heads == 0) throw std::invalid_argument(capture.placement.name + " computes no attention");
  torch::NoGradGuard no_grad;
  DinoMasks result;
  result.heads = capture.heads;
  result.grid_h = keys.grid_h;
  result.grid_w = keys.grid_w;
  result.patch_h = result.patch_w = keys.patch_size;
  result.attention = torch::empty({capture.heads, keys.grid_h, keys.grid_w}, torch::kDouble);
  result.masks = torch::empty({capture.heads, keys.grid_h, keys.grid_w}, torch::kUInt8);
  for (int head = 0; head < capture.heads; ++head) {
    const torch::Tensor row =
        capture.row(item, head, 0).to(torch::kCPU, torch::kDouble).slice(0, keys.prefix_tokens());  // patch keys
    const torch::Tensor share = row / row.sum();
    const auto [sorted, order] = share.sort();  // ascending
    const torch::Tensor kept = sorted.cumsum(0) > (1.0 - mass);
    // Back to the patches' own order.
    const torch::Tensor mask = torch::empty_like(kept).scatter_(0, order, kept);
    result.attention[head] = share.view({keys.grid_h, keys.grid_w});
    result.masks[head] = mask.to(torch::kUInt8).view({keys.grid_h, keys.grid_w});
  }
  return result;
}

std::vector<double> mask_jaccard(const DinoMasks& masks, const torch::Tensor& object) {
  const int64_t height = object.size(0), width = object.size(1);
  // Nearest: pixel (y, x) takes the patch (y * gh / H, x * gw / W), interpolate(scale_factor=patch)'s cell.
  const torch::Tensor rows = torch::floor_divide(torch::arange(height) * masks.grid_h, height);
  const torch::Tensor cols = torch::floor_divide(torch::arange(width) * masks.grid_w, width);
  const torch::Tensor target = object.to(torch::kCPU).ne(0);
  std::vector<double> jaccard;
  for (int head = 0; head < masks.heads; ++head) {
    const torch::Tensor upsampled = masks.masks[head].index_select(0, rows).index_select(1, cols).ne(0);
    const double intersection = (upsampled & target).sum().item<double>();
    const double united = (upsampled | target).sum().item<double>();
    jaccard.push_back(united > 0 ? intersection / united : std::numeric_limits<double>::quiet_NaN());
  }
  return jaccard;
}

}  // namespace attnscope
