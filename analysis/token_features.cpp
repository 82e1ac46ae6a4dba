#include "analysis/token_features.h"

#include <torch/torch.h>

#include "analysis/gradcam.h"

namespace attnscope {

using torch::indexing::Slice;

const std::vector<EnumEntry<Facet>>& EnumTable<Facet>::entries() {
  static const std::vector<EnumEntry<Facet>> table = {{Facet::Key, "key", nullptr},
                                                      {Facet::Query, "query", nullptr},
                                                      {Facet::Value, "value", nullptr},
                                                      {Facet::Token, "token", nullptr}};
  return table;
}

torch::Tensor TokenRows::patches() const { return rows.index({Slice(layout.prefix_tokens())}); }

std::string block_point(int layer) { return "blocks." + std::to_string(layer); }

namespace {

// The hook's tensor of batch item 0 as token rows: a token sequence as it is, a grid row-major.
torch::Tensor rows_at_point(const torch::Tensor& value, const HookPoint& point) {
  const torch::Tensor rows =
      point.format == HookPoint::Format::Tokens ? value[0] : patch_rows(value, point);  // no prefix off the grid
  return rows.detach().to(torch::kCPU, torch::kFloat).contiguous().clone();
}

}  // namespace

std::vector<TokenRows> read_token_rows(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                       const std::vector<std::string>& points, ForwardOutput* output,
                                       const std::function<bool()>& cancelled) {
  std::vector<TokenRows> read(points.size());
  for (size_t i = 0; i < points.size(); ++i) read[i].point = model.resolve_hook_point(points[i]);
  c10::InferenceMode inference;
  ForwardOptions options;
  options.capture = output != nullptr;
  options.cancelled = cancelled;
  options.hook = [&](const HookPoint& point, torch::Tensor& value) {
    for (TokenRows& entry : read)
      if (entry.point == point.name && !entry.rows.defined()) {
        entry.rows = rows_at_point(value, point);
        entry.layout = point.layout;
        if (point.format != HookPoint::Format::Tokens) {
          // Off the token sequence (a grid of channels): the layout's prefix tokens are not there.
          entry.layout.has_class_token = entry.layout.has_dist_token = false;
          entry.layout.register_tokens = 0;
        }
      }
  };
  ForwardOutput result = model.forward(image, settings, options);
  for (const TokenRows& entry : read)
    if (!entry.rows.defined()) throw std::logic_error("the forward pass never reached " + entry.point);
  if (output) *output = std::move(result);
  return read;
}

namespace {

// [G, S, h x d] from per-head [G, h, S, d]: each slot's heads side by side.
torch::Tensor heads_side_by_side(const torch::Tensor& per_head) {
  return per_head.permute({0, 2, 1, 3}).reshape({per_head.size(0), per_head.size(2), -1});
}

TokenRows facet_rows_of_one_capture(const AttentionCapture& capture, Facet facet) {
  const bool keys = facet != Facet::Query;
  const torch::Tensor& per_head = facet == Facet::Query ? capture.q : facet == Facet::Key ? capture.k : capture.v;
  const TokenLayout& layout = keys ? capture.key_layout : capture.layout;
  TokenRows out;
  out.point = capture.placement.name + " " + enum_name(facet);
  out.layout = layout;
  const torch::Tensor grouped = heads_side_by_side(per_head.detach()).to(torch::kCPU, torch::kFloat);
  const torch::Tensor& slots = keys ? capture.key_slots : capture.query_slots;
  if (!slots.defined()) {
    if (grouped.size(1) != layout.total_tokens())
      throw std::logic_error(out.point + ": " + std::to_string(grouped.size(1)) + " rows for " +
                             std::to_string(layout.total_tokens()) + " tokens");
    out.rows = grouped[0].contiguous();
  } else {
    // Windows: every slot that holds an image token puts it back in its place (a token in several
    // groups has the same projection in each: the projection acts on each token alone).
    const torch::Tensor slot_tokens = slots.to(torch::kCPU).reshape({-1});
    const torch::Tensor kept = slot_tokens.ge(0);
    const torch::Tensor flat = grouped.reshape({-1, grouped.size(2)});
    out.rows = torch::zeros({layout.total_tokens(), grouped.size(2)}, flat.options());
    out.rows.index_put_({slot_tokens.index({kept})}, flat.index({kept}));
    torch::Tensor covered = torch::zeros({layout.total_tokens()}, torch::kBool);
    covered.index_put_({slot_tokens.index({kept})}, true);
    if (!covered.all().item<bool>()) throw std::logic_error(out.point + ": some tokens are in no window");
  }
  if (facet == Facet::Key && capture.attention.learned_positional_encoding)
    out.note = "FLatten's keys with the learned positional encoding this layer adds to them";
  if (capture.attention.learned_anchors && facet != Facet::Value && capture.attention.native)
    out.note = "AnchorFormer projects queries and keys with one matrix: key and query are the same";
  return out;
}

}  // namespace

TokenRows facet_rows(const AttentionCapture& capture, Facet facet) {
  if (facet == Facet::Token)
    throw std::invalid_argument("the token facet is a block's output, read at a hook point, not from a capture");
  const std::string where = capture.placement.name;
  if (!capture.branches.empty()) {
    // CSwin: each branch's heads over the same tokens, side by side as the layer concatenates them.
    std::vector<torch::Tensor> parts;
    TokenRows joined;
    for (const AttentionCapture& branch : capture.branches) {
      TokenRows part = facet_rows(branch, facet);
      parts.push_back(part.rows);
      joined.layout = part.layout;
      joined.note = part.note;
    }
    joined.point = where + " " + enum_name(facet);
    joined.rows = torch::cat(parts, 1).contiguous();
    return joined;
  }
  if (capture.heads == 0)
    throw std::invalid_argument(where +
                                " computes no attention (it mixes tokens by convolutions only): it has no query, key "
                                "or value; use the token facet");
  if (!capture.q.defined())
    throw std::invalid_argument(where +
                                ": this model reports only its attention probabilities (a TorchScript file): it has "
                                "no query, key or value to read");
  if (facet != Facet::Query &&
      (capture.key_layout.grid_h != capture.layout.grid_h || capture.key_layout.grid_w != capture.layout.grid_w))
    throw std::invalid_argument(where + ": its keys and values are on a reduced " +
                                std::to_string(capture.key_layout.grid_h) + "x" +
                                std::to_string(capture.key_layout.grid_w) +
                                " grid (spatial reduction), not one per patch: use the query or token facet");
  return facet_rows_of_one_capture(capture, facet);
}

}  // namespace attnscope
