#include "models/attention.h"

#include "models/attention_kernels_successors.h"
#include "models/local_attention.h"
#include "models/token_linear.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>

namespace attnscope {

using torch::indexing::Slice;

AttentionImpl::AttentionImpl(const AttentionArch& arch) : arch_(arch) {
  const int dim = arch.dim;
  const int head_dim = dim / arch.heads;
  if (arch.native == NativeAttention::Anchor) {
    x_to_emb = register_module("x_to_emb", torch::nn::Linear(torch::nn::LinearOptions(dim, 2 * dim).bias(false)));
    dist_anchor_B = register_module("dist_anchor_B",
                                    torch::nn::Linear(torch::nn::LinearOptions(head_dim, arch.anchors).bias(false)));
    to_out_linear = torch::nn::Linear(dim, dim);
    to_out = register_module("to_out", torch::nn::Sequential(to_out_linear));
    return;
  }
  switch (arch.qkv_layout) {
    case QkvLayout::Fused:
      qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(arch.qkv_bias)));
      break;
    case QkvLayout::FusedQvBias:
      qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(false)));
      q_bias = register_parameter("q_bias", torch::zeros({dim}));
      v_bias = register_parameter("v_bias", torch::zeros({dim}));
      break;
    case QkvLayout::Separate:
      q_proj = register_module("q_proj", torch::nn::Linear(torch::nn::LinearOptions(dim, dim).bias(arch.qkv_bias)));
      k_proj = register_module("k_proj", torch::nn::Linear(torch::nn::LinearOptions(dim, dim).bias(arch.k_bias)));
      v_proj = register_module("v_proj", torch::nn::Linear(torch::nn::LinearOptions(dim, dim).bias(arch.qkv_bias)));
      break;
  }
  if (arch.qk_norm) {
    q_norm =
        register_module("q_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({head_dim}).eps(arch.norm_eps)));
    k_norm =
        register_module("k_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({head_dim}).eps(arch.norm_eps)));
  }
  if (arch.inner_norm)
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(arch.norm_eps)));
  if (arch.relative_bias_grid_h > 0) {
    const int64_t distances = int64_t(2 * arch.relative_bias_grid_h - 1) * (2 * arch.relative_bias_grid_w - 1) + 3;
    relative_position_bias_table =
        register_parameter("relative_position_bias_table", torch::zeros({distances, int64_t(arch.heads)}));
  }
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  if (arch.talking_heads) {
    proj_l = register_module("proj_l", torch::nn::Linear(arch.heads, arch.heads));
    proj_w = register_module("proj_w", torch::nn::Linear(arch.heads, arch.heads));
  }
  if (arch.native == NativeAttention::Focused) {
    if (arch.dwc_kernel > 0)
      dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(head_dim, head_dim, arch.dwc_kernel)
                                                         .groups(head_dim)
                                                         .padding(arch.dwc_kernel / 2)));
    if (arch.has_scale) scale = register_parameter("scale", torch::zeros({1, 1, dim}));
    if (arch.positional_encoding_tokens > 0)
      positional_encoding =
          register_parameter("positional_encoding", torch::zeros({1, arch.positional_encoding_tokens, dim}));
  }
  if (arch.native == NativeAttention::Agent) {
    const int64_t heads = arch.heads, agents = arch.agents, side = arch.agent_grid;
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).groups(dim).padding(1)));
    agent_biases = successor_kernels::register_agent_biases(*this, heads, agents, side);
    agent_biases.ac = register_parameter("ac_bias", torch::zeros({1, heads, agents, 1}));
    agent_biases.ca = register_parameter("ca_bias", torch::zeros({1, heads, 1, agents}));
  }
  if (arch.inline_residual) {
    residual = register_module("residual", successor_kernels::inline_residual_predictor(dim, arch.heads));
  }
  if (arch.native == NativeAttention::Enhanced)
    temperature = register_parameter("temperature", torch::full({arch.heads, 1, 1}, 1.0 / std::sqrt(head_dim)));
}

ResolvedAttention AttentionImpl::resolve(const AttentionSettings& settings, const TokenLayout& layout) const {
  ResolvedAttention resolved = resolve_for_layer(settings, arch_.native, kernel_parameters(),
                                                 !dwc.is_empty() || !residual.is_empty(), layout.patch_tokens());
  resolved.window = settings.window;
  if (settings.variant == Variant::Window && resolved.window <= 0) resolved.window = kDefaultWindow;
  if (kernel_spec(resolved.kernel).global_only) resolved.window = 0;  // e.g. anchors
  // A window that covers the whole grid is global attention.
  if (resolved.window >= layout.grid_h && resolved.window >= layout.grid_w) resolved.window = 0;
  return resolved;
}

KernelParameters AttentionImpl::kernel_parameters() const {
  KernelParameters parameters;
  parameters.scale = scale;
  parameters.positional_encoding = positional_encoding;
  parameters.temperature = temperature;
  if (!dist_anchor_B.is_empty()) parameters.anchors = dist_anchor_B->weight;
  parameters.learned_agents = arch_.native == NativeAttention::Agent ? arch_.agents : 0;
  return parameters;
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const TokenLayout& layout,
                                     const AttentionSettings& settings, AttentionCapture* capture,
                                     const std::function<void(torch::Tensor&)>& probabilities_hook) {
  return project_output(mix(project_input(x), layout, settings, capture, probabilities_hook, x));
}

torch::Tensor AttentionImpl::project_input(const torch::Tensor& x) {
  if (arch_.native == NativeAttention::Anchor) return token_linear(x_to_emb, x);
  switch (arch_.qkv_layout) {
    case QkvLayout::Fused:
      break;
    case QkvLayout::FusedQvBias:
      // EVA: F.linear(x, qkv.weight, cat(q_bias, 0, v_bias)).
      return token_linear(qkv->weight, torch::cat({q_bias, torch::zeros_like(q_bias), v_bias}), x);
    case QkvLayout::Separate:
      return torch::cat({token_linear(q_proj, x), token_linear(k_proj, x), token_linear(v_proj, x)}, -1);
  }
  return token_linear(qkv, x);
}

torch::Tensor AttentionImpl::project_output(const torch::Tensor& merged) {
  if (arch_.native == NativeAttention::Anchor) return token_linear(to_out_linear, merged);
  return token_linear(proj, norm.is_empty() ? merged : norm(merged));
}

namespace {

// Under cpu_inference the forward runs its small ops on one core (models/cpu_threads.h); a layer's
// kernel features and attention over this many values or more run on all: FLatten's f_p (powers
// and norms over T x C) at 5,477 tokens took about a second of a 3.5 s forward on one core, where a
// wake-up of the other costs about a layer norm of DeiT's size.
constexpr int64_t kAllCoresValues = int64_t(1) << 18;

bool large_inference(const torch::Tensor& x) { return cpu_inference(x) && x.numel() >= kAllCoresValues; }

}  // namespace

AttentionImpl::MixInputs AttentionImpl::prepare_mix(const torch::Tensor& projected, const TokenLayout& layout,
                                                    const AttentionSettings& settings, bool capture,
                                                    bool explicit_matrix, const torch::Tensor& input) const {
  const int heads = arch_.heads;
  const int64_t parts = arch_.native == NativeAttention::Anchor ? 2 : 3;
  MixInputs inputs;
  inputs.batch = projected.size(0);
  inputs.tokens = projected.size(1);
  inputs.dim = projected.size(2) / parts;
  inputs.head_dim = inputs.dim / heads;
  auto split = projected.view({inputs.batch, inputs.tokens, parts, heads, inputs.head_dim}).permute({2, 0, 3, 1, 4});
  inputs.q = split[0];
  if (arch_.native == NativeAttention::Anchor) {
    inputs.k = inputs.q;  // AnchorFormer shares one projection for queries and keys
    inputs.v = split[1];
  } else {
    inputs.k = split[1];
    inputs.v = split[2];
  }
  if (!q_norm.is_empty()) {
    inputs.q = torch::layer_norm(inputs.q, {inputs.head_dim}, q_norm->weight, q_norm->bias, arch_.norm_eps);
    inputs.k = torch::layer_norm(inputs.k, {inputs.head_dim}, k_norm->weight, k_norm->bias, arch_.norm_eps);
  }
  if (arch_.rope.enabled()) {
    // The model's own positions, before any kernel sees q and k: a swapped kernel acts on the
    // rotated queries and keys, as the model's softmax does.
    const auto table = rotary_table(arch_.rope, layout.grid_h, layout.grid_w, inputs.head_dim, projected.device());
    inputs.q = apply_rotary(inputs.q, table, layout.prefix_tokens(), arch_.rope.rotate_half);
    inputs.k = apply_rotary(inputs.k, table, layout.prefix_tokens(), arch_.rope.rotate_half);
  }
  inputs.resolved = resolve(settings, layout);
  if (arch_.talking_heads && (inputs.resolved.kernel != Kernel::Softmax || inputs.resolved.window > 0))
    throw std::invalid_argument(
        "CaiT's talking heads mix every head's softmax scores over all tokens (proj_l before the softmax, proj_w "
        "after it): another kernel or a window has no such scores to mix; run its native attention");
  std::optional<ScopedThreads> all_cores;
  if (large_inference(projected)) all_cores.emplace(configured_threads());
  KernelParameters& parameters = inputs.parameters;
  parameters = kernel_parameters();
  if (inputs.resolved.learned_agent_bias)
    successor_kernels::add_agent_position_biases(agent_biases, layout, parameters);
  inputs.features = kernel_features(inputs.resolved, inputs.q, inputs.k, parameters, layout);
  if (inputs.resolved.dwc && !residual.is_empty()) {
    // inline_deit: residual(x.mean(dim=1).unsqueeze(-1)).reshape(b * c, 1, 3, 3).
    if (!input.defined()) throw std::logic_error("InLine's residual needs the attention's input");
    torch::nn::Sequential predictor = residual;  // a holder of the same module, callable here
    inputs.local_kernels =
        predictor->forward(input.mean(1).unsqueeze(-1)).reshape({inputs.batch * inputs.dim, 1, 3, 3});
  }
  // Window by window needs no T x T mask (at 5,477 tokens building it took 180 ms a layer).
  if (relative_position_bias_table.defined() && kernel_spec(inputs.resolved.kernel).takes_additive)
    inputs.additive = relative_position_bias(layout);
  inputs.by_windows = !inputs.additive.defined() && !explicit_matrix && !arch_.talking_heads &&
                      cpu_inference(projected) && window_keys_pay(layout, inputs.resolved.window);
  if (!inputs.by_windows) inputs.allowed = window_mask(layout, inputs.resolved.window, projected.device());
  // Kernels that normalise rows by a log-sum-exp (softmax) over all keys leave it here; the others
  // leave it undefined.
  if (capture && inputs.resolved.window <= 0 && !arch_.talking_heads)
    inputs.features.row_log_normalizer = std::make_shared<torch::Tensor>();
  return inputs;
}

torch::Tensor TalkingHeads::probabilities(const torch::Tensor& q, const torch::Tensor& k) const {
  auto scores = torch::matmul(q * (1.0 / std::sqrt(double(q.size(-1)))), k.transpose(-2, -1));  // [B, h, Q, T]
  auto mixed = torch::nn::functional::linear(scores.permute({0, 2, 3, 1}), pre_weight, pre_bias);
  auto weights = torch::softmax(mixed, 2);  // over the keys: [B, Q, T, h]
  return torch::nn::functional::linear(weights, post_weight, post_bias).permute({0, 3, 1, 2});
}

TalkingHeads AttentionImpl::talking_heads() const {
  if (!arch_.talking_heads) return {};
  return {proj_l->weight, proj_l->bias, proj_w->weight, proj_w->bias};
}

torch::Tensor AttentionImpl::explicit_probabilities(const MixInputs& inputs) const {
  if (arch_.talking_heads) return talking_heads().probabilities(inputs.q, inputs.k);
  auto all_queries = torch::arange(inputs.tokens, torch::TensorOptions().dtype(torch::kLong).device(inputs.q.device()));
  return equivalent_rows(inputs.resolved.kernel, inputs.features, all_queries, inputs.allowed, inputs.additive);
}

torch::Tensor AttentionImpl::attend_values(const MixInputs& inputs, const KernelFeatures& features,
                                           const torch::Tensor& v, const torch::Tensor& probabilities,
                                           const torch::Tensor& dwc_bias, const TokenLayout& layout) const {
  std::optional<ScopedThreads> all_cores;
  if (large_inference(v)) all_cores.emplace(configured_threads());
  torch::Tensor out;
  if (probabilities.defined())
    out = torch::matmul(probabilities, v);
  else if (inputs.by_windows)
    out = attend_in_windows(inputs.resolved.kernel, features, v, layout, inputs.resolved.window);
  else
    out = attend(inputs.resolved.kernel, features, v, inputs.allowed, inputs.additive);
  if (inputs.resolved.dwc)
    out = out + (inputs.local_kernels.defined() ? depthwise_conv_per_item(v, inputs.local_kernels, layout)
                                                : depthwise_conv_on_values(v, dwc->weight, dwc_bias, layout));
  return out;
}

void AttentionImpl::fill_capture(const MixInputs& inputs, const TokenLayout& layout, AttentionCapture& capture) const {
  capture.attention = inputs.resolved;
  capture.layout = layout;
  capture.key_layout = layout;
  capture.heads = arch_.heads;
  capture.head_dim = int(inputs.head_dim);
  capture.q = inputs.q.detach();
  capture.k = inputs.k.detach();
  capture.v = inputs.v.detach();
  capture.features = inputs.features.detached();
  capture.parameters = inputs.parameters.detached();
  if (inputs.features.row_log_normalizer && inputs.features.row_log_normalizer->defined())
    capture.row_log_normalizer = inputs.features.row_log_normalizer->view({inputs.batch, arch_.heads, inputs.tokens});
  if (inputs.resolved.dwc)
    capture.dwc_weight = inputs.local_kernels.defined() ? inputs.local_kernels.detach() : dwc->weight.detach();
  if (inputs.additive.defined()) capture.additive = inputs.additive.detach();
  if (arch_.talking_heads) {
    const TalkingHeads mixes = talking_heads();
    capture.talking_heads = {mixes.pre_weight.detach(), mixes.pre_bias.detach(), mixes.post_weight.detach(),
                             mixes.post_bias.detach()};
  }
}

torch::Tensor AttentionImpl::relative_position_bias(const TokenLayout& layout) const {
  const int grid_h = arch_.relative_bias_grid_h, grid_w = arch_.relative_bias_grid_w;
  if (layout.grid_h != grid_h || layout.grid_w != grid_w || layout.prefix_tokens() != 1)
    throw std::invalid_argument("BEiT's relative position bias was trained for a " + std::to_string(grid_h) + "x" +
                                std::to_string(grid_w) + " grid with one class token; this input gives " +
                                std::to_string(layout.grid_h) + "x" + std::to_string(layout.grid_w) +
                                ": give the model its trained size (" + std::to_string(grid_h * layout.patch_size) +
                                "x" + std::to_string(grid_w * layout.patch_size) + ")");
  // timm's gen_relative_position_index: Swin's index between patches, then three entries for
  // class to token, token to class and class to class.
  const int64_t area = int64_t(grid_h) * grid_w, distances = int64_t(2 * grid_h - 1) * (2 * grid_w - 1) + 3;
  auto index = torch::empty({area + 1, area + 1}, torch::kLong);
  index.index_put_({Slice(1), Slice(1)}, relative_position_index(grid_h, grid_w));
  index.index_put_({0, Slice()}, distances - 3);
  index.index_put_({Slice(), 0}, distances - 2);
  index.index_put_({0, 0}, distances - 1);
  const auto& table = relative_position_bias_table;
  return table.index_select(0, index.view(-1).to(table.device()))
      .view({area + 1, area + 1, -1})
      .permute({2, 0, 1})
      .unsqueeze(0);
}

torch::Tensor AttentionImpl::mix(const torch::Tensor& projected, const TokenLayout& layout,
                                 const AttentionSettings& settings, AttentionCapture* capture,
                                 const std::function<void(torch::Tensor&)>& probabilities_hook,
                                 const torch::Tensor& input) {
  const MixInputs inputs =
      prepare_mix(projected, layout, settings, capture != nullptr, bool(probabilities_hook), input);
  torch::Tensor probabilities;
  if (probabilities_hook || arch_.talking_heads) {
    // The explicit matrix, so that the hook sees (and autograd differentiates) what the output uses.
    probabilities = explicit_probabilities(inputs);
    if (probabilities_hook) probabilities_hook(probabilities);
  }
  const torch::Tensor dwc_bias = inputs.resolved.dwc && !dwc.is_empty() ? dwc->bias : torch::Tensor();
  auto out = attend_values(inputs, inputs.features, inputs.v, probabilities, dwc_bias, layout);
  auto merged = out.transpose(1, 2).reshape({inputs.batch, inputs.tokens, inputs.dim});
  if (capture) fill_capture(inputs, layout, *capture);
  return merged;
}

torch::Tensor AttentionImpl::forward_with_heads(const torch::Tensor& x, const TokenLayout& layout,
                                                const AttentionSettings& settings, AttentionCapture* capture,
                                                HeadStreams& streams,
                                                const std::function<void(torch::Tensor&)>& probabilities_hook) {
  const MixInputs inputs =
      prepare_mix(project_input(x), layout, settings, capture != nullptr, bool(probabilities_hook), x);
  torch::Tensor probabilities;
  if (probabilities_hook || arch_.talking_heads) {
    probabilities = explicit_probabilities(inputs);
    if (probabilities_hook) probabilities_hook(probabilities);
  }
  const torch::Tensor dwc_bias = inputs.resolved.dwc && !dwc.is_empty() ? dwc->bias : torch::Tensor();
  // The layer's own output first, exactly as mix computes it.
  auto out = attend_values(inputs, inputs.features, inputs.v, probabilities, dwc_bias, layout);
  // z: the same weights on the bias-free values, the DWC without its bias. For softmax (rows sum to
  // one) out - z is the value bias itself; for kernels whose rows do not sum to one (the linear
  // family's +1e-6, L2ViT's clamp) and for FLatten's DWC (zero padding at the border) it varies by
  // token, and is by definition what the biases contribute: the decomposition stays exact.
  const auto value_bias =
      streams.value_bias.to(inputs.v.device(), inputs.v.dtype()).view({1, arch_.heads, 1, inputs.head_dim});
  KernelFeatures free_features = inputs.features;
  free_features.row_log_normalizer = nullptr;  // the capture's normaliser comes from the first attend
  auto z = attend_values(inputs, free_features, inputs.v - value_bias, probabilities, torch::Tensor(), layout);
  for (const auto& [head, replacement] : streams.replacements) {
    auto new_z = replacement.defined() ? replacement.to(z.device(), z.dtype()).expand_as(z.select(1, head))
                                       : torch::zeros_like(z.select(1, head));
    // The head's share of the biases stays; its bias-free part is swapped.
    out.select(1, head).copy_(out.select(1, head) - z.select(1, head) + new_z);
    z.select(1, head).copy_(new_z);
  }
  if (streams.record) streams.z = z;
  auto merged = out.transpose(1, 2).reshape({inputs.batch, inputs.tokens, inputs.dim});
  if (capture) fill_capture(inputs, layout, *capture);
  return project_output(merged);
}

torch::Tensor AttentionImpl::value_weight() const {
  const int64_t dim = arch_.dim;
  if (arch_.native == NativeAttention::Anchor) return x_to_emb->weight.narrow(0, dim, dim);
  if (!v_proj.is_empty()) return v_proj->weight;
  return qkv->weight.narrow(0, 2 * dim, dim);
}

torch::Tensor AttentionImpl::value_projection_bias() const {
  if (arch_.native == NativeAttention::Anchor) return {};
  if (!v_proj.is_empty()) return v_proj->bias;
  if (v_bias.defined()) return v_bias;
  if (!qkv->bias.defined()) return {};
  return qkv->bias.narrow(0, 2 * int64_t(arch_.dim), arch_.dim);
}

torch::Tensor AttentionImpl::output_weight() const {
  if (!norm.is_empty())
    throw std::invalid_argument(
        "the attention normalises all heads together before its output projection (attn.norm, EVA's "
        "scale_attn_inner): its output is not a sum of one term per head, so per-head contributions are not "
        "defined for this model");
  return arch_.native == NativeAttention::Anchor ? to_out_linear->weight : proj->weight;
}

namespace {

// One head of one batch item (or group) of captured features; per-head parameters with a batch
// dimension of 1 (L2ViT's temperature) broadcast.
KernelFeatures one_head_features(const KernelFeatures& features, int64_t item, int64_t head) {
  return features.transformed([&](const torch::Tensor& t) {
    if (t.dim() < 4) return t;  // a scalar temperature
    const int64_t index = t.size(0) == 1 ? 0 : item;
    return t.index({Slice(index, index + 1), Slice(head, head + 1)});
  });
}

// Refuses a head or a query token the layer does not have (std::out_of_range), before any row is read.
void check_rows_request(const TokenLayout& layout, int heads, int64_t head, const std::vector<int64_t>& queries) {
  const int64_t total = layout.total_tokens();
  for (int64_t query : queries)
    if (query < 0 || query >= total)
      throw std::out_of_range("query token " + std::to_string(query) + " is outside 0.." + std::to_string(total - 1));
  if (head < 0 || head >= heads) throw std::out_of_range("head " + std::to_string(head) + " does not exist");
}

// Row `index` of a [1 or n, ...] tensor.
torch::Tensor broadcast_select(const torch::Tensor& t, int64_t index) { return t[t.size(0) == 1 ? 0 : index]; }

}  // namespace

const AttentionCapture& AttentionCapture::for_head(int64_t& head) const {
  if (branches.empty()) return *this;
  if (head < 0 || head >= heads) throw std::out_of_range("head " + std::to_string(head) + " does not exist");
  size_t branch = branches.size() - 1;
  while (branch > 0 && head < branch_first_head[branch]) --branch;
  head -= branch_first_head[branch];
  return branches[branch];
}

torch::Tensor AttentionCapture::second_rows(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const {
  if (!branches.empty()) {
    const AttentionCapture& branch = for_head(head);
    return branch.second_rows(batch, head, queries);
  }
  const KernelSpec& spec = kernel_spec(attention.kernel);
  if (!spec.second_rows || probabilities.defined() || query_slots.defined())
    throw std::invalid_argument(std::string("the ") + spec.name + " attention computes one matrix per head");
  torch::NoGradGuard no_grad;
  check_rows_request(layout, heads, head, queries);
  auto query_index = torch::tensor(queries, torch::TensorOptions().dtype(torch::kLong)).to(features.q.device());
  return spec.second_rows(spec, one_head_features(features, batch, head), query_index)[0][0];
}

torch::Tensor AttentionCapture::rows(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const {
  if (!branches.empty()) {
    const AttentionCapture& branch = for_head(head);
    return branch.rows(batch, head, queries);
  }
  torch::NoGradGuard no_grad;
  check_rows_request(layout, heads, head, queries);
  const int64_t total = layout.total_tokens();
  if (probabilities.defined())
    return probabilities[batch][head].index_select(0, torch::tensor(queries).to(probabilities.device()));
  if (talking_heads.defined()) {  // every head's scores of these queries, mixed as the forward mixes them
    auto query_index = torch::tensor(queries, torch::TensorOptions().dtype(torch::kLong)).to(q.device());
    return talking_heads.probabilities(q[batch].index_select(1, query_index).unsqueeze(0),
                                       k[batch].unsqueeze(0))[0][head];
  }
  auto device = features.q.device();
  auto query_index = torch::tensor(queries, torch::TensorOptions().dtype(torch::kLong)).to(device);
  if (!query_slots.defined()) {
    const auto allowed = window_mask(layout, attention.window, device, query_index);
    torch::Tensor bias;  // BEiT's relative position bias, for the kernels that take it
    if (additive.defined() && kernel_spec(attention.kernel).takes_additive)
      bias = broadcast_select(broadcast_select(additive, 0), head).index_select(0, query_index);
    auto result =
        equivalent_rows(attention.kernel, one_head_features(features, batch, head), query_index, allowed, bias)[0][0];
    return result;
  }

  // Grouped: each query is scored against the keys of its own group, then placed among all keys.
  const int64_t group_count = query_slots.size(0), group_queries = query_slots.size(1);
  const auto slots = query_slots.to(torch::kCPU).contiguous();
  std::vector<int64_t> slot_of_token(size_t(total), -1);
  const int64_t* slot_tokens = slots.data_ptr<int64_t>();
  for (int64_t slot = 0; slot < slots.numel(); ++slot)
    if (slot_tokens[slot] >= 0) slot_of_token[size_t(slot_tokens[slot])] = slot;
  std::vector<std::vector<int64_t>> positions(static_cast<size_t>(group_count)),
      group_slots(static_cast<size_t>(group_count));
  for (size_t i = 0; i < queries.size(); ++i) {
    const int64_t slot = slot_of_token[size_t(queries[i])];
    if (slot < 0) throw std::logic_error("query token " + std::to_string(queries[i]) + " is in no group");
    positions[size_t(slot / group_queries)].push_back(int64_t(i));
    group_slots[size_t(slot / group_queries)].push_back(slot % group_queries);
  }
  auto result = torch::zeros({int64_t(queries.size()), int64_t(key_layout.total_tokens())}, features.q.options());
  auto long_options = torch::TensorOptions().dtype(torch::kLong).device(device);
  const KernelSpec& kernel = kernel_spec(attention.kernel);
  for (int64_t group = 0; group < group_count; ++group) {
    if (positions[size_t(group)].empty()) continue;
    auto slot_index = torch::tensor(group_slots[size_t(group)], long_options);
    torch::Tensor allowed, bias;
    // The forward's masking: a kernel that takes the additive gets the shift mask through it.
    if (forbidden.defined() && !kernel.takes_additive && !kernel.global_only)
      allowed = broadcast_select(forbidden, group).index_select(0, slot_index).logical_not();
    if (additive.defined() && kernel.takes_additive)
      bias = broadcast_select(broadcast_select(additive, group), head).index_select(0, slot_index);
    const auto group_rows =
        equivalent_rows(attention.kernel, one_head_features(features, batch * group_count + group, head), slot_index,
                        allowed, bias)[0][0];  // [Q_g, Sk]
    auto keys = key_slots[group].to(device);
    auto real = keys.ge(0);
    auto placed = torch::zeros({group_rows.size(0), result.size(1)}, result.options());
    placed.index_copy_(1, keys.masked_select(real), group_rows.index({Slice(), real}));
    result.index_copy_(0, torch::tensor(positions[size_t(group)], long_options), placed);
  }
  return result;
}

torch::Tensor AttentionCapture::dwc_band(const std::vector<int64_t>& queries) const {
  auto device = dwc_weight.device();
  auto query_index = torch::tensor(queries, torch::TensorOptions().dtype(torch::kLong)).to(device);
  auto band = depthwise_conv_band(dwc_weight, layout, query_index);  // [Q, Tq] over the query grid
  if (value_resampling.defined()) return torch::matmul(band, value_resampling.to(band.device()));
  if (!query_slots.defined()) return band;
  // The DWC runs inside each group (zero padding at its border): its band keeps the group's keys.
  auto group_of_key = torch::full({int64_t(key_layout.total_tokens())}, -1, torch::kLong);
  auto group_of_query = torch::full({int64_t(layout.total_tokens())}, -1, torch::kLong);
  const auto key_table = key_slots.to(torch::kCPU), query_table = query_slots.to(torch::kCPU);
  for (int64_t group = 0; group < key_table.size(0); ++group) {
    auto keys = key_table[group], members = query_table[group];
    group_of_key.index_fill_(0, keys.masked_select(keys.ge(0)), group);
    group_of_query.index_fill_(0, members.masked_select(members.ge(0)), group);
  }
  auto same_group =
      group_of_query.index_select(0, query_index.to(torch::kCPU)).unsqueeze(1) == group_of_key.unsqueeze(0);
  return band * same_group.to(band.device(), band.scalar_type());
}

torch::Tensor AttentionCapture::lcm_mixing_rows(const std::vector<int64_t>& queries) const {
  if (!has_lcm()) throw std::logic_error("layer " + placement.name + " has no LCM");
  namespace F = torch::nn::functional;
  torch::NoGradGuard no_grad;
  const int64_t channels = lcm_conv1.size(0), count = int64_t(queries.size());
  const int64_t padding = lcm_conv1.size(-1) / 2;
  // Row q of C_conv is the adjoint (transposed convolutions, in reverse order) applied to a delta
  // at q, averaged over the channels.
  const int64_t tokens = int64_t(layout.grid_h) * layout.grid_w;
  auto result = torch::empty({count, tokens}, lcm_conv1.options());
  auto options = F::ConvTranspose2dFuncOptions().padding(padding).groups(channels);
  // Chunks of queries keep the [Q, C, H, W] deltas near 16M values (a whole matrix at stage 0 of a
  // 224 input would otherwise take gigabytes).
  const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 24) / std::max<int64_t>(1, channels * tokens));
  for (int64_t begin = 0; begin < count; begin += chunk) {
    const int64_t end = std::min(count, begin + chunk);
    auto delta = torch::zeros({end - begin, channels, layout.grid_h, layout.grid_w}, lcm_conv1.options());
    for (int64_t i = begin; i < end; ++i) {
      const int64_t token = queries[size_t(i)];
      if (!layout.is_patch(int(token)))
        throw std::out_of_range("query token " + std::to_string(token) + " is not on the grid");
      delta.index_put_({i - begin, Slice(), layout.row_of(int(token)), layout.col_of(int(token))}, 1.0);
    }
    auto mixed = F::conv_transpose2d(delta, lcm_conv2, options) * lcm_gain.view({1, -1, 1, 1});
    mixed = F::conv_transpose2d(mixed, lcm_conv1, options);
    result.narrow(0, begin, end - begin).copy_(mixed.mean(1).reshape({end - begin, tokens}));
  }
  return result;
}

torch::Tensor AttentionCapture::rows_after_lcm(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const {
  const torch::Tensor mixing = lcm_mixing_rows(queries).to(torch::kCPU, torch::kDouble);  // [Q, Tq]
  // The two convolutions reach a (2k - 1)^2 neighbourhood: only those rows of A are needed.
  const torch::Tensor support = mixing.ne(0).any(0).nonzero().view({-1});
  std::vector<int64_t> tokens(support.data_ptr<int64_t>(), support.data_ptr<int64_t>() + support.numel());
  const torch::Tensor attention_rows = rows(batch, head, tokens);  // [S, Tk]
  const torch::Tensor weights = mixing.index_select(1, support).to(attention_rows.device(), attention_rows.dtype());
  return torch::matmul(weights, attention_rows);
}

torch::Tensor AttentionCapture::row(int64_t batch, int64_t head, int64_t query) const {
  return rows(batch, head, {query})[0];
}

torch::Tensor AttentionCapture::matrix(int64_t batch, int64_t head) const {
  std::vector<int64_t> all(size_t(layout.total_tokens()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  return rows(batch, head, all);
}

nlohmann::json describe_layer(const AttentionCapture& capture) {
  const LayerPlacement& at = capture.placement;
  nlohmann::json window = nullptr;
  if (at.window_h > 0) window = {at.window_h, at.window_w};
  nlohmann::json described = {{"name", at.name},
                              {"stage", at.stage},
                              {"block", at.block},
                              {"query_grid", {capture.layout.grid_h, capture.layout.grid_w}},
                              {"key_grid", {capture.key_layout.grid_h, capture.key_layout.grid_w}},
                              {"prefix_tokens", capture.layout.prefix_tokens()},
                              {"window", window},
                              {"shift", {at.shift_h, at.shift_w}},
                              {"access", at.access},
                              // A block without attention (CARE's strip-conv blocks) still counts as a layer.
                              {"attention", capture.heads > 0 ? capture.attention.describe() : "none"},
                              {"heads", capture.heads}};
  if (!at.channels.empty()) {
    nlohmann::json parts = nlohmann::json::object();
    for (const ChannelPart& part : at.channels) parts[part.name] = {part.begin, part.end};
    described["channels"] = parts;
  }
  if (capture.branches.empty()) return described;
  // CSwin: each branch's heads, stripes and kernel.
  nlohmann::json branches = nlohmann::json::array();
  for (size_t b = 0; b < capture.branches.size(); ++b) {
    const AttentionCapture& branch = capture.branches[b];
    const int first = capture.branch_first_head[b];
    branches.push_back({{"name", branch.placement.name},
                        {"heads", {first, first + branch.heads}},
                        {"access", branch.placement.access},
                        {"stripe", branch.placement.access.substr(0, branch.placement.access.find('-'))},
                        {"window", {branch.placement.window_h, branch.placement.window_w}},
                        {"attention", branch.attention.describe()}});
  }
  described["branches"] = branches;
  return described;
}

torch::Tensor AttentionCapture::equivalent_matrix(int64_t batch, int64_t head) const {
  if (!branches.empty()) {
    const AttentionCapture& branch = for_head(head);
    return branch.equivalent_matrix(batch, head);
  }
  torch::Tensor attention_matrix = matrix(batch, head);
  if (!attention.dwc) return attention_matrix;
  std::vector<int64_t> all(size_t(layout.total_tokens()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  return attention_matrix + dwc_band(all).to(attention_matrix.device(), attention_matrix.scalar_type());
}

torch::Tensor AttentionCapture::key_grid(const torch::Tensor& row) const {
  return row.slice(0, key_layout.prefix_tokens()).reshape({key_layout.grid_h, key_layout.grid_w});
}

}  // namespace attnscope
