#include "models/attention_kernels.h"
#include "models/cpu_threads.h"

#include <torch/torch.h>

#include <cmath>
#include <sstream>

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

std::string to_string(Kernel kernel) {
  switch (kernel) {
    case Kernel::Softmax:
      return "softmax";
    case Kernel::Linear:
      return "linear";
    case Kernel::Focused:
      return "focused";
    case Kernel::Enhanced:
      return "enhanced";
    case Kernel::Anchor:
      return "anchor";
    case Kernel::EluLinear:
      return "elu_linear";
  }
  return "?";
}

std::string ResolvedAttention::describe() const {
  std::ostringstream out;
  out << to_string(kernel);
  if (kernel == Kernel::Focused) {
    out << " p=" << p << " norm=" << to_string(norm) << " dwc=" << (dwc ? "on" : "off");
    if (!learned_scale) out << " scale=neutral";
  }
  if (kernel == Kernel::Enhanced && !learned_temperature) out << " temperature=d^-0.5";
  if (kernel == Kernel::Anchor) out << " anchors=" << anchors << (learned_anchors ? " (learned)" : " (pooled from K)");
  if (window > 0) out << " window=" << window;
  if (recorded) out << " (recorded by the TorchScript model)";
  if (!native) out << " [swapped]";
  return out.str();
}

torch::Tensor window_mask(const TokenLayout& layout, int window, torch::Device device) {
  if (window <= 0 || (window >= layout.grid_h && window >= layout.grid_w)) return {};
  const int64_t total = layout.total_tokens();
  const int windows_per_row = (layout.grid_w + window - 1) / window;
  // Window id per token; -1 marks prefix tokens, which see and are seen by everything.
  auto window_id = torch::full({total}, -1, torch::kLong);
  auto ids = window_id.accessor<int64_t, 1>();
  for (int row = 0; row < layout.grid_h; ++row)
    for (int col = 0; col < layout.grid_w; ++col)
      ids[layout.patch_token(row, col)] = (row / window) * windows_per_row + col / window;
  auto query_ids = window_id.unsqueeze(1);
  auto key_ids = window_id.unsqueeze(0);
  auto allowed = (query_ids == key_ids) | (query_ids < 0) | (key_ids < 0);
  return allowed.to(device);
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

// 1 / x with 1/0 -> 0, as AnchorFormer's `degree` does for anchors nobody is assigned to.
torch::Tensor safe_reciprocal(const torch::Tensor& x) {
  auto inverse = x.reciprocal();
  return torch::where(torch::isinf(inverse), torch::zeros_like(inverse), inverse);
}

// Normalises linear-kernel scores S [B, h, Q, T] (already zero outside `allowed`).
torch::Tensor normalise_linear_scores(Kernel kernel, const torch::Tensor& scores, const KernelFeatures& features,
                                      const torch::Tensor& allowed) {
  auto row_sum = scores.sum(-1, /*keepdim=*/true);
  switch (kernel) {
    case Kernel::Linear:
      return scores / (row_sum + 1e-6);
    case Kernel::Focused:
    case Kernel::EluLinear: {
      // z = 1 / (q . mean(k) + eps), averaging over the keys the query may see.
      auto visible = allowed.defined() ? allowed.sum(-1, /*keepdim=*/true).to(scores.scalar_type())
                                       : torch::full({1}, double(scores.size(-1)), scores.options());
      return (scores / visible) / (row_sum / visible + 1e-6);
    }
    case Kernel::Enhanced:
      return scores * features.temperature / row_sum.clamp_min(100.0);
    default:
      break;
  }
  throw std::logic_error("normalise_linear_scores: not a linear kernel");
}

}  // namespace

torch::Tensor equivalent_rows(Kernel kernel, const KernelFeatures& features, const torch::Tensor& query_index,
                              const torch::Tensor& allowed, const torch::Tensor& additive) {
  if (kernel == Kernel::Anchor) {
    const auto& assignment = features.anchor_assignment;  // [B, h, T, m]
    const auto& keys = features.key_anchor_assignment.defined() ? features.key_anchor_assignment : assignment;
    auto inverse_degree = safe_reciprocal(keys.sum(2));  // [B, h, m]
    auto query_assignment = assignment.index_select(2, query_index);
    return torch::matmul(query_assignment * inverse_degree.unsqueeze(2), keys.transpose(-1, -2));
  }
  auto query = features.q.index_select(2, query_index);
  auto scores = torch::matmul(query, features.k.transpose(-1, -2));  // [B, h, Q, T]
  if (kernel == Kernel::Softmax) {
    scores = scores * features.score_scale;
    if (additive.defined()) scores = scores + additive;
    if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
    return scores.softmax(-1);
  }
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), 0.0);
  return normalise_linear_scores(kernel, scores, features, allowed);
}

namespace {

// Softmax attention of small groups ([B, h, Q, d] with B >= the cores, e.g. Swin's windows)
// without autograd on the CPU: whole groups per core, one full Q x Tk GEMM per group and head
// (splitting query rows instead doubles the GEMM calls and halves each), and a softmax of max,
// exp and sum in place: LibTorch's softmax kernel is slow on rows of 49 (2.3 against 1.4 ns per
// score measured here). `additive` is undefined or [G, h or 1, Q, Tk] with G dividing B.
torch::Tensor attend_softmax_by_groups(const KernelFeatures& features, const torch::Tensor& v,
                                       const torch::Tensor& additive) {
  const auto& q = features.q;
  const auto& k = features.k;
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2), value_dim = v.size(3);
  const int64_t groups = additive.defined() ? additive.size(0) : 1;
  // [B, h, Q, d] as a view of [B, Q, h, d]: the chunks write each head's output in token order,
  // so the callers' out.transpose(1, 2).reshape(B, Q, h * d) is a view, not a copy on one core.
  auto out = torch::empty({batch, queries, heads, value_dim}, v.options()).permute({0, 2, 1, 3});
  fill_by_row_chunks(out, 0, [&](int64_t first, int64_t last) {
    const int64_t count = last - first;
    auto q3 = q.narrow(0, first, count).reshape({count * heads, queries, q.size(3)});
    auto k3 = k.narrow(0, first, count).reshape({count * heads, keys, k.size(3)});
    auto v3 = v.narrow(0, first, count).reshape({count * heads, keys, value_dim});
    // Zeros, not empty: LibTorch 1.13's CPU baddbmm_ can scale the old contents by beta = 0.
    auto scores = torch::zeros({count * heads, queries, keys}, q.options())
                      .baddbmm_(q3, k3.transpose(1, 2), /*beta=*/0.0, /*alpha=*/features.score_scale);
    if (additive.defined()) {
      // Group g takes the bias of g mod G; a chunk may span the groups of several images.
      auto per_group = scores.view({count, heads, queries, keys});
      for (int64_t g = first; g < last;) {
        const int64_t image_end = std::min(last, (g / groups + 1) * groups);
        per_group.narrow(0, g - first, image_end - g).add_(additive.narrow(0, g % groups, image_end - g));
        g = image_end;
      }
    }
    scores.sub_(scores.amax(-1, /*keepdim=*/true)).exp_();
    scores.div_(scores.sum(-1, /*keepdim=*/true));
    return torch::bmm(scores, v3).view({count, heads, queries, value_dim});
  });
  return out;
}

}  // namespace

torch::Tensor attend(Kernel kernel, const KernelFeatures& features, const torch::Tensor& v,
                     const torch::Tensor& allowed, const torch::Tensor& additive) {
  const auto& q = features.q;
  const auto& k = features.k;
  if (kernel == Kernel::Anchor) {
    // Right to left, O(N m d): A (Delta^-1 (A^T V)).
    const auto& assignment = features.anchor_assignment;
    const auto& keys = features.key_anchor_assignment.defined() ? features.key_anchor_assignment : assignment;
    auto inverse_degree = safe_reciprocal(keys.sum(2)).unsqueeze(-1);  // [B, h, m, 1]
    auto anchor_values = torch::matmul(keys.transpose(-1, -2), v) * inverse_degree;
    return torch::matmul(assignment, anchor_values);
  }
  if (kernel == Kernel::Softmax || allowed.defined()) {
    const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2), value_dim = v.size(3);
    // Rows [begin, end) of a [.., Q, Tk] mask or bias (undefined stays undefined).
    auto query_rows = [](const torch::Tensor& t, int64_t begin, int64_t end) {
      return t.defined() ? t.narrow(-2, begin, end - begin) : t;
    };
    std::function<torch::Tensor(int64_t, int64_t)> attend_queries;
    // A bias [G, h or 1, Q, Tk] whose G divides the batch (Swin's windows) is added broadcast, as
    // a view of the scores [B / G, G, h, Q, Tk]; tiling it first would copy it per chunk.
    const bool grouped_bias =
        additive.defined() && additive.dim() == 4 && additive.size(0) > 0 && batch % additive.size(0) == 0;
    if (kernel == Kernel::Softmax && !allowed.defined() && cpu_inference(q) && batch >= int64_t(configured_threads()) &&
        (!additive.defined() || grouped_bias))
      return attend_softmax_by_groups(features, v, additive);
    if (kernel == Kernel::Softmax && !allowed.defined()) {
      // The scale rides inside the GEMM (alpha) rather than costing a pass over q or the scores.
      auto q3 = q.reshape({batch * heads, queries, q.size(3)});
      auto k3 = k.reshape({batch * heads, keys, k.size(3)});
      auto v3 = v.reshape({batch * heads, keys, value_dim});
      torch::Tensor bias3;
      if (additive.defined() && !grouped_bias)
        bias3 = additive.expand({batch, heads, queries, keys}).reshape({batch * heads, queries, keys});
      attend_queries = [=, &features](int64_t begin, int64_t end) {
        // Zeros, not empty: LibTorch 1.13's CPU baddbmm_ can scale the old contents by beta = 0,
        // and 0 * NaN left in reused memory made whole Swin forwards NaN.
        auto scores = torch::zeros({batch * heads, end - begin, keys}, q.options())
                          .baddbmm_(q3.narrow(1, begin, end - begin), k3.transpose(1, 2), /*beta=*/0.0,
                                    /*alpha=*/features.score_scale);
        if (bias3.defined()) scores.add_(bias3.narrow(1, begin, end - begin));
        if (grouped_bias) {
          const int64_t groups = additive.size(0);
          scores.view({batch / groups, groups, heads, end - begin, keys})
              .add_(additive.narrow(2, begin, end - begin).unsqueeze(0));
        }
        return torch::bmm(scores.softmax(-1), v3).view({batch, heads, end - begin, value_dim});
      };
    } else {
      // Windowed: the masked Tq x Tk matrix is the exact computation.
      attend_queries = [&](int64_t begin, int64_t end) {
        auto index = torch::arange(begin, end, torch::TensorOptions().dtype(torch::kLong).device(q.device()));
        return torch::matmul(
            equivalent_rows(kernel, features, index, query_rows(allowed, begin, end), query_rows(additive, begin, end)),
            v);
      };
    }
    // Without autograd on the CPU, query rows split across the cores, one region for all heads.
    if (!cpu_inference(q)) return attend_queries(0, queries);
    auto out = torch::empty({batch, heads, queries, value_dim}, v.options());
    fill_by_row_chunks(out, 2, attend_queries);
    return out;
  }
  // Global linear kernels: K^T V first, O(N d^2).
  auto key_sum = k.sum(2).unsqueeze(-1);            // [B, h, d, 1]
  auto kv = torch::matmul(k.transpose(-1, -2), v);  // [B, h, d, d]
  switch (kernel) {
    case Kernel::Linear:
      return torch::matmul(q, kv) / (torch::matmul(q, key_sum) + 1e-6);
    case Kernel::Focused:
    case Kernel::EluLinear: {
      const double tokens = double(k.size(2));
      auto z = (torch::matmul(q, key_sum / tokens) + 1e-6).reciprocal();
      return torch::matmul(q, kv / tokens) * z;
    }
    case Kernel::Enhanced:
      return torch::matmul(q, kv * features.temperature) / torch::matmul(q, key_sum).clamp_min(100.0);
    default:
      break;
  }
  throw std::logic_error("attend: unhandled kernel");
}

torch::Tensor depthwise_conv_on_values(const torch::Tensor& v, const torch::Tensor& weight, const torch::Tensor& bias,
                                       const TokenLayout& layout) {
  const int64_t batch = v.size(0), heads = v.size(1), dim = v.size(3);
  const int64_t prefix = layout.prefix_tokens();
  auto grid = v.index({Slice(), Slice(), Slice(prefix)})
                  .reshape({batch * heads, layout.grid_h, layout.grid_w, dim})
                  .permute({0, 3, 1, 2});
  const int64_t padding = weight.size(-1) / 2;
  auto conv = F::conv2d(grid, weight, F::Conv2dFuncOptions().bias(bias).padding(padding).groups(dim));
  auto patches = conv.permute({0, 2, 3, 1}).reshape({batch, heads, layout.patch_tokens(), dim});
  if (prefix == 0) return patches;
  return torch::cat({torch::zeros({batch, heads, prefix, dim}, patches.options()), patches}, 2);
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
