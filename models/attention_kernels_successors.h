// The kernels of the FLatten authors' successors, as rows of the kernel table
// (models/attention_kernels.cpp): Agent Attention (ECCV 2024) and InLine (NeurIPS 2024), each
// computed as its authors' DeiT module computes it (LeapLabTHU/Agent-Attention agent_deit.py,
// LeapLabTHU/InLine inline_deit.py). Their local terms (Agent's depthwise conv on V, InLine's
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

// Whether `count` agents can pool from a grid of `patches` patches: a square, at least 1 and at
// most the patches; else the reason.
std::string agent_count_problem(int count, int patches);

}  // namespace attnscope::successor_kernels
