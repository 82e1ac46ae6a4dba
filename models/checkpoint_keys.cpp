#include "models/checkpoint_keys.h"

#include <utility>

#include "core/excerpt.h"

namespace attnscope {

const std::vector<EnumEntry<CheckpointLayout>>& EnumTable<CheckpointLayout>::entries() {
  static const std::vector<EnumEntry<CheckpointLayout>> table = {{CheckpointLayout::Timm, "timm"},
                                                                 {CheckpointLayout::HfVit, "hf-vit"},
                                                                 {CheckpointLayout::HfDeit, "hf-deit"},
                                                                 {CheckpointLayout::HfClip, "hf-clip"},
                                                                 {CheckpointLayout::OpenAiClip, "openai-clip"},
                                                                 {CheckpointLayout::Dinov2, "dinov2"},
                                                                 {CheckpointLayout::Microsoft, "microsoft"},
                                                                 {CheckpointLayout::Original, "original"},
                                                                 {CheckpointLayout::TorchScript, "torchscript"},
                                                                 {CheckpointLayout::HfDinov3, "hf-dinov3"},
                                                                 {CheckpointLayout::HfSiglip, "hf-siglip"},
                                                                 {CheckpointLayout::Dinov3, "dinov3"},
                                                                 {CheckpointLayout::OpenClip, "open-clip"}};
  return table;
}

std::string name_with_layout(const std::string& family, CheckpointLayout layout) {
  return layout == CheckpointLayout::Timm ? family : family + " (" + to_string(layout) + ")";
}

std::string shape_text(const torch::IntArrayRef& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

ShapeReader::ShapeReader(const Checkpoint& checkpoint, std::string family)
    : checkpoint_(checkpoint), family_(std::move(family)) {}

std::string ShapeReader::file_key(const std::string& key) const {
  auto renamed = file_keys_.find(key);
  return renamed == file_keys_.end() ? key : renamed->second;
}

CheckpointError ShapeReader::error(const std::string& key, const std::string& problem) const {
  return CheckpointError("tensor '" + excerpt(file_key(key)) + "' " + problem);
}

const torch::Tensor& ShapeReader::tensor(const std::string& key, int64_t dims) const {
  auto it = checkpoint_.tensors.find(key);
  if (it == checkpoint_.tensors.end()) throw CheckpointError("missing tensor '" + excerpt(file_key(key)) + "'");
  if (it->second.dim() != dims)
    throw error(key, "has " + std::to_string(it->second.dim()) + " dimensions, expected " + std::to_string(dims));
  return it->second;
}

int ShapeReader::size(const std::string& key, int64_t dims, int64_t index, const std::string& what, SizeRange range) {
  return bounded(what, key, tensor(key, dims).size(index), range);
}

int ShapeReader::bounded(const std::string& what, const std::string& source, int64_t value, SizeRange range) {
  ArchDimension dimension{what, file_key(source), value, range};
  check_dimension(family_, dimension);  // every range lies within int
  dimensions_.push_back(std::move(dimension));
  return int(value);
}

ArchEstimate ShapeReader::estimate(const StagedMemory& memory) const {
  return {family_, dimensions_, memory.parameter_bytes(), memory.forward_bytes()};
}

FocusedShapes read_focused_attention(ShapeReader& shapes, const std::string& prefix, int dim) {
  FocusedShapes focused;
  const std::string dwc_key = prefix + "dwc.weight";
  const auto& dwc = shapes.tensor(dwc_key, 4);
  focused.dwc_kernel = shapes.size(dwc_key, 4, 2, "depthwise kernel size", kKernelRange);
  const int head_dim = shapes.size(dwc_key, 4, 0, "head width", kHeadWidthRange);
  if (dwc.size(1) != 1 || dwc.size(3) != focused.dwc_kernel || focused.dwc_kernel % 2 == 0 || dim % head_dim != 0)
    throw shapes.error(dwc_key,
                       "has an unexpected shape: FLatten's DWC is [d, 1, k, k] with an odd k and d dividing "
                       "the width " +
                           std::to_string(dim));
  focused.heads = shapes.bounded("head count", dwc_key, dim / head_dim, kHeadRange);
  focused.encoding_tokens =
      shapes.size(prefix + "positional_encoding", 3, 1, "positional encoding length", kEncodingRange);
  return focused;
}

}  // namespace attnscope
