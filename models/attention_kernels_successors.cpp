#include "models/attention_kernels_successors.h"

#include <torch/torch.h>

#include "core/number_text.h"

#include <cmath>
#include <ostream>
#include <stdexcept>

namespace attnscope::successor_kernels {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

double score_scale(const torch::Tensor& q) { return 1.0 / std::sqrt(double(q.size(3))); }

// The normaliser MLLA and PolaFormer share with FLatten's code: 1 / (q . mean(k) + 1e-6) per query,
// keys on the second-last axis ([.., n, c]; [B, h, n, c] in the forward, [n, c] for one head).
torch::Tensor mean_normaliser(const torch::Tensor& query_features, const torch::Tensor& key_features) {
  return (torch::matmul(query_features, key_features.mean(-2, true).transpose(-2, -1)) + 1e-6).reciprocal();
}

int square_side(int count) {
  int side = int(std::lround(std::sqrt(double(std::max(count, 0)))));
  return side * side == count ? side : 0;
}

}  // namespace

std::string agent_count_problem(int count, int patches) {
  if (count < 1 || square_side(count) == 0)
    return "agent count " + std::to_string(count) +
           " is not a square: the agents are the queries pooled to an s x s grid (4, 9, 16, 49, ...)";
  if (count > patches)
    return "agent count " + std::to_string(count) + " exceeds the " + std::to_string(patches) +
           " patches it pools from";
  return "";
}

KernelFeatures agent_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                              const KernelParameters& parameters, const TokenLayout& layout) {
  const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(3), prefix = layout.prefix_tokens();
  const int64_t side = square_side(resolved.agents);
  // agent_deit: AdaptiveAvgPool2d over q's patch tokens laid out [B, C, h, w].
  auto grid = q.index({Slice(), Slice(), Slice(prefix)})
                  .reshape({batch * heads, layout.grid_h, layout.grid_w, dim})
                  .permute({0, 3, 1, 2});
  auto agents = F::adaptive_avg_pool2d(grid, F::AdaptiveAvgPool2dFuncOptions({side, side}))
                    .reshape({batch, heads, dim, side * side})
                    .transpose(-1, -2);  // [B, h, A, d]
  const double scale = score_scale(q);
  auto agent_scores = torch::matmul(agents * scale, k.transpose(-2, -1));
  if (parameters.agent_key_bias.defined()) agent_scores = agent_scores + parameters.agent_key_bias;
  auto query_scores = torch::matmul(q * scale, agents.transpose(-2, -1));
  if (parameters.query_agent_bias.defined()) query_scores = query_scores + parameters.query_agent_bias;
  KernelFeatures features;
  features.q = q;
  features.k = k;
  features.score_scale = scale;
  features.agent_attention = torch::softmax(agent_scores, -1);
  features.query_agent_attention = torch::softmax(query_scores, -1);
  return features;
}

torch::Tensor agent_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                         const torch::Tensor&, const torch::Tensor&) {
  return torch::matmul(features.query_agent_attention.index_select(2, query_index), features.agent_attention);
}

torch::Tensor agent_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                           const torch::Tensor&, const torch::Tensor&) {
  // agent_v = agent_attn @ v; x = q_attn @ agent_v: O(T A d).
  return torch::matmul(features.query_agent_attention, torch::matmul(features.agent_attention, v));
}

std::optional<MatrixFactors> agent_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                           int64_t head) {
  MatrixFactors factors;
  factors.left = features.query_agent_attention[batch][head].to(torch::kCPU, torch::kDouble);             // [Tq, A]
  factors.right = features.agent_attention[batch][head].to(torch::kCPU, torch::kDouble).transpose(0, 1);  // [Tk, A]
  return factors;
}

void describe_agent(const ResolvedAttention& resolved, std::ostream& out) {
  out << " agents=" << resolved.agents
      << (resolved.learned_agent_bias ? " (learned position biases)" : " (no position biases)");
}

AgentPositionBiases register_agent_biases(torch::nn::Module& module, int64_t heads, int64_t agents, int64_t side) {
  AgentPositionBiases biases;
  biases.an = module.register_parameter("an_bias", torch::zeros({heads, agents, 7, 7}));
  biases.na = module.register_parameter("na_bias", torch::zeros({heads, agents, 7, 7}));
  biases.ah = module.register_parameter("ah_bias", torch::zeros({1, heads, agents, side, 1}));
  biases.aw = module.register_parameter("aw_bias", torch::zeros({1, heads, agents, 1, side}));
  biases.ha = module.register_parameter("ha_bias", torch::zeros({1, heads, side, 1, agents}));
  biases.wa = module.register_parameter("wa_bias", torch::zeros({1, heads, 1, side, agents}));
  return biases;
}

torch::nn::Sequential inline_residual_predictor(int64_t dim, int64_t heads) {
  auto grouped = [&](int64_t out) { return torch::nn::Conv1d(torch::nn::Conv1dOptions(dim, out, 1).groups(heads)); };
  return torch::nn::Sequential(grouped(dim), torch::nn::GELU(), grouped(9 * dim));
}

void add_agent_position_biases(const AgentPositionBiases& biases, const TokenLayout& layout,
                               KernelParameters& parameters) {
  const int64_t heads = biases.an.size(0), agents = biases.an.size(1), side = biases.ah.size(3);
  const bool class_slot = biases.ac.defined();
  if (layout.grid_h != side || layout.grid_w != side || layout.prefix_tokens() != (class_slot ? 1 : 0))
    throw std::invalid_argument(
        "Agent Attention's position biases were trained for a " + std::to_string(side) + "x" + std::to_string(side) +
        " grid" + (class_slot ? " with one class token" : "") + "; this input gives " + std::to_string(layout.grid_h) +
        "x" + std::to_string(layout.grid_w) + " there: give the model its trained input size, or --agents with " +
        "another count to run without them");
  auto resized = [&](const torch::Tensor& bias) {
    return F::interpolate(bias, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{side, side})
                                    .mode(torch::kBilinear)
                                    .align_corners(false))
        .reshape({1, heads, agents, side * side});
  };
  auto keys = resized(biases.an) + (biases.ah + biases.aw).reshape({1, heads, agents, side * side});
  auto queries =
      resized(biases.na).permute({0, 1, 3, 2}) + (biases.ha + biases.wa).reshape({1, heads, side * side, agents});
  parameters.agent_key_bias = class_slot ? torch::cat({biases.ac, keys}, -1) : keys;
  parameters.query_agent_bias = class_slot ? torch::cat({biases.ca, queries}, -2) : queries;
}

KernelFeatures inline_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters&, const TokenLayout&) {
  KernelFeatures features;
  features.q = q;
  features.k = k;
  features.score_scale = score_scale(q);
  return features;
}

torch::Tensor inline_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                          const torch::Tensor&, const torch::Tensor&) {
  const double n = double(features.k.size(2)), scale = features.score_scale;
  auto query = features.q.index_select(2, query_index);
  auto scores = torch::matmul(query, features.k.transpose(-2, -1));                    // [B, h, Q, n]
  auto mean_score = torch::matmul(query, features.k.mean(2, true).transpose(-2, -1));  // q . k_mean
  return (scores - mean_score) * (scale / n) + 1.0 / n;
}

torch::Tensor inline_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                            const torch::Tensor&, const torch::Tensor&) {
  // inline_deit.py, in its order of operations.
  const auto& q = features.q;
  const auto& k = features.k;
  const double n = double(k.size(2)), scale = features.score_scale, root = std::sqrt(scale / n);
  auto kv = torch::matmul(k.transpose(-2, -1) * root, v * root);
  return torch::matmul(q, kv) + (1 - torch::matmul(q, k.mean(2, true).transpose(-2, -1)) * scale) * v.mean(2, true);
}

std::optional<MatrixFactors> inline_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                            int64_t head) {
  // W = [Q, 1] [(s/n)(K - 1 k_mean), 1/n]^T: rank <= d + 1.
  auto q = features.q[batch][head].to(torch::kCPU, torch::kDouble);
  auto k = features.k[batch][head].to(torch::kCPU, torch::kDouble);
  const double n = double(k.size(0)), scale = features.score_scale;
  MatrixFactors factors;
  factors.left = torch::cat({q, torch::ones({q.size(0), 1}, q.options())}, 1);
  factors.right =
      torch::cat({(k - k.mean(0, true)) * (scale / n), torch::full({k.size(0), 1}, 1.0 / n, k.options())}, 1);
  return factors;
}

// ---- MLLA -------------------------------------------------------------------------------------

namespace {

// The cos and sin of MLLA's RoPE angles at the layout's grid, [heads, tokens, head_dim / 2] in `x`'s type.
std::pair<torch::Tensor, torch::Tensor> mlla_rope_tables(const torch::Tensor& x, const TokenLayout& layout) {
  const int64_t heads = x.size(1), head_dim = x.size(3), channels = heads * head_dim, prefix = layout.prefix_tokens();
  if (channels % 4 != 0 || head_dim % 2 != 0)
    throw std::invalid_argument(
        "MLLA's RoPE rotates pairs of channels, a quarter of them per grid axis: " + std::to_string(heads) +
        " heads of " + std::to_string(head_dim) + " channels do not divide so (C a multiple of 4, d even)");
  // mlla.py's RoPE(shape=(H, W, C)), in float32 as its buffer is: theta_k = 1 / 10000^(k / k_max)
  // for k < k_max = C / 4; pair p < k_max turns by row * theta_p, the others by column * theta_(p - k_max).
  const int64_t k_max = channels / 4;
  auto float32 = torch::TensorOptions().dtype(torch::kFloat);
  auto theta = 1.0 / torch::pow(10000.0, torch::arange(k_max, float32) / double(k_max));
  auto rows = torch::arange(layout.grid_h, float32).view({-1, 1, 1}).expand({layout.grid_h, layout.grid_w, 1});
  auto columns = torch::arange(layout.grid_w, float32).view({1, -1, 1}).expand({layout.grid_h, layout.grid_w, 1});
  auto angles = torch::cat({rows * theta, columns * theta}, -1).reshape({layout.patch_tokens(), heads, head_dim / 2});
  angles = torch::cat({torch::zeros({prefix, heads, head_dim / 2}, float32), angles}).permute({1, 0, 2});
  return {angles.cos().to(x.device(), x.scalar_type()), angles.sin().to(x.device(), x.scalar_type())};
}

// MLLA's RoPE of per-head x [B, h, T, d] whose heads side by side are the C channels it rotates.
torch::Tensor rope_rotated(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto pairs = x.reshape({x.size(0), x.size(1), x.size(2), x.size(3) / 2, 2});
  auto real = pairs.select(-1, 0), imaginary = pairs.select(-1, 1);
  return torch::stack({real * cos - imaginary * sin, real * sin + imaginary * cos}, -1).reshape(x.sizes());
}

}  // namespace

KernelFeatures mlla_features(const ResolvedAttention&, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters&, const TokenLayout& layout) {
  auto q_feature = torch::elu(q) + 1.0, k_feature = torch::elu(k) + 1.0;
  const double n = double(k.size(2));
  KernelFeatures features;
  const auto [cos, sin] = mlla_rope_tables(q_feature, layout);  // q's and k's: one grid, one table
  features.q = rope_rotated(q_feature, cos, sin);
  features.k = rope_rotated(k_feature, cos, sin);
  features.query_row_factor = mean_normaliser(q_feature, k_feature) / n;
  return features;
}

torch::Tensor mlla_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                        const torch::Tensor&, const torch::Tensor&) {
  return torch::matmul(features.q.index_select(2, query_index), features.k.transpose(-2, -1)) *
         features.query_row_factor.index_select(2, query_index);
}

torch::Tensor mlla_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                          const torch::Tensor&, const torch::Tensor&) {
  // mlla.py: kv = (k_rope^T n^-0.5) @ (v n^-0.5); x = q_rope @ kv * z.
  const double n = double(features.k.size(2)), root = 1.0 / std::sqrt(n);
  auto kv = torch::matmul(features.k.transpose(-2, -1) * root, v * root);
  return torch::matmul(features.q, kv) * (features.query_row_factor * n);
}

std::optional<MatrixFactors> mlla_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                          int64_t head) {
  MatrixFactors factors;  // rank <= d
  factors.left = features.q[batch][head].to(torch::kCPU, torch::kDouble) *
                 features.query_row_factor[batch][head].to(torch::kCPU, torch::kDouble);
  factors.right = features.k[batch][head].to(torch::kCPU, torch::kDouble);
  return factors;
}

// ---- PolaFormer -------------------------------------------------------------------------------

std::string pola_alpha_problem(double alpha) {
  if (!std::isfinite(alpha) || alpha < 0 || alpha > kMaxPolaAlpha)
    return "alpha " + format_double(alpha) + " is outside [0, " + format_double(kMaxPolaAlpha) +
           "]: PolaFormer's power 1 + alpha sigmoid(.) must stay finite when two powered features multiply";
  return "";
}

KernelFeatures pola_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters& parameters, const TokenLayout& layout) {
  add_learned_encoding(resolved, parameters, layout, k);  // k + positional_encoding, then / scale
  const int64_t heads = q.size(1), head_dim = q.size(3);
  if (head_dim % 2 != 0)
    throw std::invalid_argument("PolaFormer splits each head's " + std::to_string(head_dim) +
                                " value channels in two halves: a head needs an even number of channels");
  if (const std::string problem = pola_alpha_problem(resolved.alpha); !problem.empty())
    throw std::invalid_argument("--pola-alpha: " + problem);
  auto divisor = resolved.learned_scale ? split_heads(torch::softplus(parameters.scale), int(heads))
                                        : torch::full({1}, std::log(2.0), q.options());
  auto scaled_q = q / divisor, scaled_k = k / divisor;
  // Without a learned power it is one number: a scalar exponent (a cube at alpha 4) is several times
  // faster than pow against a broadcast tensor (the same values up to rounding).
  auto raise = [&](const torch::Tensor& x) {
    return resolved.learned_power ? x.pow(1.0 + resolved.alpha * torch::sigmoid(parameters.power))
                                  : x.pow(1.0 + resolved.alpha * 0.5);
  };
  auto q_positive = raise(torch::relu(scaled_q)), q_negative = raise(torch::relu(-scaled_q));
  auto k_positive = raise(torch::relu(scaled_k)), k_negative = raise(torch::relu(-scaled_k));
  KernelFeatures features;
  features.q = torch::cat({q_positive, q_negative}, -1);
  features.q_opposite = torch::cat({q_negative, q_positive}, -1);
  features.k = torch::cat({k_positive, k_negative}, -1);
  return features;
}

namespace {

// Rows of one of PolaFormer's matrices from its query features: (q.k_j / n) / (q.mean(k) + 1e-6).
torch::Tensor pola_matrix_rows(const torch::Tensor& query_features, const torch::Tensor& k,
                               const torch::Tensor& query_index) {
  auto query = query_features.index_select(2, query_index);
  return torch::matmul(query, k.transpose(-2, -1)) / double(k.size(2)) * mean_normaliser(query, k);
}

// pola_pvt.py's order: z = 1 / (q @ mean(k)^T + 1e-6); kv = (k^T n^-0.5) @ (v n^-0.5); x = q @ kv * z.
torch::Tensor pola_half(const torch::Tensor& query_features, const torch::Tensor& k, const torch::Tensor& v) {
  const double root = 1.0 / std::sqrt(double(k.size(2)));
  return torch::matmul(query_features, torch::matmul(k.transpose(-2, -1) * root, v * root)) *
         mean_normaliser(query_features, k);
}

}  // namespace

torch::Tensor pola_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index,
                        const torch::Tensor&, const torch::Tensor&) {
  return pola_matrix_rows(features.q, features.k, query_index);
}

torch::Tensor pola_opposite_rows(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& query_index) {
  return pola_matrix_rows(features.q_opposite, features.k, query_index);
}

torch::Tensor pola_attend(const KernelSpec&, const KernelFeatures& features, const torch::Tensor& v,
                          const torch::Tensor&, const torch::Tensor&) {
  auto halves = v.chunk(2, -1);
  return torch::cat(
      {pola_half(features.q, features.k, halves[0]), pola_half(features.q_opposite, features.k, halves[1])}, -1);
}

std::optional<MatrixFactors> pola_factors(const KernelSpec&, const KernelFeatures& features, int64_t batch,
                                          int64_t head) {
  // The same-sign matrix: rank <= 2d.
  auto q = features.q[batch][head].to(torch::kCPU, torch::kDouble);
  auto k = features.k[batch][head].to(torch::kCPU, torch::kDouble);
  MatrixFactors factors;
  factors.left = q * mean_normaliser(q, k) / double(k.size(0));
  factors.right = k;
  return factors;
}

void describe_pola(const ResolvedAttention& resolved, std::ostream& out) {
  out << " alpha=" << format_double(resolved.alpha)
      << (resolved.learned_power ? " (learned power)" : " power=" + format_double(1.0 + resolved.alpha * 0.5))
      << (resolved.learned_scale ? "" : " scale=ln2");
  if (!resolved.native) out << " (no dwc, no gate)";
}

void describe_mlla(const ResolvedAttention& resolved, std::ostream& out) {
  if (!resolved.native) out << " (the layer's own v; no LePE, no gates)";
}

}  // namespace attnscope::successor_kernels
