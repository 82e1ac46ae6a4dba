#include "analysis/attention_map.h"

#include <torch/torch.h>

namespace attnscope {

torch::Tensor attention_row(const AttentionCapture& capture, int head, int query_token, bool after_lcm) {
  torch::NoGradGuard no_grad;
  const bool lcm = after_lcm && capture.has_lcm();
  return (lcm ? capture.rows_after_lcm(0, head, {query_token})[0] : capture.row(0, head, query_token))
      .to(torch::kCPU, torch::kFloat);
}

namespace {

torch::Tensor head_map(const AttentionCapture& capture, int head, const MapSelection& selection) {
  if (!selection.incoming)
    return capture.key_grid(attention_row(capture, head, selection.query_token, selection.after_lcm));
  const TokenLayout& queries = capture.layout;
  // The key over the query's place in the image, and how much every patch query gives it.
  const int key_token = follow_query(selection.query_token, queries, capture.key_layout);
  torch::Tensor matrix;
  if (selection.after_lcm && capture.has_lcm()) {
    std::vector<int64_t> all_queries;
    for (int64_t token = 0; token < queries.total_tokens(); ++token) all_queries.push_back(token);
    matrix = capture.rows_after_lcm(0, head, all_queries);
  } else {
    matrix = capture.matrix(0, head);
  }
  return matrix.to(torch::kCPU, torch::kFloat)
      .select(1, key_token)
      .slice(0, queries.prefix_tokens())
      .reshape({queries.grid_h, queries.grid_w});
}

}  // namespace

torch::Tensor attention_map(const AttentionCapture& capture, const MapSelection& selection) {
  torch::NoGradGuard no_grad;
  if (selection.head >= 0) return head_map(capture, selection.head, selection);
  torch::Tensor sum;
  for (int head = 0; head < capture.heads; ++head) {
    const torch::Tensor map = head_map(capture, head, selection);
    sum = head == 0 ? map.clone() : sum + map;
  }
  return sum / double(capture.heads);
}

}  // namespace attnscope
