#include "views/panel_maps.h"

#include <algorithm>
#include <chrono>

#include "analysis/attention_map.h"
#include "analysis/focus_metrics.h"
#include "analysis/spectrum.h"
#include "models/finite_checks.h"

namespace attnscope {

namespace {

std::vector<float> as_floats(const torch::Tensor& t) {
  const torch::Tensor values = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
}

}  // namespace

GridMap to_grid_map(const torch::Tensor& grid) {
  GridMap map;
  map.grid_h = int(grid.size(0));
  map.grid_w = int(grid.size(1));
  map.values = as_floats(grid);
  return map;
}

std::vector<int> query_window_cells(const AttentionCapture& whole, int query_token, int head) {
  int64_t local_head = head;
  const AttentionCapture& capture = whole.branches.empty() ? whole : whole.for_head(local_head);
  std::vector<int> cells;
  if (!capture.query_slots.defined()) return cells;
  const auto queries = capture.query_slots.to(torch::kCPU).contiguous();
  const auto keys = capture.key_slots.to(torch::kCPU).contiguous();
  for (int64_t group = 0; group < queries.size(0); ++group) {
    const auto members = queries[group];
    if (!(members == query_token).any().item<bool>()) continue;
    const int prefix = capture.key_layout.prefix_tokens();
    for (int64_t slot = 0; slot < keys.size(1); ++slot) {
      const int64_t token = keys[group][slot].item<int64_t>();
      if (token >= prefix) cells.push_back(int(token) - prefix);
    }
    break;
  }
  return cells;
}

bool dwc_switch_applies(const PanelMaps& panel) {
  return panel.error.empty() && (kernel_spec(panel.kernel).reads & kReadsDwc) != 0 && panel.dwc_available;
}

const TokenLayout& map_grid(const AttentionCapture& capture, bool incoming) {
  return incoming ? capture.layout : capture.key_layout;
}

torch::Tensor prefix_received(const AttentionCapture& capture, int head) {
  const int64_t first = capture.layout.prefix_tokens(), tokens = capture.layout.total_tokens();
  const int64_t prefix_keys = capture.key_layout.prefix_tokens();
  if (capture.row_log_normalizer.defined()) {
    // Softmax over all keys: p_ij = exp(scale q_i.k_j - lse_i), T x prefix dot products.
    const KernelFeatures& features = capture.features;
    const torch::Tensor q = features.q[0][head].slice(0, first), k = features.k[0][head].slice(0, 0, prefix_keys);
    const torch::Tensor scores = q.matmul(k.transpose(0, 1)) * features.score_scale;
    const torch::Tensor lse = capture.row_log_normalizer[0][head].slice(0, first).unsqueeze(1);
    return (scores - lse).exp().mean(0).to(torch::kCPU, torch::kFloat);
  }
  constexpr int64_t kBlock = 512;
  torch::Tensor sum = torch::zeros({prefix_keys}, torch::kDouble);
  for (int64_t begin = first; begin < tokens; begin += kBlock) {
    std::vector<int64_t> block;
    for (int64_t query = begin; query < std::min(tokens, begin + kBlock); ++query) block.push_back(query);
    sum += capture.rows(0, head, block).slice(1, 0, prefix_keys).sum(0).to(torch::kCPU, torch::kDouble);
  }
  return (sum / double(std::max<int64_t>(1, tokens - first))).to(torch::kFloat);
}

PanelMaps build_panel_maps(const AttentionCapture& capture, const PanelSelection& selection,
                           const std::function<bool()>& cancelled) {
  torch::NoGradGuard no_grad;
  PanelMaps maps;
  maps.description = capture.attention.describe();
  const TokenLayout& queries = capture.layout;
  const int key_prefix = capture.key_layout.prefix_tokens();
  MapSelection map_selection;
  map_selection.query_token = selection.query_token;
  map_selection.incoming = selection.incoming;
  map_selection.after_lcm = selection.after_lcm;
  torch::Tensor mean;
  for (int head = 0; head < capture.heads; ++head) {
    if (cancelled && cancelled()) throw Cancelled();
    map_selection.head = head;
    const torch::Tensor map = attention_map(capture, map_selection);
    if (key_prefix > 0) maps.prefix_received_per_head.push_back(as_floats(prefix_received(capture, head)));
    if (selection.spectrum) {
      const torch::Tensor matrix = capture.matrix(0, head).to(torch::kCPU, torch::kFloat);  // [Tq, Tk]
      if (head == selection.matrix_head) {
        // The matrix view shows FLatten's equivalent matrix (with its DWC term, whose rank the
        // DWC restores), or L2ViT's after the LCM when that is what the maps show.
        torch::Tensor shown = matrix;
        if (selection.after_lcm && capture.has_lcm()) {
          std::vector<int64_t> all_queries;
          for (int64_t token = 0; token < queries.total_tokens(); ++token) all_queries.push_back(token);
          shown = capture.rows_after_lcm(0, head, all_queries).to(torch::kCPU, torch::kFloat);
        } else if (capture.attention.dwc) {
          shown = capture.equivalent_matrix(0, head).to(torch::kCPU, torch::kFloat);
        }
        maps.matrix_rows = int(shown.size(0));
        maps.matrix_cols = int(shown.size(1));
        require_finite(shown, "the attention matrix of " + capture.placement.name + " head " + std::to_string(head));
        maps.matrix = as_floats(shown);
      }
      // The cheapest exact path: factors (linear kernels), window blocks (Swin), else the full SVD.
      const Spectrum spectrum = attention_spectrum(capture, head).spectrum;
      HeadSpectrum head_spectrum;
      head_spectrum.singular_values = as_floats(spectrum.singular_values);
      head_spectrum.tolerance = spectrum.tolerance;
      head_spectrum.numerical_rank = spectrum.numerical_rank;
      head_spectrum.effective_rank = spectrum.effective_rank;
      maps.spectra.push_back(std::move(head_spectrum));
    }
    // NaN or Inf would draw as a flat map on a made-up colour bar: named instead.
    require_finite(map, "the attention of " + capture.placement.name + " head " + std::to_string(head));
    maps.head_maps.push_back(to_grid_map(map));
    maps.uniformity.push_back(uniformity(map));
    mean = head == 0 ? map.clone() : mean + map;
    if (selection.metrics) {
      const FocusSummary summary = summarise_focus(map.reshape({-1}), kFocusTopK, selection.box);
      maps.metrics.push_back({head, summary.entropy, summary.top_k_mass, summary.gini, summary.box_mass});
    }
  }
  maps.mean_map = to_grid_map(mean / double(capture.heads));
  maps.mean_uniformity = uniformity(mean);
  if (!maps.prefix_received_per_head.empty()) {
    maps.prefix_received.assign(size_t(key_prefix), 0.0f);
    for (const auto& per_head : maps.prefix_received_per_head)
      for (int token = 0; token < key_prefix; ++token)
        maps.prefix_received[size_t(token)] += per_head[size_t(token)] / float(capture.heads);
  }
  return maps;
}

cv::Mat grid_map_mat(const GridMap& map) {
  return cv::Mat(map.grid_h, map.grid_w, CV_32FC1, const_cast<float*>(map.values.data())).clone();
}

}  // namespace attnscope
