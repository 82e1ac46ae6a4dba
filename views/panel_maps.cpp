#include "views/panel_maps.h"

#include <algorithm>
#include <chrono>

#include "analysis/attention_map.h"
#include "analysis/focus_metrics.h"
#include "analysis/spectrum.h"
#include "models/finite_checks.h"

namespace attnscope {

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
  // The weights are the native kernel's: a swapped kernel runs without them.
  return panel.error.empty() && (kernel_spec(panel.kernel).reads & kReadsDwc) != 0 && panel.dwc_available &&
         !panel.swapped;
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
  // Thin factors (linear kernels, anchors): A = left right^T, so the queries' sum over a key column
  // is (sum of left's rows) . right_j, O(T r) instead of every row, O(T^2 r). Recorded
  // probabilities and talking heads are softmax's, which has none.
  if (const auto factors = equivalent_matrix_factors(capture, head, /*include_dwc=*/false)) {
    const torch::Tensor left_sum = factors->left.slice(0, first).sum(0);  // [r], float64
    const torch::Tensor sum = factors->right.slice(0, 0, prefix_keys).matmul(left_sum);
    return (sum / double(std::max<int64_t>(1, tokens - first))).to(torch::kCPU, torch::kFloat);
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

torch::Tensor shown_matrix_rows(const AttentionCapture& whole, int head, bool after_lcm,
                                const std::vector<int64_t>& queries) {
  torch::NoGradGuard no_grad;
  if (after_lcm && whole.has_lcm()) return whole.rows_after_lcm(0, head, queries).to(torch::kCPU, torch::kFloat);
  int64_t local_head = head;
  const AttentionCapture& layer = whole.for_head(local_head);
  torch::Tensor rows = layer.rows(0, local_head, queries);
  if (layer.attention.dwc) rows = rows + layer.dwc_band(queries).to(rows.device(), rows.scalar_type());
  return rows.to(torch::kCPU, torch::kFloat);
}

MatrixOverview matrix_overview(const AttentionCapture& capture, int head, bool after_lcm,
                               const std::function<bool()>& cancelled) {
  torch::NoGradGuard no_grad;
  const int64_t queries = capture.layout.total_tokens(), keys = capture.key_layout.total_tokens();
  MatrixOverview overview;
  overview.block = int((std::max(queries, keys) + kMatrixTexels - 1) / kMatrixTexels);
  const int64_t block = overview.block, out_rows = (queries + block - 1) / block, out_cols = (keys + block - 1) / block;
  // How many entries each block holds: block x block, less in the last row and column of blocks.
  auto counts = [block](int64_t total, int64_t blocks) {
    torch::Tensor count = torch::full({blocks}, double(block), torch::kDouble);
    count[blocks - 1] = double(total - (blocks - 1) * block);
    return count;
  };
  const torch::Tensor entries = counts(queries, out_rows).unsqueeze(1) * counts(keys, out_cols).unsqueeze(0);
  torch::Tensor sums = torch::zeros({out_rows, out_cols}, torch::kDouble);
  const int64_t chunk = block * std::max<int64_t>(1, 256 / block);  // about 4 MB of rows at 4,000 keys
  for (int64_t begin = 0; begin < queries; begin += chunk) {
    if (cancelled && cancelled()) throw Cancelled();
    const int64_t end = std::min(queries, begin + chunk);
    std::vector<int64_t> rows(size_t(end - begin));
    for (int64_t i = begin; i < end; ++i) rows[size_t(i - begin)] = i;
    torch::Tensor part = shown_matrix_rows(capture, head, after_lcm, rows).to(torch::kDouble);
    // Zeros pad the last blocks to full size; the counts above divide by what they really hold.
    const int64_t padded_rows = (end - begin + block - 1) / block * block;
    part = torch::constant_pad_nd(part, {0, out_cols * block - keys, 0, padded_rows - (end - begin)});
    part = part.view({padded_rows / block, block, out_cols, block}).sum({1, 3});
    sums.slice(0, begin / block, begin / block + part.size(0)) += part;
  }
  overview.means = (sums / entries).to(torch::kFloat);
  return overview;
}

PanelMaps build_panel_maps(const AttentionCapture& capture, const PanelSelection& selection,
                           const std::function<bool()>& cancelled) {
  torch::NoGradGuard no_grad;
  PanelMaps maps;
  maps.description = capture.attention.describe();
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
    if (key_prefix > 0) maps.prefix_received_per_head.push_back(float_values(prefix_received(capture, head)));
    // NaN or Inf would draw as a flat map on a made-up colour bar: named instead.
    require_finite(map, "the attention of " + capture.placement.name + " head " + std::to_string(head));
    maps.head_maps.push_back(to_grid_map(map));
    maps.uniformity.push_back(uniformity(map));
    mean = head == 0 ? map.clone() : mean + map;
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

PanelMatrix panel_matrix(const std::shared_ptr<const InferenceResult>& capture_owner, int layer, int head,
                         bool after_lcm, RankMode ranks, const MatrixViewCache& cache,
                         const std::function<bool()>& cancelled,
                         const std::function<void(double share)>& spectrum_progress) {
  torch::NoGradGuard no_grad;
  const AttentionCapture& capture = capture_owner->forward.layers.at(size_t(layer));
  // What a click on another query re-uses: the matrix overview and each head's spectrum.
  auto cached = [&](const std::string& what, const auto& compute) {
    using Value = std::decay_t<decltype(compute())>;
    const std::string key = cache.key + "|" + what;
    if (cache.cache)
      if (auto found = cache.cache->get<Value>(key)) return *found;
    Value value = compute();
    if (cache.cache) cache.cache->put(key, std::make_shared<const Value>(value));
    return value;
  };
  PanelMatrix view;
  view.head = head;
  const MatrixOverview overview = cached("matrix h" + std::to_string(head) + (after_lcm ? " lcm" : ""),
                                         [&] { return matrix_overview(capture, head, after_lcm, cancelled); });
  // NaN or Inf would colour as a made-up range: named instead (a block mean keeps them).
  require_finite(overview.means, "the attention matrix of " + capture.placement.name + " head " + std::to_string(head));
  view.rows = int(overview.means.size(0));
  view.cols = int(overview.means.size(1));
  view.block = overview.block;
  view.matrix = float_values(overview.means);
  // The exact value under the cursor, whatever the overview's blocks: one row from q and k.
  view.row = [capture_owner, layer, head, after_lcm](int query) {
    return float_values(
        shown_matrix_rows(capture_owner->forward.layers[size_t(layer)], head, after_lcm, {int64_t(query)}));
  };
  if (ranks == RankMode::None) {
    view.spectra_note = "no spectra: --ranks none (choose auto, leading or exact)";
    return view;
  }
  for (int each = 0; each < capture.heads; ++each) {
    if (cancelled && cancelled()) throw Cancelled();
    SvdProgress progress;
    progress.cancelled = cancelled;
    if (spectrum_progress)
      progress.report = [&](double fraction) { spectrum_progress((double(each) + fraction) / double(capture.heads)); };
    view.spectra.push_back(cached("spectrum h" + std::to_string(each) + " " + enum_name(ranks),
                                  [&] { return head_spectrum(capture, each, ranks, progress); }));
  }
  return view;
}

}  // namespace attnscope
