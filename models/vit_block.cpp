// A ViT's block and its parts, as timm names them (norm1, attn, ls1, norm2, mlp, ls2; the MLP's
// activations and gates, the attention-pool head, L2ViT's local concentration), the patch embedding
// and the resizing of absolute positions. The model around them is models/vit.cpp.
#include "core/excerpt.h"
#include "models/cpu_threads.h"
#include "models/token_linear.h"
#include "models/vit.h"

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

const std::vector<EnumEntry<MlpActivation>>& EnumTable<MlpActivation>::entries() {
  static const std::vector<EnumEntry<MlpActivation>> table = {{MlpActivation::Gelu, "gelu"},
                                                              {MlpActivation::QuickGelu, "quick_gelu"},
                                                              {MlpActivation::GeluTanh, "gelu_tanh"},
                                                              {MlpActivation::Silu, "silu"}};
  return table;
}

MlpActivation parse_mlp_activation(const std::string& name) {
  for (const auto& entry : enum_entries<MlpActivation>())
    if (name == entry.name) return entry.value;
  // timm's and transformers' other names of the same functions.
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return MlpActivation::GeluTanh;
  if (name == "swish") return MlpActivation::Silu;
  throw std::invalid_argument("activation '" + excerpt(name) + "' is not one attnscope runs (" +
                              enum_choices_text<MlpActivation>() + ")");
}

const std::vector<EnumEntry<GlobalPool>>& EnumTable<GlobalPool>::entries() {
  static const std::vector<EnumEntry<GlobalPool>> table = {
      {GlobalPool::Token, "token"}, {GlobalPool::Average, "avg"}, {GlobalPool::AttentionPool, "map"}};
  return table;
}

torch::Tensor activate(const torch::Tensor& x, MlpActivation activation) {
  switch (activation) {
    case MlpActivation::Gelu:
      break;
    case MlpActivation::QuickGelu:
      return x * torch::sigmoid(1.702 * x);
    case MlpActivation::GeluTanh:
      return torch::gelu(x, "tanh");
    case MlpActivation::Silu:
      return torch::silu(x);
  }
  return torch::gelu(x);
}

MlpImpl::MlpImpl(int dim, int hidden, MlpActivation activation, MlpGate gate, bool with_norm, double eps)
    : activation(activation), gate(gate) {
  if (gate == MlpGate::Separate) {
    fc1_g = register_module("fc1_g", torch::nn::Linear(dim, hidden));
    fc1_x = register_module("fc1_x", torch::nn::Linear(dim, hidden));
  } else {
    fc1 = register_module("fc1", torch::nn::Linear(dim, gate == MlpGate::Packed ? 2 * hidden : hidden));
  }
  if (with_norm) norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden}).eps(eps)));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  torch::Tensor hidden;
  const auto activated = [this](const torch::Tensor& columns) { return activate(columns, activation); };
  if (gate == MlpGate::Separate) {
    hidden = token_linear(fc1_g, x, activated) * token_linear(fc1_x, x);
  } else if (gate == MlpGate::Packed) {
    auto halves = token_linear(fc1, x).chunk(2, -1);
    hidden = activate(halves[0], activation) * halves[1];
  } else {
    hidden = token_linear(fc1, x, activated);
  }
  if (!norm.is_empty()) hidden = norm(hidden);
  return token_linear(fc2, hidden);
}

AttentionPoolImpl::AttentionPoolImpl(int dim, const AttentionPoolArch& arch, double eps) : heads(arch.heads) {
  latent = register_parameter("latent", torch::zeros({1, 1, dim}));
  q = register_module("q", torch::nn::Linear(dim, dim));
  kv = register_module("kv", torch::nn::Linear(dim, 2 * dim));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps)));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden, arch.activation));
}

torch::Tensor AttentionPoolImpl::forward(const torch::Tensor& tokens, torch::Tensor* probabilities) {
  const int64_t batch = tokens.size(0), count = tokens.size(1), dim = tokens.size(2), head_dim = dim / heads;
  auto query = torch::nn::functional::linear(latent, q->weight, q->bias)
                   .expand({batch, 1, dim})
                   .reshape({batch, 1, heads, head_dim})
                   .transpose(1, 2);  // [B, h, 1, d]
  auto keys_values = token_linear(kv, tokens).reshape({batch, count, 2, heads, head_dim}).permute({2, 0, 3, 1, 4});
  auto scores = torch::matmul(query * (1.0 / std::sqrt(double(head_dim))), keys_values[0].transpose(-2, -1));
  // [B, h, N]: the values are weighed through this very tensor, so that a gradient can be taken
  // with respect to what `probabilities` receives (LeGrad's SigLIP maps).
  auto weights = torch::softmax(scores, -1).squeeze(2);
  if (probabilities) *probabilities = weights;
  auto pooled = torch::matmul(weights.unsqueeze(2), keys_values[1]).transpose(1, 2).reshape({batch, 1, dim});
  pooled = proj(pooled);
  pooled = pooled + mlp(norm(pooled));
  return pooled.select(1, 0);
}

ClassAttentionImpl::ClassAttentionImpl(int dim, int heads, bool qkv_bias) : heads(heads) {
  auto options = torch::nn::LinearOptions(dim, dim).bias(qkv_bias);
  q = register_module("q", torch::nn::Linear(options));
  k = register_module("k", torch::nn::Linear(options));
  v = register_module("v", torch::nn::Linear(options));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
}

torch::Tensor ClassAttentionImpl::forward(const torch::Tensor& tokens, torch::Tensor* probabilities) {
  const int64_t batch = tokens.size(0), count = tokens.size(1), dim = tokens.size(2), head_dim = dim / heads;
  auto query = q(tokens.narrow(1, 0, 1)).reshape({batch, 1, heads, head_dim}).transpose(1, 2);  // [B, h, 1, d]
  auto keys = token_linear(k, tokens).reshape({batch, count, heads, head_dim}).transpose(1, 2);
  auto values = token_linear(v, tokens).reshape({batch, count, heads, head_dim}).transpose(1, 2);
  auto weights = torch::softmax(torch::matmul(query * (1.0 / std::sqrt(double(head_dim))), keys.transpose(-2, -1)), -1);
  if (probabilities) *probabilities = weights.squeeze(2);
  return proj(torch::matmul(weights, values).transpose(1, 2).reshape({batch, 1, dim}));
}

ClassAttentionBlockImpl::ClassAttentionBlockImpl(int dim, int heads, const ClassAttentionArch& arch,
                                                 MlpActivation activation, double eps) {
  auto norm_options = torch::nn::LayerNormOptions({dim}).eps(eps);
  norm1 = register_module("norm1", torch::nn::LayerNorm(norm_options));
  attn = register_module("attn", ClassAttention(dim, heads, arch.qkv_bias));
  ls1 = register_module("ls1", LayerScale(dim));
  norm2 = register_module("norm2", torch::nn::LayerNorm(norm_options));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden, activation));
  ls2 = register_module("ls2", LayerScale(dim));
}

torch::Tensor ClassAttentionBlockImpl::forward(const torch::Tensor& patches, const torch::Tensor& cls,
                                               torch::Tensor* probabilities) {
  auto attended = cls + ls1(attn(norm1(torch::cat({cls, patches}, 1)), probabilities));
  return attended + ls2(mlp(norm2(attended)));
}

LocalConcentrationImpl::LocalConcentrationImpl(int dim) {
  auto depthwise = torch::nn::Conv2dOptions(dim, dim, 7).padding(3).groups(dim);
  conv1 = register_module("conv1", torch::nn::Conv2d(depthwise));
  bn = register_module("bn", torch::nn::BatchNorm2d(dim));
  conv2 = register_module("conv2", torch::nn::Conv2d(depthwise));
}

torch::Tensor LocalConcentrationImpl::forward(const torch::Tensor& tokens, const TokenLayout& layout) {
  const int64_t batch = tokens.size(0), dim = tokens.size(2), prefix = layout.prefix_tokens();
  auto grid =
      tokens.index({Slice(), Slice(prefix)}).transpose(1, 2).reshape({batch, dim, layout.grid_h, layout.grid_w});
  auto local = conv2(bn(torch::gelu(conv1(grid)))).flatten(2).transpose(1, 2);
  if (prefix == 0) return local;
  // Prefix tokens have no place on the grid: the module adds nothing to them.
  return torch::cat({torch::zeros({batch, prefix, dim}, local.options()), local}, 1);
}

BlockImpl::BlockImpl(const BlockArch& arch, double eps) {
  const int dim = arch.attention.dim;
  auto norm_options = torch::nn::LayerNormOptions({dim}).eps(eps);
  norm1 = register_module("norm1", torch::nn::LayerNorm(norm_options));
  AttentionArch attention = arch.attention;
  attention.norm_eps = eps;
  attn = register_module("attn", Attention(attention));
  if (arch.layer_scale) ls1 = register_module("ls1", LayerScale(dim));
  if (arch.local_concentration) {
    norm3 = register_module("norm3", torch::nn::LayerNorm(norm_options));
    local_mp = register_module("local_mp", LocalConcentration(dim));
  }
  norm2 = register_module("norm2", torch::nn::LayerNorm(norm_options));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden, arch.activation, arch.gate, arch.mlp_norm, eps));
  if (arch.layer_scale) ls2 = register_module("ls2", LayerScale(dim));
}

namespace {

// [rows, out_dim] from row_chunk(begin, end) -> [end - begin, out_dim], the chunks on all cores.
torch::Tensor by_row_chunks(int64_t rows, int64_t out_dim, const torch::TensorOptions& options,
                            const std::function<torch::Tensor(int64_t, int64_t)>& row_chunk) {
  auto out = torch::empty({rows, out_dim}, options);
  fill_by_row_chunks(out, 0, row_chunk);
  return out;
}

}  // namespace

torch::Tensor BlockImpl::forward_by_row_chunks(const torch::Tensor& x, const TokenLayout& layout,
                                               const AttentionSettings& settings, AttentionCapture* capture) {
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2), rows = batch * tokens;
  auto x_rows = x.reshape({rows, dim});
  torch::Tensor normed_rows = capture ? torch::empty_like(x_rows) : torch::Tensor();
  auto projected = by_row_chunks(rows, attn->projected_dim(), x.options(), [&](int64_t begin, int64_t end) {
    auto normed = norm1(x_rows.narrow(0, begin, end - begin));
    if (capture) normed_rows.narrow(0, begin, end - begin).copy_(normed);
    return attn->project_input(normed);
  });
  if (capture) capture->normed_input = normed_rows.view({batch, tokens, dim});
  auto merged = attn->mix(projected.view({batch, tokens, -1}), layout, settings, capture).reshape({rows, dim});
  auto attended_rows = [&](int64_t begin, int64_t end) {
    auto attended = attn->project_output(merged.narrow(0, begin, end - begin));
    if (!ls1.is_empty()) attended = ls1(attended);
    return x_rows.narrow(0, begin, end - begin) + attended;
  };
  auto mlp_rows = [&](const torch::Tensor& out) {
    auto mlp_out = mlp(norm2(out));
    if (!ls2.is_empty()) mlp_out = ls2(mlp_out);
    return out + mlp_out;
  };
  torch::Tensor result;
  if (local_mp.is_empty()) {
    result = by_row_chunks(rows, dim, x.options(),
                           [&](int64_t begin, int64_t end) { return mlp_rows(attended_rows(begin, end)); });
  } else {
    // L2ViT's local concentration module convolves over the grid: it runs between two chunked stages.
    auto out = by_row_chunks(rows, dim, x.options(), attended_rows).view({batch, tokens, dim});
    auto concentrated = (out + local_mp(norm3(out), layout)).reshape({rows, dim});
    result = by_row_chunks(rows, dim, x.options(), [&](int64_t begin, int64_t end) {
      return mlp_rows(concentrated.narrow(0, begin, end - begin));
    });
  }
  return result.view({batch, tokens, dim});
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                                 AttentionCapture* capture,
                                 const std::function<void(const char*, torch::Tensor&)>& hook,
                                 const std::function<void(torch::Tensor&)>& probabilities_hook) {
  // Where every linear layer splits its output columns across the cores (token_linear: up to about
  // a thousand tokens, and fc2's output, the narrowest, wide enough) the plain path below is
  // faster than whole row chunks on each core: DeiT-S 52 against 57 ms a forward, ViT-B/16 about
  // 15 % less (docs/speed.md, "Linear layers split by columns").
  if (!hook && !probabilities_hook && cpu_inference(x) && configured_threads() > 1 && !attn->mixes_with_input() &&
      !splits_by_columns(x.size(0) * x.size(1), x, mlp->fc2->weight))
    return forward_by_row_chunks(x, layout, settings, capture);
  auto normed = norm1(x);
  if (hook) hook("norm1", normed);
  if (capture) capture->normed_input = normed;
  auto attended = attn(normed, layout, settings, capture, probabilities_hook);
  if (!ls1.is_empty()) attended = ls1(attended);
  auto out = x + attended;
  if (!local_mp.is_empty()) out = out + local_mp(norm3(out), layout);
  auto normed_out = norm2(out);
  if (hook) hook("norm2", normed_out);
  auto mlp_out = mlp(normed_out);
  if (!ls2.is_empty()) mlp_out = ls2(mlp_out);
  auto result = out + mlp_out;
  if (hook) hook("", result);
  return result;
}

torch::Tensor BlockImpl::forward_streams(const torch::Tensor& x, const TokenLayout& layout,
                                         const AttentionSettings& settings, AttentionCapture* capture,
                                         BlockStreams& streams,
                                         const std::function<void(const char*, torch::Tensor&)>& hook,
                                         const std::function<void(torch::Tensor&)>& probabilities_hook) {
  auto normed = norm1(x);
  if (hook) hook("norm1", normed);
  if (capture) capture->normed_input = normed;
  auto transformed = [&streams](StreamSite site, torch::Tensor value) {
    for (const StreamTransform* transform : streams.transforms)
      if (transform->point.site == site) value = transform->apply(value);
    return value;
  };
  auto attended = attn->forward_with_heads(normed, layout, settings, capture, streams.heads, probabilities_hook);
  if (!ls1.is_empty()) attended = ls1(attended);
  attended = transformed(StreamSite::AttnOut, attended);
  auto out = x + attended;
  torch::Tensor local;
  if (!local_mp.is_empty()) {
    local = local_mp(norm3(out), layout);
    out = out + local;
  }
  out = transformed(StreamSite::ResidMid, out);
  auto normed_out = norm2(out);
  if (hook) hook("norm2", normed_out);
  auto mlp_out = mlp(normed_out);
  if (!ls2.is_empty()) mlp_out = ls2(mlp_out);
  mlp_out = transformed(StreamSite::MlpOut, mlp_out);
  auto result = out + mlp_out;
  if (hook) hook("", result);
  if (streams.record_outputs) {
    streams.attn_out = attended;
    streams.local_out = local;
    streams.mlp_out = mlp_out;
  }
  return result;
}

torch::Tensor BlockImpl::value_bias() const {
  auto bias = torch::mv(attn->value_weight(), norm1->bias);
  if (const torch::Tensor own = attn->value_projection_bias(); own.defined()) bias = bias + own;
  return bias;
}

PatchEmbedImpl::PatchEmbedImpl(int in_chans, int dim, int patch, bool bias) {
  proj = register_module("proj",
                         torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, dim, patch).stride(patch).bias(bias)));
}

torch::Tensor resize_patch_positions(const torch::Tensor& patch_positions, int from_h, int from_w, int to_h, int to_w,
                                     const PositionInterpolation& how) {
  if (from_h == to_h && from_w == to_w) return patch_positions;
  const int64_t dim = patch_positions.size(-1);
  auto grid = patch_positions.reshape({1, from_h, from_w, dim}).permute({0, 3, 1, 2}).to(torch::kFloat);
  torch::Tensor resized;
  if (how.offset != 0.0) {
    // DINOv2: the scale factor (not the size) sets where each output cell samples.
    // As F.interpolate(scale_factor=...) calls it: the output size is floor(grid * scale).
    const std::vector<double> scales{(to_h + how.offset) / from_h, (to_w + how.offset) / from_w};
    resized = how.antialias ? at::_upsample_bicubic2d_aa(grid, c10::nullopt, false, scales)
                            : at::upsample_bicubic2d(grid, c10::nullopt, false, scales);
    if (resized.size(2) != to_h || resized.size(3) != to_w)
      throw std::invalid_argument("position interpolation with offset " + std::to_string(how.offset) +
                                  " does not reach the " + std::to_string(to_h) + "x" + std::to_string(to_w) + " grid");
  } else {
    resized = F::interpolate(grid, F::InterpolateFuncOptions()
                                       .size(std::vector<int64_t>{to_h, to_w})
                                       .mode(torch::kBicubic)
                                       .align_corners(false)
                                       .antialias(how.antialias));
  }
  return resized.permute({0, 2, 3, 1}).reshape({1, int64_t(to_h) * to_w, dim}).to(patch_positions.dtype());
}

}  // namespace attnscope
