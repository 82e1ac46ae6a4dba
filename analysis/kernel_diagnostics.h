// The numbers the papers after FLatten argue about their kernels by, per head of one captured layer
// (no forward is re-run): row entropy and maximum (focus), the share of a row within a k x k
// neighbourhood of the query (InLine's local mass), how far a row moves when the query is scaled and
// how many different queries share a row (InLine's injectivity), the divergence of each row from
// the softmax row of the same q and k, the negative q.k products a ReLU kernel drops (PolaFormer),
// and the matrix's effective rank (FLatten). The kernel-comparison view, `analyze --analysis
// kernel-diagnostics` and its figure all read kernel_diagnostics().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/head_spectrum.h"
#include "models/attention.h"

namespace attnscope {

struct KernelDiagnosticsSettings {
  int local_window = 3;      // local mass: the k x k patches around the query's (odd)
  double query_scale = 2.0;  // injectivity: rows of c q against rows of q
  int max_queries = 256;     // queries sampled evenly over the tokens when there are more
  RankMode ranks = RankMode::Auto;
};

struct HeadKernelDiagnostics {
  int head = 0;
  // Rows as distributions p = |w| / sum |w| (kernels whose weights can be negative, InLine's and
  // MLLA's, are read by their magnitudes; negative_mass says how much of it is negative).
  double entropy = 0.0;        // nats, mean over the queries
  double row_max = 0.0;        // the largest weight of a row, mean over the queries
  double negative_mass = 0.0;  // share of sum |w| in negative weights
  std::optional<double>
      local_mass;  // share of sum |w| within the k x k patches around a patch query; none without patch queries
  std::optional<double>
      scale_shift;             // mean over queries of (1/2) sum_j |w(c q)_j - w(q)_j|: 0 = blind to the query's scale
  int64_t collisions = 0;      // pairs of different queries (q apart by > 1e-3 |q|) whose rows agree within 1e-5
  int64_t pairs = 0;           // pairs compared
  double kl_to_softmax = 0.0;  // mean over queries of KL(p || softmax row), nats
  double js_to_softmax = 0.0;  // mean Jensen-Shannon divergence, nats (at most ln 2)
  // Kernels whose features are ReLU(q), ReLU(k): the share of sum_ij sum_c |q_ic k_jc| in the
  // products they drop (any channel where q or k is negative); none for kernels that keep them.
  std::optional<double> lost_negative_share;
  HeadSpectrum spectrum;  // effective and numerical rank (analysis/head_spectrum.h)
};

struct KernelDiagnostics {
  std::string attention;  // the resolved attention's description
  std::string kernel;     // its kernel's name
  int64_t queries = 0;    // the query rows the means are over
  int64_t tokens = 0;
  std::string scale_note;  // why scale_shift is absent, when it is
  std::vector<HeadKernelDiagnostics> heads;
};

// Throws std::invalid_argument for a layer whose attention was recorded by a TorchScript file (it
// has no q and k to compare with).
KernelDiagnostics kernel_diagnostics(const AttentionCapture& capture, const KernelDiagnosticsSettings& settings);

// The query tokens the means are over: every token up to `max_queries`, else that many evenly spaced.
std::vector<int64_t> sampled_queries(int64_t tokens, int max_queries);

}  // namespace attnscope
