#include "models/local_attention.h"

#include <cmath>

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

WindowPlan plan_windows(int grid_h, int grid_w, int resolution_h, int resolution_w, int window_h, int window_w,
                        bool shifted) {
  WindowPlan plan;
  plan.grid_h = grid_h;
  plan.grid_w = grid_w;
  plan.window_h = resolution_h <= window_h ? resolution_h : window_h;
  plan.window_w = resolution_w <= window_w ? resolution_w : window_w;
  plan.shift_h = shifted && resolution_h > plan.window_h ? plan.window_h / 2 : 0;
  plan.shift_w = shifted && resolution_w > plan.window_w ? plan.window_w / 2 : 0;
  plan.window_h = std::max(plan.window_h, 1);
  plan.window_w = std::max(plan.window_w, 1);
  plan.padded_h = (grid_h + plan.window_h - 1) / plan.window_h * plan.window_h;
  plan.padded_w = (grid_w + plan.window_w - 1) / plan.window_w * plan.window_w;
  return plan;
}

torch::Tensor window_slots(const WindowPlan& plan) {
  const int rows = plan.padded_h / plan.window_h, cols = plan.padded_w / plan.window_w;
  auto slots = torch::full({plan.windows(), plan.window_area()}, -1, torch::kLong);
  auto at = slots.accessor<int64_t, 2>();
  for (int wy = 0; wy < rows; ++wy)
    for (int wx = 0; wx < cols; ++wx)
      for (int iy = 0; iy < plan.window_h; ++iy)
        for (int ix = 0; ix < plan.window_w; ++ix) {
          // Position in the rolled, padded grid; rolled by -shift, it shows token (y + shift) mod H.
          const int y = wy * plan.window_h + iy, x = wx * plan.window_w + ix;
          if (y >= plan.grid_h || x >= plan.grid_w) continue;
          const int row = (y + plan.shift_h) % plan.grid_h, col = (x + plan.shift_w) % plan.grid_w;
          at[wy * cols + wx][iy * plan.window_w + ix] = int64_t(row) * plan.grid_w + col;
        }
  return slots;
}

WindowFrame window_frame(const WindowPlan& plan, int64_t batch, torch::Device device) {
  const torch::Tensor slots = window_slots(plan).view({-1});
  const int64_t frame_rows = slots.size(0), image_rows = int64_t(plan.grid_h) * plan.grid_w;
  auto to_frame = torch::empty({batch * frame_rows}, torch::kLong);
  auto from_frame = torch::empty({batch * image_rows}, torch::kLong);
  const auto slot = slots.accessor<int64_t, 1>();
  auto to = to_frame.accessor<int64_t, 1>();
  auto from = from_frame.accessor<int64_t, 1>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < frame_rows; ++s) {
      to[b * frame_rows + s] = b * image_rows + std::max<int64_t>(slot[s], 0);
      if (slot[s] >= 0) from[b * image_rows + slot[s]] = b * frame_rows + s;
    }
  WindowFrame frame{to_frame.to(device), from_frame.to(device), torch::Tensor()};
  if (frame_rows != image_rows) frame.padding = (slots < 0).repeat({batch}).to(device);
  return frame;
}

torch::Tensor shift_mask(const WindowPlan& plan) {
  if (!plan.shifted()) return {};
  // Regions of the padded grid as timm slices them: [0, P - w), [P - w, P - s), [P - s, P).
  auto region_of = [](int index, int padded, int window, int shift) {
    if (shift == 0) return 0;
    return index < padded - window ? 0 : (index < padded - shift ? 1 : 2);
  };
  auto regions = torch::zeros({plan.padded_h, plan.padded_w}, torch::kFloat);
  auto at = regions.accessor<float, 2>();
  for (int y = 0; y < plan.padded_h; ++y)
    for (int x = 0; x < plan.padded_w; ++x)
      at[y][x] = float(region_of(y, plan.padded_h, plan.window_h, plan.shift_h) * 3 +
                       region_of(x, plan.padded_w, plan.window_w, plan.shift_w));
  auto windows =
      regions.view({plan.padded_h / plan.window_h, plan.window_h, plan.padded_w / plan.window_w, plan.window_w})
          .permute({0, 2, 1, 3})
          .reshape({plan.windows(), plan.window_area()});
  auto differs = windows.unsqueeze(1) != windows.unsqueeze(2);
  return torch::zeros(differs.sizes(), torch::kFloat).masked_fill(differs, -100.0);
}

torch::Tensor to_windows(const torch::Tensor& x, const WindowPlan& plan) {
  auto rolled = plan.shifted() ? torch::roll(x, {-plan.shift_h, -plan.shift_w}, {1, 2}) : x;
  const int64_t batch = x.size(0), channels = x.size(3);
  if (plan.padded_h != plan.grid_h || plan.padded_w != plan.grid_w)
    rolled = F::pad(rolled, F::PadFuncOptions({0, 0, 0, plan.padded_w - plan.grid_w, 0, plan.padded_h - plan.grid_h}));
  return rolled
      .view(
          {batch, plan.padded_h / plan.window_h, plan.window_h, plan.padded_w / plan.window_w, plan.window_w, channels})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({batch * plan.windows(), plan.window_area(), channels});
}

torch::Tensor from_windows(const torch::Tensor& windows, const WindowPlan& plan, int64_t batch) {
  const int64_t channels = windows.size(-1);
  auto x = windows
               .view({batch, plan.padded_h / plan.window_h, plan.padded_w / plan.window_w, plan.window_h, plan.window_w,
                      channels})
               .permute({0, 1, 3, 2, 4, 5})
               .reshape({batch, plan.padded_h, plan.padded_w, channels});
  if (plan.padded_h != plan.grid_h || plan.padded_w != plan.grid_w)
    x = x.index({Slice(), Slice(0, plan.grid_h), Slice(0, plan.grid_w)});
  return plan.shifted() ? torch::roll(x, {plan.shift_h, plan.shift_w}, {1, 2}) : x.contiguous();
}

torch::Tensor relative_position_index(int window_h, int window_w) {
  const int area = window_h * window_w;
  auto index = torch::empty({area, area}, torch::kLong);
  auto at = index.accessor<int64_t, 2>();
  for (int i = 0; i < area; ++i)
    for (int j = 0; j < area; ++j) {
      const int dr = i / window_w - j / window_w + window_h - 1;
      const int dc = i % window_w - j % window_w + window_w - 1;
      at[i][j] = int64_t(dr) * (2 * window_w - 1) + dc;
    }
  return index;
}

namespace {

// timm's _calc: where the source table's entries sit when spread over the destination's offsets,
// growing geometrically from the centre (from BEiT's fine-tuning code).
std::vector<double> progression_positions(int source, int destination) {
  auto geometric = [](double a, double r, int n) { return a * (1.0 - std::pow(r, n)) / (1.0 - r); };
  double left = 1.01, right = 1.5, q = 0.0;
  while (right - left > 1e-6) {
    q = (left + right) / 2.0;
    if (geometric(1, q, source / 2) > destination / 2)
      right = q;
    else
      left = q;
  }
  std::vector<double> distances;
  double current = 1;
  for (int i = 0; i < source / 2; ++i) {
    distances.push_back(current);
    current += std::pow(q, i + 1);
  }
  std::vector<double> positions;
  for (auto it = distances.rbegin(); it != distances.rend(); ++it) positions.push_back(-*it);
  positions.push_back(0);
  positions.insert(positions.end(), distances.begin(), distances.end());
  return positions;
}

// Linear interpolation weights of `target` on the sorted `points`, as timm's RegularGridInterpolator
// forms them (clamped at both ends): the two neighbours and their weights.
struct Neighbours {
  int left = 0, right = 0;
  double left_weight = 0.5, right_weight = 0.5;
};
Neighbours neighbours(const std::vector<double>& points, double target) {
  const int count = int(points.size());
  // torch.bucketize: the first index whose point is >= target.
  int right = int(std::lower_bound(points.begin(), points.end(), target) - points.begin());
  if (right >= count) right = count - 1;
  const int left = std::max(right - 1, 0);
  double to_left = std::max(target - points[size_t(left)], 0.0);
  double to_right = std::max(points[size_t(right)] - target, 0.0);
  if (to_left == 0 && to_right == 0) to_left = to_right = 1;
  // The value at `left` weighs by the distance to `right`, and the other way round.
  return {left, right, to_right / (to_left + to_right), to_left / (to_left + to_right)};
}

}  // namespace

torch::Tensor resize_relative_position_table(const torch::Tensor& table, int window_h, int window_w) {
  const int64_t entries = table.size(0), heads = table.size(1);
  const int source = int(std::lround(std::sqrt(double(entries))));
  const int destination_h = 2 * window_h - 1, destination_w = 2 * window_w - 1;
  if (source * source != entries)
    throw std::invalid_argument("relative position table with " + std::to_string(entries) + " entries is not square");
  if (source == destination_h && source == destination_w) return table;
  const std::vector<double> ys = progression_positions(source, destination_h);
  const std::vector<double> xs = progression_positions(source, destination_w);
  auto values = table.detach().to(torch::kCPU, torch::kFloat).contiguous();  // [source*source, heads]
  auto at = values.accessor<float, 2>();
  auto resized = torch::empty({int64_t(destination_h) * destination_w, heads}, torch::kFloat);
  auto out = resized.accessor<float, 2>();
  const double half_h = destination_h / 2, half_w = destination_w / 2;  // dst // 2.0
  for (int i = 0; i < destination_h; ++i) {
    const Neighbours y = neighbours(ys, -half_h + i);
    for (int j = 0; j < destination_w; ++j) {
      const Neighbours x = neighbours(xs, -half_w + j);
      for (int64_t h = 0; h < heads; ++h) {
        auto value = [&](int row, int col) { return double(at[int64_t(row) * source + col][h]); };
        // timm sums the four corners' products in float32.
        const float sum = float(value(y.left, x.left) * (y.left_weight * x.left_weight)) +
                          float(value(y.left, x.right) * (y.left_weight * x.right_weight)) +
                          float(value(y.right, x.left) * (y.right_weight * x.left_weight)) +
                          float(value(y.right, x.right) * (y.right_weight * x.right_weight));
        out[int64_t(i) * destination_w + j][h] = sum;
      }
    }
  }
  return resized.to(table.device(), table.scalar_type());
}

torch::Tensor resize_grid_encoding(const torch::Tensor& encoding, int to_h, int to_w) {
  const int64_t tokens = encoding.size(1), channels = encoding.size(2);
  const int side = int(std::lround(std::sqrt(double(tokens))));
  if (side * side != tokens)
    throw std::invalid_argument("positional_encoding with " + std::to_string(tokens) +
                                " tokens is not a square grid: it cannot follow another input size");
  if (side == to_h && side == to_w) return encoding;
  auto grid = encoding.reshape({1, side, side, channels}).permute({0, 3, 1, 2}).to(torch::kFloat);
  auto resized = F::interpolate(grid, F::InterpolateFuncOptions()
                                          .size(std::vector<int64_t>{to_h, to_w})
                                          .mode(torch::kBicubic)
                                          .align_corners(false)
                                          .antialias(true));
  return resized.permute({0, 2, 3, 1}).reshape({1, int64_t(to_h) * to_w, channels}).to(encoding.dtype());
}

torch::Tensor attend_grouped(const GroupedAttention& step, const torch::Tensor& q, torch::Tensor k,
                             const torch::Tensor& v, AttentionCapture* capture) {
  const ResolvedAttention& resolved = step.resolved;
  KernelFeatures features = kernel_features(resolved, q, k, step.parameters, step.group_grid);
  const KernelSpec& kernel = kernel_spec(resolved.kernel);
  torch::Tensor allowed, additive;
  if (kernel.takes_additive)
    additive = step.additive;
  else if (step.forbidden.defined() && !kernel.global_only)
    allowed = step.forbidden.logical_not().unsqueeze(1).repeat({q.size(0) / step.forbidden.size(0), 1, 1, 1});
  auto out = attend(resolved.kernel, features, v, allowed, additive);
  if (resolved.dwc)
    out = out + (step.local_kernels.defined()
                     ? depthwise_conv_per_item(v, step.local_kernels, step.group_grid)
                     : depthwise_conv_on_values(v, step.dwc_weight, step.dwc_bias, step.group_grid));
  if (capture) {
    capture->attention = resolved;
    capture->heads = int(q.size(1));
    capture->head_dim = int(q.size(3));
    capture->q = q.detach();
    capture->k = k.detach();
    capture->v = v.detach();
    capture->features = features.detached();
    capture->parameters = step.parameters.detached();
    if (resolved.dwc)
      capture->dwc_weight = (step.local_kernels.defined() ? step.local_kernels : step.dwc_weight).detach();
    capture->query_slots = step.query_slots;
    capture->key_slots = step.key_slots;
    capture->additive = step.capture_additive;
    capture->forbidden = step.forbidden;
  }
  return out;
}

}  // namespace attnscope
