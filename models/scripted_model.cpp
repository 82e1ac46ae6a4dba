#include "models/scripted_model.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "core/zip_archive.h"

namespace attnscope {

namespace {

constexpr const char* kMetadataFile = "attnscope.json";
constexpr const char* kExportHint =
    "export the model with scripts/export_torchscript.py (see its --help for what a model must satisfy)";

[[noreturn]] void refuse(const std::string& path, const std::string& why) { throw CheckpointError(path + ": " + why); }

int positive_int(const nlohmann::json& value, const std::string& what, const std::string& path, int limit = 1 << 16) {
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > limit)
    refuse(path, "attnscope.json: " + what + " must be a whole number from 1 to " + std::to_string(limit));
  return value.get<int>();
}

std::array<float, 3> rgb_triple(const nlohmann::json& value, const std::string& what, const std::string& path) {
  if (!value.is_array() || value.size() != 3) refuse(path, "attnscope.json: " + what + " must be 3 numbers");
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!value[i].is_number()) refuse(path, "attnscope.json: " + what + " must be 3 numbers");
    out[i] = value[i].get<float>();
  }
  return out;
}

std::string extra_file(const std::string& path, torch::Device device, torch::jit::Module* module) {
  torch::jit::ExtraFilesMap extra{{kMetadataFile, ""}};
  try {
    auto loaded = torch::jit::load(path, device, extra);
    if (module) *module = std::move(loaded);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    refuse(path, "cannot load the TorchScript archive: " + what.substr(0, what.find('\n')).substr(0, 300));
  }
  return extra[kMetadataFile];
}

}  // namespace

bool has_attnscope_metadata(const std::string& path) {
  try {
    return open_torch_zip(path)->hasRecord(std::string("extra/") + kMetadataFile);
  } catch (const std::exception&) {
    return false;
  }
}

std::map<std::string, torch::Tensor> scripted_state_dict(const std::string& path) {
  torch::jit::Module module;
  extra_file(path, torch::kCPU, &module);
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : module.named_parameters()) state[item.name] = item.value.detach();
  for (const auto& item : module.named_buffers()) state[item.name] = item.value.detach();
  return state;
}

ScriptedModel::ScriptedModel(const std::string& path, torch::Device device)
    : module_(std::make_shared<torch::jit::Module>()) {
  const std::string text = extra_file(path, device, module_.get());
  if (text.empty()) refuse(path, std::string("a TorchScript file without attnscope.json; ") + kExportHint);
  nlohmann::json meta;
  try {
    meta = parse_json_checked(text, "attnscope.json");
  } catch (const std::invalid_argument& e) {
    refuse(path, e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != "attnscope-torchscript")
    refuse(path, std::string("attnscope.json is not attnscope-torchscript metadata; ") + kExportHint);
  if (!meta.contains("version") || meta["version"] != 1)
    refuse(path, "attnscope.json version is not 1: re-export with this attnscope's scripts/export_torchscript.py");
  name_ = excerpt(meta.value("name", "torchscript"));
  for (const char* key : {"input_size", "mean", "std", "patch_size", "layers"})
    if (!meta.contains(key)) refuse(path, std::string("attnscope.json has no '") + key + "'");
  const auto& size = meta["input_size"];
  if (!size.is_array() || size.size() != 2) refuse(path, "attnscope.json: input_size must be [H, W]");
  const int height = positive_int(size[0], "input_size", path), width = positive_int(size[1], "input_size", path);
  mean_ = rgb_triple(meta["mean"], "mean", path);
  std_ = rgb_triple(meta["std"], "std", path);
  arch_.patch_size = positive_int(meta["patch_size"], "patch_size", path);
  arch_.source_layout = CheckpointLayout::TorchScript;
  const OutputKind* output = find_enum<OutputKind>(meta.value("output", "logits"));
  if (!output || *output == OutputKind::Features) refuse(path, "attnscope.json: output must be logits or embedding");
  arch_.output_kind = *output;
  if (meta.contains("class_names") && meta["class_names"].is_array())
    for (const auto& name : meta["class_names"])
      class_names_.push_back(name.is_string() ? excerpt(name.get<std::string>()) : "");
  arch_.num_classes = int(class_names_.size());

  const auto& layers = meta["layers"];
  if (!layers.is_array() || layers.empty()) refuse(path, "attnscope.json: layers must be a non-empty list");
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& layer = layers[i];
    const std::string where = "layer " + std::to_string(i);
    if (!layer.is_object() || !layer.contains("heads") || !layer.contains("grid") || !layer.contains("prefix_names"))
      refuse(path, "attnscope.json: " + where + " needs heads, grid and prefix_names");
    ScriptedLayer entry{excerpt(layer.value("name", where)), excerpt(layer.value("kind", "attention")),
                        positive_int(layer["heads"], where + " heads", path)};
    const auto& grid = layer["grid"];
    if (!grid.is_array() || grid.size() != 2) refuse(path, "attnscope.json: " + where + " grid must be [h, w]");
    const int grid_h = positive_int(grid[0], where + " grid", path),
              grid_w = positive_int(grid[1], where + " grid", path);
    if (grid_h * arch_.patch_size != height || grid_w * arch_.patch_size != width)
      refuse(path, "attnscope.json: " + where + " grid " + std::to_string(grid_h) + "x" + std::to_string(grid_w) +
                       " with patch " + std::to_string(arch_.patch_size) + " does not cover the " +
                       std::to_string(height) + "x" + std::to_string(width) + " input");
    // The prefix tokens in order: the class token, a distillation token, then registers.
    bool cls = false, dist = false;
    int registers = 0;
    for (const auto& prefix : layer["prefix_names"]) {
      const std::string name = prefix.is_string() ? prefix.get<std::string>() : "";
      if (name == "cls" && !cls && !dist && registers == 0)
        cls = true;
      else if (name == "dist" && !dist && registers == 0)
        dist = true;
      else if (name == "reg" + std::to_string(registers))
        ++registers;
      else
        refuse(path, "attnscope.json: " + where + " prefix_names must be cls, dist, reg0, reg1, ... in that order");
    }
    if (i == 0) {
      arch_.class_token = cls;
      arch_.dist_token = dist;
      arch_.register_tokens = registers;
      arch_.pos_grid_h = grid_h;
      arch_.pos_grid_w = grid_w;
      arch_.heads = entry.heads;
    } else if (cls != arch_.class_token || dist != arch_.dist_token || registers != arch_.register_tokens ||
               grid_h != arch_.pos_grid_h || grid_w != arch_.pos_grid_w) {
      refuse(path, "attnscope.json: " + where +
                       " has another token layout than layer 0 (hierarchical models are "
                       "not supported through TorchScript)");
    }
    BlockArch block;
    block.attention.heads = entry.heads;
    arch_.blocks.push_back(block);
    layers_.push_back(entry);
  }
  arch_.depth = int(layers_.size());
  module_->eval();
}

int64_t ScriptedModel::parameter_count() const {
  int64_t count = 0;
  for (const auto& parameter : module_->parameters()) count += parameter.numel();
  return count;
}

nlohmann::json ScriptedModel::describe() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : layers_)
    layers.push_back({{"name", layer.name}, {"kind", layer.kind}, {"heads", layer.heads}});
  return {{"family", family()},
          {"name", name_},
          {"native_input", {arch_.native_height(), arch_.native_width()}},
          {"patch_size", arch_.patch_size},
          {"num_classes", arch_.num_classes},
          {"output", to_string(arch_.output_kind)},
          {"prefix_tokens", arch_.prefix_tokens()},
          {"layers", layers}};
}

std::vector<std::string> ScriptedModel::summary_lines() const {
  std::vector<std::string> lines{
      "name          " + name_,
      "grid          " + std::to_string(arch_.pos_grid_h) + "x" + std::to_string(arch_.pos_grid_w) + " patches of " +
          std::to_string(arch_.patch_size) + ", " + std::to_string(arch_.prefix_tokens()) + " prefix tokens"};
  for (const auto& layer : layers_)
    lines.push_back("layer         " + layer.name + ": " + layer.kind + ", " + std::to_string(layer.heads) + " heads");
  return lines;
}

InputGeometry ScriptedModel::input_geometry() const {
  InputGeometry geometry{arch_.native_height(), arch_.native_width(), arch_.patch_size};
  geometry.fixed = true;
  return geometry;
}

std::string ScriptedModel::resolve_hook_point(const std::string&) const {
  throw std::invalid_argument(
      "a TorchScript file has no hook points: Grad-CAM needs the activations of a model attnscope implements "
      "natively");
}

ForwardOutput ScriptedModel::forward(const torch::Tensor& images, const AttentionSettings& settings,
                                     const ForwardOptions& options) {
  if (!settings.ablation.empty())
    throw std::invalid_argument(
        "--ablate: a TorchScript file runs its own forward; ablating a head needs a model attnscope implements "
        "natively (load the checkpoint itself)");
  if (settings.sae.intervenes())
    throw std::invalid_argument(
        "--sae-off/--sae-add: a TorchScript file runs its own forward; an SAE intervention needs a model attnscope "
        "implements natively (load the checkpoint itself)");
  if (images.dim() != 4 || images.size(2) != arch_.native_height() || images.size(3) != arch_.native_width())
    throw std::invalid_argument("this TorchScript file was traced for " + std::to_string(arch_.native_height()) + "x" +
                                std::to_string(arch_.native_width()) + " inputs (use --size native)");
  if (options.cancelled && options.cancelled()) throw Cancelled();
  torch::NoGradGuard no_grad;
  const auto result = module_->forward({images});
  if (!result.isTuple() || result.toTupleRef().elements().size() != 2)
    throw std::runtime_error("the TorchScript model did not return (output, attentions)");
  const auto& elements = result.toTupleRef().elements();
  std::vector<torch::Tensor> attentions;
  if (elements[1].isTuple())
    for (const auto& item : elements[1].toTupleRef().elements()) attentions.push_back(item.toTensor());
  else if (elements[1].isTensorList())
    attentions = elements[1].toTensorVector();
  else
    throw std::runtime_error("the TorchScript model's second output is not a list of attention tensors");
  if (attentions.size() != layers_.size())
    throw std::runtime_error("the TorchScript model returned " + std::to_string(attentions.size()) +
                             " attention maps, its metadata lists " + std::to_string(layers_.size()) + " layers");
  ForwardOutput output;
  output.logits = elements[0].toTensor();
  if (output.logits.dim() == 1) output.logits = output.logits.unsqueeze(0);
  output.layout = arch_.layout_for(int(images.size(2)), int(images.size(3)));
  const int64_t tokens = output.layout.total_tokens();
  if (!options.capture) return output;
  for (size_t i = 0; i < attentions.size(); ++i) {
    const auto& probabilities = attentions[i];
    if (probabilities.dim() != 4 || probabilities.size(1) != layers_[i].heads || probabilities.size(2) != tokens ||
        probabilities.size(3) != tokens)
      throw std::runtime_error("attention of " + layers_[i].name + " is not [B, " + std::to_string(layers_[i].heads) +
                               ", " + std::to_string(tokens) + ", " + std::to_string(tokens) + "]");
    AttentionCapture capture;
    capture.layout = output.layout;
    capture.key_layout = output.layout;
    capture.placement.name = layers_[i].name;
    capture.placement.block = int(i);
    capture.heads = layers_[i].heads;
    capture.probabilities = probabilities.to(torch::kFloat);
    capture.attention.kernel = Kernel::Softmax;
    capture.attention.native = true;
    capture.attention.recorded = true;
    output.layers.push_back(std::move(capture));
  }
  return output;
}

}  // namespace attnscope
