#include "analysis/focus_projection.h"

#include <cstdio>
#include <stdexcept>

#include "analysis/focusing.h"
#include "models/attention_kernels.h"

namespace attnscope {

const std::vector<EnumEntry<FocusProjectionKind>>& EnumTable<FocusProjectionKind>::entries() {
  static const std::vector<EnumEntry<FocusProjectionKind>> table = {
      {FocusProjectionKind::Channels, "channels", nullptr}, {FocusProjectionKind::Pca, "pca", nullptr}};
  return table;
}

FocusProjectionKind parse_focus_projection(const std::string& name) {
  return parse_enum<FocusProjectionKind>("fp-projection", name);
}

std::string to_string(FocusProjectionKind kind) { return enum_name(kind); }

namespace {

std::vector<double> column(const torch::Tensor& values, int64_t index) {
  const torch::Tensor c = values.select(1, index).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::vector<double> as_vector(const torch::Tensor& values) {
  const torch::Tensor c = values.to(torch::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

FocusProjection project_focusing(const AttentionCapture& layer, int64_t head, double p, bool queries,
                                 FocusProjectionKind kind, int max_points) {
  torch::NoGradGuard no_grad;
  if (head < 0 || head >= layer.heads) throw std::out_of_range("head " + std::to_string(head) + " does not exist");
  if (!(p > 0)) throw std::invalid_argument("f_p needs p > 0");
  const FocusFeatures features = focus_features(layer);
  const torch::Tensor all = queries ? features.q : features.k;  // [1, h, T, d]
  // f_p takes its norms as the layer does (all heads' channels or per head), so it runs on all heads.
  const torch::Tensor before = all[0][head], after = focus(all, p, layer.attention.norm)[0][head];  // [T, d]
  const int64_t tokens = before.size(0);
  const int64_t shown = std::min<int64_t>(tokens, std::max(1, max_points));
  const torch::Tensor picked = torch::linspace(0, double(tokens - 1), shown, torch::kDouble).round().to(torch::kLong);
  auto unit = [](const torch::Tensor& x) { return x / x.norm(2, {1}, true).clamp_min(1e-30); };
  const torch::Tensor unit_before = unit(before.index_select(0, picked));
  const torch::Tensor unit_after = unit(after.index_select(0, picked));

  FocusProjection projection;
  projection.vectors = queries ? "queries" : "keys";
  projection.source = features.source;
  projection.shown = int(shown);
  projection.total = int(tokens);
  torch::Tensor axes;  // [d, 2]
  char text[200];
  if (kind == FocusProjectionKind::Channels) {
    // The two channels the directions lean on most, on average: f_p pulls each vector toward its
    // largest channel, so vectors led by one of these two move toward that plot axis.
    const torch::Tensor top = std::get<1>(unit_before.mean(0).topk(2));
    const int64_t a = top[0].item<int64_t>(), b = top[1].item<int64_t>();
    axes = torch::zeros({before.size(1), 2}, torch::kDouble);
    axes.index_put_({a, 0}, 1.0);
    axes.index_put_({b, 1}, 1.0);
    std::snprintf(text, sizeof text, "channels %lld and %lld (the two largest on average) of %lld",
                  static_cast<long long>(a), static_cast<long long>(b), static_cast<long long>(before.size(1)));
    projection.x_label = "channel " + std::to_string(a);
    projection.y_label = "channel " + std::to_string(b);
  } else {
    // The first two principal axes of the directions before f_p (centred); points are projected
    // without centring, so the origin stays the zero vector.
    const torch::Tensor centred = unit_before - unit_before.mean(0, true);
    const auto svd = torch::linalg_svd(centred, false, c10::nullopt);
    const torch::Tensor s = std::get<1>(svd);
    axes = std::get<2>(svd).slice(0, 0, 2).transpose(0, 1).contiguous();  // [d, 2]
    const double explained = ((s.slice(0, 0, 2).pow(2).sum()) / s.pow(2).sum().clamp_min(1e-30)).item<double>();
    std::snprintf(text, sizeof text, "PCA of the directions before f_p (%.0f %% of their variance)", 100 * explained);
    projection.x_label = "PC 1";
    projection.y_label = "PC 2";
  }
  projection.axes = text;
  const torch::Tensor projected_before = torch::matmul(unit_before, axes),
                      projected_after = torch::matmul(unit_after, axes);
  projection.before_x = column(projected_before, 0);
  projection.before_y = column(projected_before, 1);
  projection.after_x = column(projected_after, 0);
  projection.after_y = column(projected_after, 1);
  projection.axis_cosine_before = as_vector(nearest_axis_cosine(unit_before));
  projection.axis_cosine_after = as_vector(nearest_axis_cosine(unit_after));
  return projection;
}

}  // namespace attnscope
