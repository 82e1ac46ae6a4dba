// The kernels of the FLatten authors' successors and of PolaFormer, as rows of the kernel table
// (models/attention_kernels.cpp): Agent Attention (ECCV 2024) and InLine (NeurIPS 2024), each
// computed as its authors' DeiT module computes it (LeapLabTHU/Agent-Attention agent_deit.py,
// LeapLabTHU/InLine inline_deit.py); MLLA (NeurIPS 2024) as LeapLabTHU/MLLA mlla.py's
// LinearAttention and PolaFormer (ICLR 2025) as ZacharyMeng/PolaFormer pola_pvt.py's
// PolaLinearAttention compute theirs. Their local terms (Agent's depthwise conv on V, InLine's
// predicted 3 x 3 residual) belong to the attention module (models/attention.cpp), as FLatten's
// DWC does.
#pragma once

#include <iosfwd>
#include <optional>

#include "models/attention_kernels.h"

namespace attnscope::successor_kernels {

// Agent: A agent tokens, the queries' patch tokens average-pooled to a sqrt(A) x sqrt(A) grid
// (nn.AdaptiveAvgPool2d); the agents' softmax over the keys and the queries' over the agents,
// both at d^-0.5 with the module's position biases where it has them.
KernelFeatures agent_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                              const KernelParameters& parameters, const TokenLayout& layout);
torch::Tensor agent_rows(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& query_index,
                         const torch::Tensor& allowed, const torch::Tensor& additive);
torch::Tensor agent_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                           const torch::Tensor& allowed, const torch::Tensor& additive);
std::optional<MatrixFactors> agent_factors(const KernelSpec& spec, const KernelFeatures& features, int64_t batch,
                                           int64_t head);
void describe_agent(const ResolvedAttention& resolved, std::ostream& out);
// Agent Attention's learned position biases: an/na [h, A, 7, 7] resized bilinearly to the grid
// (align_corners=False, as the authors' interpolate), ah/aw/ha/wa [.., side, ..] along its rows and
// columns, and agent_deit's ac/ca for its class token (undefined in agent_swin's, which has none).
struct AgentPositionBiases {
  torch::Tensor an, na, ah, aw, ha, wa, ac, ca;
};
// Registers the six biases every Agent Attention module has on `module` under the authors' names
// (an_bias, na_bias, ah_bias, aw_bias, ha_bias, wa_bias) for `heads`, `agents` and an s x s grid, zero.
AgentPositionBiases register_agent_biases(torch::nn::Module& module, int64_t heads, int64_t agents, int64_t side);
// InLine's predictor of its 3 x 3 local residual as its modules build it: Conv1d(C, C, 1, groups=h),
// GELU, Conv1d(C, 9C, 1, groups=h).
torch::nn::Sequential inline_residual_predictor(int64_t dim, int64_t heads);
// Sets parameters.agent_key_bias [1, h, A, T] and query_agent_bias [1, h, T, A] for `layout`;
// throws when it is not the grid (and prefix token) the biases were trained for.
void add_agent_position_biases(const AgentPositionBiases& biases, const TokenLayout& layout,
                               KernelParameters& parameters);

// InLine: w_ij = 1/n + (d^-0.5 / n) (q_i.k_j - q_i.k_mean) over the n keys, with no kernel function
// (its DeiT form): rows sum to one by construction and may be negative.
KernelFeatures inline_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                               const KernelParameters& parameters, const TokenLayout& layout);
torch::Tensor inline_rows(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& query_index,
                          const torch::Tensor& allowed, const torch::Tensor& additive);
torch::Tensor inline_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                            const torch::Tensor& allowed, const torch::Tensor& additive);
std::optional<MatrixFactors> inline_factors(const KernelSpec& spec, const KernelFeatures& features, int64_t batch,
                                            int64_t head);

// MLLA: ELU + 1 features; the numerator's q and k rotated by MLLA's 2-D RoPE over all C channels
// (row positions in the first half of the rotation pairs, columns in the second; prefix tokens at
// angle 0), the normaliser z = 1 / (q . mean(k) + 1e-6) from the un-rotated ones:
// w_ij = rope(q_i).rope(k_j) z_i / n (rows need not sum to one; entries may be negative).
KernelFeatures mlla_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters& parameters, const TokenLayout& layout);
torch::Tensor mlla_rows(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& query_index,
                        const torch::Tensor& allowed, const torch::Tensor& additive);
torch::Tensor mlla_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                          const torch::Tensor& allowed, const torch::Tensor& additive);
std::optional<MatrixFactors> mlla_factors(const KernelSpec& spec, const KernelFeatures& features, int64_t batch,
                                          int64_t head);
void describe_mlla(const ResolvedAttention& resolved, std::ostream& out);

// PolaFormer: q, k divided by softplus(scale) (ln 2 without one), split into ReLU(x)^p and
// ReLU(-x)^p with p = 1 + alpha sigmoid(power); the same-sign pairs (q+k+, q-k-) weigh the first
// half of each head's value channels, the opposite-sign pairs (q+k-, q-k+) the second, each
// normalised as FLatten's by q . mean(k) + 1e-6. `rows` are the same-sign matrix, the second
// matrix the opposite-sign one.
KernelFeatures pola_features(const ResolvedAttention& resolved, const torch::Tensor& q, torch::Tensor& k,
                             const KernelParameters& parameters, const TokenLayout& layout);
torch::Tensor pola_rows(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& query_index,
                        const torch::Tensor& allowed, const torch::Tensor& additive);
torch::Tensor pola_opposite_rows(const KernelSpec& spec, const KernelFeatures& features,
                                 const torch::Tensor& query_index);
torch::Tensor pola_attend(const KernelSpec& spec, const KernelFeatures& features, const torch::Tensor& v,
                          const torch::Tensor& allowed, const torch::Tensor& additive);
std::optional<MatrixFactors> pola_factors(const KernelSpec& spec, const KernelFeatures& features, int64_t batch,
                                          int64_t head);
void describe_pola(const ResolvedAttention& resolved, std::ostream& out);
// Why alpha cannot be used (empty when it can): finite, in [0, kMaxPolaAlpha].
std::string pola_alpha_problem(double alpha);

// Whether `count` agents can pool from a grid of `patches` patches: a square, at least 1 and at
// most the patches; else the reason.
std::string agent_count_problem(int count, int patches);

}  // namespace attnscope::successor_kernels
