#include "analysis/attribution.h"

#include <torch/torch.h>

#include <chrono>
#include <sstream>

#include "analysis/cam_methods.h"
#include "analysis/integrated_gradients.h"
#include "analysis/relevance.h"
#include "analysis/rollout.h"

namespace attnscope {

const std::vector<std::string>& attribution_method_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list = cam_method_names();
    for (const char* name : {"relevance", "gradrollout", "rollout", "attention", "ig"}) list.push_back(name);
    return list;
  }();
  return names;
}

bool is_attribution_method(const std::string& name) {
  const auto& names = attribution_method_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool reads_hook_point(const std::string& method) { return is_cam_method(method); }

bool reads_attention_layer(const std::string& method) {
  return method == "relevance" || method == "gradrollout" || method == "rollout" || method == "attention";
}

std::vector<std::string> parse_method_list(const std::string& text, const std::string& option) {
  if (text == "all") return attribution_method_names();
  std::vector<std::string> methods;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    if (!is_attribution_method(item)) {
      std::string known;
      for (const auto& name : attribution_method_names()) known += (known.empty() ? "" : ", ") + name;
      throw std::invalid_argument(option + ": unknown method '" + item.substr(0, 80) + "' (expected " + known +
                                  ", or all)");
    }
    if (std::find(methods.begin(), methods.end(), item) == methods.end()) methods.push_back(item);
  }
  if (methods.empty()) throw std::invalid_argument(option + " needs at least one method");
  return methods;
}

namespace {

int layer_index(int layer, int depth) {
  const int resolved = layer < 0 ? depth + layer : layer;
  if (resolved < 0 || resolved >= depth)
    throw std::invalid_argument("--layer " + std::to_string(layer) + ": the model has " + std::to_string(depth) +
                                " attention layers (0.." + std::to_string(depth - 1) + ")");
  return resolved;
}

// The read-out row of a layer's queries: the class token's, or without one the mean of the patch
// queries' rows (what a pooled head reads).
torch::Tensor readout_row(const torch::Tensor& matrix, const TokenLayout& queries) {
  if (queries.has_class_token) return matrix[0];
  return matrix.slice(0, queries.prefix_tokens()).mean(0);
}

std::string layer_range(const std::vector<int>& layers) {
  return "layers " + std::to_string(layers.front()) + ".." + std::to_string(layers.back());
}

AttributionMap from_captures(const std::string& method, const std::vector<AttentionCapture>& layers,
                             const AttributionRequest& request) {
  c10::InferenceMode inference;
  AttributionMap result;
  result.class_specific = false;
  const int selected = layer_index(request.attention_layer, int(layers.size()));
  const AttentionCapture& chosen = layers[size_t(selected)];
  torch::Tensor row;
  if (method == "attention") {
    row = readout_row(fuse_heads(chosen, HeadFusion::Mean), chosen.layout);
    result.where = chosen.placement.name + ", mean of heads, " +
                   (chosen.layout.has_class_token ? "class token row" : "mean of the patch rows");
    result.layout = chosen.key_layout;
  } else {
    const std::vector<int> indices = rollout_layers(layers, selected);
    const int64_t tokens = chosen.layout.total_tokens();
    // Row `readout` of A_L ... A_1, from the last layer down.
    row = readout_row(torch::eye(tokens), chosen.layout).unsqueeze(0);
    for (size_t i = indices.size(); i-- > 0;)
      row = torch::matmul(row, rollout_factor(fuse_heads(layers[size_t(indices[i])], request.fusion), request.discard));
    row = row[0];
    result.where = layer_range(indices) + ", " + to_string(request.fusion) + " of heads";
    result.layout = chosen.layout;
  }
  const TokenLayout& grid = result.layout;
  result.raw = row.slice(0, grid.prefix_tokens()).reshape({grid.grid_h, grid.grid_w}).to(torch::kFloat).contiguous();
  result.map = result.raw / result.raw.max().clamp_min(1e-30);
  result.normalisation = "x / max";
  return result;
}

}  // namespace

AttributionMap compute_attribution(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                   const Normalization& normalization, const AttributionRequest& request,
                                   const std::vector<AttentionCapture>* captures) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& method = request.method;
  AttributionMap result;
  if (is_cam_method(method)) {
    CamOptions options;
    options.method = parse_cam_method(method);
    options.layer = request.layer;
    options.target_class = request.target_class;
    options.progress = request.progress;
    const CamResult cam = class_activation_map(model, image, settings, options);
    result.map = cam.scaled;
    result.raw = cam.cam;
    result.layout = cam.layout;
    result.where = cam.layer;
    result.target_class = cam.target.index;
    result.class_specific = options.method != CamMethod::EigenCam;
    result.warning = cam.warning;
    result.normalisation = "ReLU, then (x - min) / (max + 1e-7) (pytorch-grad-cam's scale_cam_image)";
  } else if (method == "relevance" || method == "gradrollout") {
    RelevanceOptions options;
    options.rule = method == "relevance" ? RelevanceRule::Chefer : RelevanceRule::GradientRollout;
    options.target_class = request.target_class;
    options.layer = request.attention_layer;
    options.discard_ratio = request.discard;
    const RelevanceResult relevance = attention_relevance(model, image, settings, options);
    result.map = relevance.normalised;
    result.raw = relevance.patch_map;
    result.layout = relevance.layout;
    result.where = layer_range(relevance.layers) + ", " + relevance.readout;
    result.target_class = relevance.target.index;
    result.normalisation = method == "relevance" ? "(x - min) / (max - min)" : "x / max";
  } else if (method == "rollout" || method == "attention") {
    if (captures) {
      result = from_captures(method, *captures, request);
    } else {
      c10::InferenceMode inference;
      const ForwardOutput output = model.forward(image, settings);
      result = from_captures(method, output.layers, request);
    }
  } else if (method == "ig") {
    IntegratedGradientsOptions options;
    options.steps = request.ig_steps;
    options.baseline = request.ig_baseline;
    options.target_class = request.target_class;
    options.progress = request.progress;
    const IntegratedGradientsResult ig = integrated_gradients(model, image, settings, normalization, options);
    result.map = ig.scaled;
    result.raw = ig.patch_map;
    result.layout = ig.layout;
    result.where =
        "input (" + std::to_string(ig.steps) + " steps from the " + to_string(request.ig_baseline) + " baseline)";
    result.target_class = ig.target.index;
    result.normalisation = "sum of |attribution| over channels and the patch's pixels, then (x - min) / (max + 1e-7)";
  } else {
    parse_method_list(method, "method");  // throws with the list of methods
  }
  result.method = method;
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace attnscope
