#include "analysis/attribution.h"

#include <torch/torch.h>

#include <chrono>
#include <sstream>

#include "analysis/cam_methods.h"
#include "analysis/integrated_gradients.h"
#include "analysis/relevance.h"
#include "analysis/rollout.h"

namespace attnscope {

const std::vector<EnumEntry<AttributionMethod>>& EnumTable<AttributionMethod>::entries() {
  static const std::vector<EnumEntry<AttributionMethod>> table = {
      {AttributionMethod::GradCam, "gradcam", "Grad-CAM"},
      {AttributionMethod::GradCamPlusPlus, "gradcam++", "Grad-CAM++"},
      {AttributionMethod::XGradCam, "xgradcam", "XGrad-CAM"},
      {AttributionMethod::LayerCam, "layercam", "LayerCAM"},
      {AttributionMethod::EigenCam, "eigencam", "EigenCAM"},
      {AttributionMethod::HiResCam, "hirescam", "HiResCAM"},
      {AttributionMethod::ScoreCam, "scorecam", "Score-CAM"},
      {AttributionMethod::Relevance, "relevance", "attention relevance (Chefer et al.)"},
      {AttributionMethod::GradRollout, "gradrollout", "gradient rollout"},
      {AttributionMethod::Rollout, "rollout", "attention rollout"},
      {AttributionMethod::Attention, "attention", "attention"},
      {AttributionMethod::IntegratedGradients, "ig", "integrated gradients"},
  };
  return table;
}

bool reads_hook_point(AttributionMethod method) { return method <= AttributionMethod::ScoreCam; }

bool reads_attention_layer(AttributionMethod method) {
  return method >= AttributionMethod::Relevance && method <= AttributionMethod::Attention;
}

std::vector<AttributionMethod> parse_method_list(const std::string& text, const std::string& option) {
  std::vector<AttributionMethod> methods;
  if (text == "all") {
    for (const auto& entry : enum_entries<AttributionMethod>()) methods.push_back(entry.value);
    return methods;
  }
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const AttributionMethod* method = find_enum<AttributionMethod>(item);
    if (!method)
      throw std::invalid_argument(option + ": unknown method '" + item.substr(0, 80) + "' (expected " +
                                  enum_choices_text<AttributionMethod>() + ", or all)");
    if (std::find(methods.begin(), methods.end(), *method) == methods.end()) methods.push_back(*method);
  }
  if (methods.empty()) throw std::invalid_argument(option + " needs at least one method");
  return methods;
}

std::string to_string(const std::vector<AttributionMethod>& methods) {
  std::string text;
  for (AttributionMethod method : methods) text += (text.empty() ? "" : ",") + to_string(method);
  return text;
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

AttributionMap from_captures(AttributionMethod method, const std::vector<AttentionCapture>& layers,
                             const AttributionRequest& request) {
  c10::InferenceMode inference;
  AttributionMap result;
  result.class_specific = false;
  const int selected = layer_index(request.attention_layer, int(layers.size()));
  const AttentionCapture& chosen = layers[size_t(selected)];
  torch::Tensor row;
  if (method == AttributionMethod::Attention) {
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
  const AttributionMethod method = request.method;
  AttributionMap result;
  if (reads_hook_point(method)) {
    CamOptions options;
    options.method = method;
    options.layer = request.layer;
    options.target = request.target;
    options.progress = request.progress;
    const CamResult cam = class_activation_map(model, image, settings, options);
    result.map = cam.scaled;
    result.raw = cam.cam;
    result.layout = cam.layout;
    result.where = cam.layer;
    result.target = cam.target;
    result.target_class = cam.target.kind == TargetKind::Class ? cam.target.index : -1;
    result.class_specific = options.method != CamMethod::EigenCam;
    result.warning = cam.warning;
    result.normalisation = "ReLU, then (x - min) / (max + 1e-7) (pytorch-grad-cam's scale_cam_image)";
  } else if (method == AttributionMethod::Relevance || method == AttributionMethod::GradRollout) {
    RelevanceOptions options;
    options.rule = method == AttributionMethod::Relevance ? RelevanceRule::Chefer : RelevanceRule::GradientRollout;
    options.target = request.target;
    options.layer = request.attention_layer;
    options.discard_ratio = request.discard;
    const RelevanceResult relevance = attention_relevance(model, image, settings, options);
    result.map = relevance.normalised;
    result.raw = relevance.patch_map;
    result.layout = relevance.layout;
    result.where = layer_range(relevance.layers) + ", " + relevance.readout;
    result.target = relevance.target;
    result.target_class = relevance.target.kind == TargetKind::Class ? relevance.target.index : -1;
    result.normalisation = method == AttributionMethod::Relevance ? "(x - min) / (max - min)" : "x / max";
  } else if (method == AttributionMethod::Rollout || method == AttributionMethod::Attention) {
    if (captures) {
      result = from_captures(method, *captures, request);
    } else {
      c10::InferenceMode inference;
      const ForwardOutput output = model.forward(image, settings);
      result = from_captures(method, output.layers, request);
    }
  } else {  // integrated gradients
    IntegratedGradientsOptions options;
    options.steps = request.ig_steps;
    options.baseline = request.ig_baseline;
    options.target = request.target;
    options.progress = request.progress;
    const IntegratedGradientsResult ig = integrated_gradients(model, image, settings, normalization, options);
    result.map = ig.scaled;
    result.raw = ig.patch_map;
    result.layout = ig.layout;
    result.where =
        "input (" + std::to_string(ig.steps) + " steps from the " + to_string(request.ig_baseline) + " baseline)";
    result.target = ig.target;
    result.target_class = ig.target.kind == TargetKind::Class ? ig.target.index : -1;
    result.normalisation = "sum of |attribution| over channels and the patch's pixels, then (x - min) / (max + 1e-7)";
  }
  result.method = method;
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace attnscope
