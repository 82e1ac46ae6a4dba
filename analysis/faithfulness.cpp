#include "analysis/faithfulness.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "analysis/attribution_target.h"

namespace attnscope {

double area_under_curve(const std::vector<double>& x, const std::vector<double>& y) {
  double area = 0.0;
  for (size_t i = 1; i < x.size() && i < y.size(); ++i) area += (x[i] - x[i - 1]) * (y[i] + y[i - 1]) / 2.0;
  return area;
}

FaithfulnessProbe::FaithfulnessProbe(Backbone& model, const torch::Tensor& input, const AttentionSettings& settings,
                                     const Normalization& normalization, const FaithfulnessOptions& options)
    : model_(model), settings_(settings), options_(options) {
  if (model.output_kind() != OutputKind::Logits && options.target.kind == TargetKind::Class)
    throw std::invalid_argument(
        "faithfulness curves record a class probability; this model's output is " +
        std::string(model.output_kind() == OutputKind::Embedding ? "an embedding" : "features") +
        " without classes: give --target norm, text:PROMPT or image:FILE to record that score instead");
  if (options.steps < 1 || options.steps > 10000)
    throw std::invalid_argument("--steps must be from 1 to 10000, got " + std::to_string(options.steps));
  check_target(model, options.target);
  c10::InferenceMode inference;
  input_ = input.detach();
  ForwardOptions plain;
  plain.capture = false;
  const ForwardOutput output = model.forward(input_, settings, plain);
  const auto logits = output.logits[0].to(torch::kCPU, torch::kFloat);
  target_ = resolve_target(model, options.target, logits);
  records_probability_ = target_.kind == TargetKind::Class;
  probability_ = records_probability_ ? logits.softmax(0)[target_.index].item<double>()
                                      : target_scores(output.logits, target_)[0].item<double>();
  const double sigma = options.blur_sigma > 0 ? options.blur_sigma : double(output.layout.patch_size);
  replacement_ = replacement_image(input_, options.replacement, sigma, normalization);
}

std::vector<double> FaithfulnessProbe::probabilities(const torch::Tensor& removed) const {
  c10::InferenceMode inference;
  ForwardOptions plain;
  plain.capture = false;
  std::vector<double> values;
  const int64_t count = removed.size(0), batch = std::max(1, options_.batch);
  for (int64_t begin = 0; begin < count; begin += batch) {
    if (options_.cancelled && options_.cancelled()) throw Cancelled();
    const int64_t size = std::min(batch, count - begin);
    const auto mask = removed.narrow(0, begin, size).unsqueeze(1).to(input_.device());  // [b, 1, H, W]
    const auto images = torch::where(mask, replacement_, input_);
    const auto outputs = model_.forward(images, settings_, plain).logits;
    const auto chosen = records_probability_
                            ? outputs.to(torch::kCPU, torch::kDouble).softmax(1).select(1, target_.index).contiguous()
                            : target_scores(outputs, target_).to(torch::kCPU, torch::kDouble).contiguous();
    values.insert(values.end(), chosen.data_ptr<double>(), chosen.data_ptr<double>() + size);
  }
  return values;
}

torch::Tensor FaithfulnessProbe::removed_pixels(const torch::Tensor& order, int grid_h, int grid_w,
                                                std::vector<double>& fraction) const {
  const int64_t cells = int64_t(grid_h) * grid_w;
  if (order.numel() != cells) throw std::invalid_argument("faithfulness: the order does not cover the map's cells");
  const int height = int(input_.size(2)), width = int(input_.size(3));
  if (grid_h > height || grid_w > width) throw std::invalid_argument("faithfulness: the map is finer than the image");
  const int steps = int(std::min<int64_t>(options_.steps, cells));
  // rank[cell] = its place in the order; a pixel is removed at step i when its cell's rank < k_i.
  auto rank = torch::empty({cells}, torch::kLong);
  rank.index_put_({order.to(torch::kCPU, torch::kLong).reshape({-1})}, torch::arange(cells, torch::kLong));
  auto cell_of_row = ((torch::arange(height, torch::kLong) + 1) * grid_h - 1).div(height, "floor");
  auto cell_of_col = ((torch::arange(width, torch::kLong) + 1) * grid_w - 1).div(width, "floor");
  const auto pixel_rank = rank.index({cell_of_row.unsqueeze(1) * grid_w + cell_of_col.unsqueeze(0)});  // [H, W]
  std::vector<int64_t> counts;
  fraction.clear();
  for (int i = 0; i <= steps; ++i) {
    counts.push_back(int64_t(std::llround(double(i) * double(cells) / steps)));
    fraction.push_back(double(counts.back()) / double(cells));
  }
  return pixel_rank.unsqueeze(0) < torch::tensor(counts).view({-1, 1, 1});
}

Faithfulness FaithfulnessProbe::measure_order(const torch::Tensor& order, int grid_h, int grid_w) const {
  Faithfulness result;
  const torch::Tensor removed = removed_pixels(order, grid_h, grid_w, result.deletion.fraction);
  result.insertion.fraction = result.deletion.fraction;
  result.deletion.probability = probabilities(removed);
  result.insertion.probability = probabilities(removed.logical_not());
  result.deletion.auc = area_under_curve(result.deletion.fraction, result.deletion.probability);
  result.insertion.auc = area_under_curve(result.insertion.fraction, result.insertion.probability);
  return result;
}

namespace {

// A map's cells, largest first; equal values keep their row-major order.
torch::Tensor cells_by_value(const torch::Tensor& map) {
  if (map.dim() != 2) throw std::invalid_argument("faithfulness: a map must be [grid_h, grid_w]");
  const auto values = map.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
  return std::get<1>(values.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
}

}  // namespace

FaithfulnessCurve FaithfulnessProbe::deletion(const torch::Tensor& map) const {
  FaithfulnessCurve curve;
  curve.probability =
      probabilities(removed_pixels(cells_by_value(map), int(map.size(0)), int(map.size(1)), curve.fraction));
  curve.auc = area_under_curve(curve.fraction, curve.probability);
  return curve;
}

Faithfulness FaithfulnessProbe::measure(const torch::Tensor& map) const {
  return measure_order(cells_by_value(map), int(map.size(0)), int(map.size(1)));
}

Faithfulness FaithfulnessProbe::random_baseline(int grid_h, int grid_w) const {
  auto generator = at::detail::createCPUGenerator(options_.seed);
  Faithfulness mean;
  const int orders = std::max(1, options_.random_orders);
  for (int r = 0; r < orders; ++r) {
    const auto order = torch::randperm(int64_t(grid_h) * grid_w, generator, torch::TensorOptions().dtype(torch::kLong));
    const Faithfulness one = measure_order(order, grid_h, grid_w);
    if (r == 0) {
      mean = one;
      continue;
    }
    for (size_t i = 0; i < one.deletion.probability.size(); ++i) {
      mean.deletion.probability[i] += one.deletion.probability[i];
      mean.insertion.probability[i] += one.insertion.probability[i];
    }
  }
  for (auto* curve : {&mean.deletion, &mean.insertion}) {
    for (double& p : curve->probability) p /= orders;
    curve->auc = area_under_curve(curve->fraction, curve->probability);
  }
  return mean;
}

}  // namespace attnscope
