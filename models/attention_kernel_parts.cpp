// The pieces the kernels of attention_kernels.cpp are built from: head splitting, ViT window
// masks, FLatten's f_p and depthwise conv on V, and AnchorFormer's pooled anchor regions.
#include "models/attention_kernels.h"

#include <torch/torch.h>

#include <functional>

#include <cmath>
#include <vector>

#include "models/cpu_threads.h"

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  return x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

namespace {

// Window index per token, windows tiling the grid from the top-left row by row; -1 for prefix tokens.
std::vector<int64_t> window_ids(const TokenLayout& layout, int window) {
  const int windows_per_row = (layout.grid_w + window - 1) / window;
  std::vector<int64_t> ids(size_t(layout.total_tokens()), -1);
  for (int row = 0; row < layout.grid_h; ++row)
    for (int col = 0; col < layout.grid_w; ++col)
      ids[size_t(layout.patch_token(row, col))] = (row / window) * windows_per_row + col / window;
  return ids;
}

}  // namespace

torch::Tensor window_mask(const TokenLayout& layout, int window, torch::Device device, const torch::Tensor& queries) {
  if (window <= 0 || (window >= layout.grid_h && window >= layout.grid_w)) return {};
  std::vector<int64_t> ids = window_ids(layout, window);
  const auto key_ids = torch::from_blob(ids.data(), {int64_t(ids.size())}, torch::kLong);
  const auto query_ids = queries.defined() ? key_ids.index_select(0, queries.to(torch::kCPU)) : key_ids;
  auto allowed =
      (query_ids.unsqueeze(1) == key_ids.unsqueeze(0)) | (query_ids.unsqueeze(1) < 0) | (key_ids.unsqueeze(0) < 0);
  return allowed.to(device);
}

torch::Tensor attend_in_windows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                                const TokenLayout& layout, int window) {
  const auto long_options = torch::TensorOptions().dtype(torch::kLong);
  const int prefix = layout.prefix_tokens();
  // Each window's tokens: the prefix first (keys only), then its patches in token order.
  std::vector<int64_t> prefix_tokens(static_cast<size_t>(prefix));
  for (int token = 0; token < prefix; ++token) prefix_tokens[size_t(token)] = token;
  std::vector<std::vector<int64_t>> members;
  const std::vector<int64_t> ids = window_ids(layout, window);
  for (int64_t token = prefix; token < int64_t(ids.size()); ++token) {
    const size_t id = size_t(ids[size_t(token)]);
    if (id >= members.size()) members.resize(id + 1, prefix_tokens);
    members[id].push_back(token);
  }
  const int64_t windows = int64_t(members.size());

  auto out = torch::empty({v.size(0), v.size(1), features.q.size(2), v.size(3)}, v.options());
  if (prefix > 0) {
    const auto prefix_queries = torch::arange(prefix, long_options);
    out.narrow(2, 0, prefix).copy_(torch::matmul(equivalent_rows(kernel, features, prefix_queries, {}), v));
  }
  for_each_row_chunk(windows, [&](int64_t first, int64_t last) {
    for (int64_t w = first; w < last; ++w) {
      const std::vector<int64_t>& tokens = members[size_t(w)];
      const auto keys = torch::from_blob(const_cast<int64_t*>(tokens.data()), {int64_t(tokens.size())}, long_options);
      const auto patches = keys.narrow(0, prefix, keys.size(0) - prefix);
      KernelFeatures local = features;
      local.q = features.q.index_select(2, keys);
      local.k = features.k.index_select(2, keys);
      const auto rows = equivalent_rows(kernel, local, torch::arange(prefix, keys.size(0), long_options), {});
      out.index_copy_(2, patches, torch::matmul(rows, v.index_select(2, keys)));
    }
  });
  return out;
}

torch::Tensor focus(const torch::Tensor& x, double p, FocusNorm norm) {
  const std::vector<int64_t> dims =
      norm == FocusNorm::AllChannels ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{3};
  auto x_norm = x.norm(2, dims, /*keepdim=*/true);
  // f_p(x) = ||x|| x^p / ||x^p|| does not change when x is scaled, so x is divided by its largest
  // entry first: the powers then lie in [0, 1] and the largest is 1, with no overflow to inf
  // (float32 at p >= 49 in the authors' direct form) and no all-zero underflow at any p.
  auto unit = x / x.amax(dims, /*keepdim=*/true).clamp_min(1e-30);
  auto powered = unit.pow(p);
  auto powered_norm = powered.norm(2, dims, /*keepdim=*/true).clamp_min(1e-30);
  return powered / powered_norm * x_norm;
}

torch::Tensor anchor_pooling_matrix(int grid_h, int grid_w, int anchors) {
  const int patches = grid_h * grid_w;
  anchors = std::max(1, std::min(anchors, patches));
  // Halves round up (floor(x + 0.5)), as in the reference.
  int bands = int(std::floor(std::sqrt(double(anchors) * grid_h / grid_w) + 0.5));
  bands = std::max(1, std::min(bands, std::min(anchors, grid_h)));
  auto pooling = torch::zeros({anchors, patches});
  auto weights = pooling.accessor<float, 2>();
  int anchor = 0;
  for (int band = 0; band < bands; ++band) {
    const int row_begin = band * grid_h / bands;
    const int row_end = ((band + 1) * grid_h + bands - 1) / bands;
    const int columns = anchors / bands + (band < anchors % bands ? 1 : 0);
    for (int j = 0; j < columns; ++j, ++anchor) {
      const int col_begin = j * grid_w / columns;
      const int col_end = ((j + 1) * grid_w + columns - 1) / columns;
      const float weight = 1.0f / float((row_end - row_begin) * (col_end - col_begin));
      for (int row = row_begin; row < row_end; ++row)
        for (int col = col_begin; col < col_end; ++col) weights[anchor][row * grid_w + col] = weight;
    }
  }
  return pooling;
}

namespace {

// Every head's channel of v's patch tokens as one image channel, [images, heads * d, h, w] with
// channel = head * d + i (`images` 1: every batch item's channels side by side, for kernels per
// item); `conv` of it back to per-head [B, h, T, d] with zeros for the prefix tokens.
torch::Tensor convolve_channel_grid(const torch::Tensor& v, const TokenLayout& layout, bool items_as_channels,
                                    const std::function<torch::Tensor(const torch::Tensor&)>& conv) {
  const int64_t batch = v.size(0), heads = v.size(1), dim = v.size(3), prefix = layout.prefix_tokens();
  const int64_t images = items_as_channels ? 1 : batch;
  auto channels = v.index({Slice(), Slice(), Slice(prefix)})
                      .permute({0, 1, 3, 2})
                      .reshape({images, batch / images * heads * dim, layout.grid_h, layout.grid_w});
  auto patches = conv(channels).reshape({batch, heads, dim, layout.patch_tokens()}).permute({0, 1, 3, 2});
  if (prefix == 0) return patches;
  return torch::cat({torch::zeros({batch, heads, prefix, dim}, patches.options()), patches}, 2);
}

}  // namespace

torch::Tensor depthwise_conv_on_values(const torch::Tensor& v, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TokenLayout& layout) {
  const int64_t batch = v.size(0), heads = v.size(1), dim = v.size(3);
  const int64_t prefix = layout.prefix_tokens();
  const int64_t padding = weight.size(-1) / 2;
  if (weight.size(0) == heads * dim && heads > 1)  // one kernel per channel over all heads
    return convolve_channel_grid(v, layout, false, [&](const torch::Tensor& channels) {
      return F::conv2d(channels, weight, F::Conv2dFuncOptions().bias(bias).padding(padding).groups(heads * dim));
    });
  // One kernel per channel of a head, shared by the heads: the heads are images of d channels.
  auto grid = v.index({Slice(), Slice(), Slice(prefix)})
                  .reshape({batch * heads, layout.grid_h, layout.grid_w, dim})
                  .permute({0, 3, 1, 2});
  auto conv = F::conv2d(grid, weight, F::Conv2dFuncOptions().bias(bias).padding(padding).groups(dim));
  auto patches = conv.permute({0, 2, 3, 1}).reshape({batch, heads, layout.patch_tokens(), dim});
  if (prefix == 0) return patches;
  return torch::cat({torch::zeros({batch, heads, prefix, dim}, patches.options()), patches}, 2);
}

torch::Tensor depthwise_conv_per_item(const torch::Tensor& v, const torch::Tensor& kernels, const TokenLayout& layout) {
  const int64_t channels = v.size(0) * v.size(1) * v.size(3);
  return convolve_channel_grid(v, layout, true, [&](const torch::Tensor& grid) {
    return F::conv2d(grid, kernels, F::Conv2dFuncOptions().padding(1).groups(channels));
  });
}

torch::Tensor depthwise_conv_band(const torch::Tensor& weight, const TokenLayout& layout,
                                  const torch::Tensor& query_index) {
  auto kernel = weight.detach().to(torch::kCPU, torch::kFloat).mean(0)[0].contiguous();  // [k, k]
  const int64_t size = kernel.size(0), half = size / 2;
  auto kernel_at = kernel.accessor<float, 2>();
  auto queries = query_index.to(torch::kCPU, torch::kLong).contiguous();
  auto query_at = queries.accessor<int64_t, 1>();
  auto band = torch::zeros({queries.size(0), int64_t(layout.total_tokens())});
  auto band_at = band.accessor<float, 2>();
  for (int64_t i = 0; i < queries.size(0); ++i) {
    const int token = int(query_at[i]);
    if (!layout.is_patch(token)) continue;
    const int row = layout.row_of(token), col = layout.col_of(token);
    for (int64_t dy = -half; dy <= half; ++dy)
      for (int64_t dx = -half; dx <= half; ++dx) {
        const int64_t key_row = row + dy, key_col = col + dx;
        if (key_row < 0 || key_row >= layout.grid_h || key_col < 0 || key_col >= layout.grid_w) continue;
        band_at[i][layout.patch_token(int(key_row), int(key_col))] = kernel_at[half + dy][half + dx];
      }
  }
  return band.to(weight.device());
}

}  // namespace attnscope
