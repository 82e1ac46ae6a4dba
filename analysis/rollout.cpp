#include "analysis/rollout.h"

#include "core/excerpt.h"

#include <torch/torch.h>

namespace attnscope {

const std::vector<EnumEntry<HeadFusion>>& EnumTable<HeadFusion>::entries() {
  static const std::vector<EnumEntry<HeadFusion>> table = {
      {HeadFusion::Mean, "mean"}, {HeadFusion::Max, "max"}, {HeadFusion::Min, "min"}};
  return table;
}

HeadFusion parse_head_fusion(const std::string& name) { return parse_enum_named<HeadFusion>("head fusion", name); }

std::string to_string(HeadFusion fusion) { return enum_name(fusion); }

torch::Tensor fuse_heads(const AttentionCapture& layer, HeadFusion fusion, int64_t batch) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> heads;
  for (int head = 0; head < layer.heads; ++head) heads.push_back(layer.matrix(batch, head).to(torch::kCPU));
  auto stacked = torch::stack(heads);  // [h, T, T]
  switch (fusion) {
    case HeadFusion::Mean:
      return stacked.mean(0);
    case HeadFusion::Max:
      return std::get<0>(stacked.max(0));
    case HeadFusion::Min:
      return std::get<0>(stacked.min(0));
  }
  throw std::logic_error("fuse_heads: unknown fusion");
}

torch::Tensor rollout_factor(const torch::Tensor& fused, double discard_ratio) {
  if (!(discard_ratio >= 0.0 && discard_ratio < 1.0))
    throw std::invalid_argument("--discard must be in [0, 1), got " + std::to_string(discard_ratio));
  const int64_t tokens = fused.size(0);
  auto kept = fused.clone();
  const int64_t dropped = int64_t(double(kept.numel()) * discard_ratio);
  if (dropped > 0) {
    auto flat = kept.view({-1});
    auto lowest = std::get<1>(flat.topk(dropped, -1, /*largest=*/false));
    lowest = lowest.masked_select(lowest != 0);
    flat.index_fill_(0, lowest, 0.0);
  }
  auto factor = (kept + torch::eye(tokens, kept.options())) / 2;
  return factor / factor.sum(-1, /*keepdim=*/true);
}

namespace {

bool same_tokens(const TokenLayout& a, const TokenLayout& b) {
  return a.total_tokens() == b.total_tokens() && a.prefix_tokens() == b.prefix_tokens() && a.grid_h == b.grid_h &&
         a.grid_w == b.grid_w;
}

}  // namespace

std::vector<int> rollout_layers(const std::vector<AttentionCapture>& layers, int selected) {
  const AttentionCapture& chosen = layers.at(size_t(selected));
  if (!same_tokens(chosen.layout, chosen.key_layout))
    throw std::invalid_argument("attention rollout multiplies token-to-token matrices; layer " +
                                std::to_string(selected) + "'s keys are a " + std::to_string(chosen.key_layout.grid_h) +
                                "x" + std::to_string(chosen.key_layout.grid_w) + " grid, its queries " +
                                std::to_string(chosen.layout.grid_h) + "x" + std::to_string(chosen.layout.grid_w) +
                                " (" + chosen.placement.access + "): rollout is not defined there");
  std::vector<int> kept;
  for (size_t i = 0; i < layers.size(); ++i)
    if (same_tokens(layers[i].layout, chosen.layout) && same_tokens(layers[i].key_layout, chosen.layout) &&
        layers[i].placement.stage == chosen.placement.stage)
      kept.push_back(int(i));
  return kept;
}

RolloutResult attention_rollout(const std::vector<AttentionCapture>& layers, const RolloutOptions& options,
                                int64_t batch) {
  torch::NoGradGuard no_grad;
  if (layers.empty()) throw std::invalid_argument("attention rollout needs the captured layers (run with capture)");
  const TokenLayout& layout = layers.front().layout;
  const int64_t tokens = layout.total_tokens();
  for (const auto& layer : layers)
    if (!same_tokens(layer.layout, layout) || !same_tokens(layer.key_layout, layout))
      throw std::invalid_argument("attention rollout needs layers that share one token grid (" + layer.placement.name +
                                  " has another)");
  if (options.query < 0 || options.query >= tokens)
    throw std::out_of_range("rollout query token " + std::to_string(options.query) + " is outside 0.." +
                            std::to_string(tokens - 1));
  // Row q of A_L ... A_1: start from e_q and multiply by the layers from the last to the first.
  auto row = torch::zeros({1, tokens});
  row[0][options.query] = 1.0;
  for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer)
    row = torch::matmul(row, rollout_factor(fuse_heads(*layer, options.fusion, batch), options.discard_ratio));
  RolloutResult result;
  result.row = row[0];
  result.patch_map = result.row.slice(0, layout.prefix_tokens()).reshape({layout.grid_h, layout.grid_w}).contiguous();
  result.normalised = result.patch_map / result.patch_map.max().clamp_min(1e-30);
  return result;
}

}  // namespace attnscope
