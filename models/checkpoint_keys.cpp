#include "models/checkpoint_keys.h"

#include <utility>

#include "core/excerpt.h"
#include "core/number_text.h"
#include "models/arch_config.h"
#include "models/attention_kernels_successors.h"

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

AgentShapes read_agent_attention(ShapeReader& shapes, const std::string& prefix, int dim, bool depthwise_conv) {
  AgentShapes agent;
  agent.heads = shapes.size(prefix + "an_bias", 4, 0, "head count", kHeadRange);
  agent.agents = shapes.size(prefix + "an_bias", 4, 1, "agent count", kEncodingRange);
  agent.side = shapes.size(prefix + "ah_bias", 5, 3, "agent bias grid side", kGridRange);
  const int64_t h = agent.heads, a = agent.agents, s = agent.side;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"an_bias", {h, a, 7, 7}},      {"na_bias", {h, a, 7, 7}},    {"ah_bias", {1, h, a, s, 1}},
      {"aw_bias", {1, h, a, 1, s}},   {"ha_bias", {1, h, s, 1, a}}, {"wa_bias", {1, h, 1, s, a}},
      {"dwc.weight", {dim, 1, 3, 3}}, {"dwc.bias", {dim}}};
  for (const auto& [part, sizes] : expected) {
    if (!depthwise_conv && part.rfind("dwc.", 0) == 0) continue;
    if (!shapes.has(prefix + part))
      throw CheckpointError("missing tensor '" + shapes.file_key(prefix + part) +
                            "' (Agent Attention's module has every position bias and its depthwise conv): the "
                            "checkpoint is incomplete or damaged");
    if (shapes.tensor(prefix + part, int64_t(sizes.size())).sizes() != c10::IntArrayRef(sizes))
      throw shapes.error(prefix + part, "does not fit " + std::to_string(h) + " heads, " + std::to_string(a) +
                                            " agents on a " + std::to_string(s) + "x" + std::to_string(s) +
                                            " grid and width " + std::to_string(dim) + " (from '" +
                                            shapes.file_key(prefix + "an_bias") + "' and '" +
                                            shapes.file_key(prefix + "ah_bias") + "')");
  }
  if (dim % agent.heads != 0)
    throw shapes.error(prefix + "an_bias",
                       "gives " + std::to_string(h) + " heads, which do not divide the width " + std::to_string(dim));
  if (const std::string problem = successor_kernels::agent_count_problem(agent.agents, agent.side * agent.side);
      !problem.empty())
    throw shapes.error(prefix + "an_bias", problem);
  return agent;
}

const char* attn_type_letters(Kernel successor) {
  return successor == Kernel::Agent ? "AB" : successor == Kernel::InLine ? "IS" : "LS";
}

double read_trained_focusing_factor(const nlohmann::json& meta, std::vector<std::string>& notes) {
  if (!meta.is_object() || !meta.contains("focusing_factor")) return 3.0;
  const nlohmann::json& value = meta["focusing_factor"];
  if (!value.is_number() || !(value.get<double>() > 0 && value.get<double>() <= 32))
    throw CheckpointError("focusing_factor " + excerpt(value.dump(), 40) + " is not in (0, 32], the range of --p");
  const double p = value.get<double>();
  if (p != 3.0)
    notes.push_back("trained with focusing factor " + format_double(p) + ": pass --p " + format_double(p) +
                    " to reproduce its outputs (focused blocks run the p setting, 3 by default)");
  return p;
}

void check_config_agent_counts(const nlohmann::json& meta, const std::vector<int>& weights_agents,
                               const std::function<std::string(size_t)>& bias_key) {
  const std::vector<int> given = stage_counts(meta, "agents", weights_agents.size());
  for (size_t s = 0; s < given.size(); ++s)
    if (weights_agents[s] > 0 && weights_agents[s] != given[s])
      throw CheckpointError("the config gives stage " + std::to_string(s) + " " + std::to_string(given[s]) +
                            " agents, the weights of '" + bias_key(s) + "' have " + std::to_string(weights_agents[s]) +
                            ": the config is not this model's");
}

int read_inline_residual(ShapeReader& shapes, const std::string& prefix, int dim) {
  const std::string first = prefix + "residual.0.", last = prefix + "residual.2.";
  const int per_group = shapes.size(first + "weight", 3, 1, "head width", kHeadWidthRange);
  if (dim % per_group != 0)
    throw shapes.error(first + "weight", "groups channels by " + std::to_string(per_group) +
                                             ", which does not divide the width " + std::to_string(dim));
  const int heads = shapes.bounded("head count", first + "weight", dim / per_group, kHeadRange);
  for (const auto& [conv, rows] : {std::pair{first, int64_t(dim)}, std::pair{last, int64_t(9) * dim}}) {
    const auto& weight = shapes.tensor(conv + "weight", 3);
    if (!shapes.has(conv + "bias"))
      throw CheckpointError("missing tensor '" + shapes.file_key(conv + "bias") +
                            "' (InLine's residual predictor is two grouped convolutions with biases)");
    if (weight.size(0) != rows || weight.size(1) != per_group || weight.size(2) != 1 ||
        shapes.tensor(conv + "bias", 1).size(0) != rows)
      throw shapes.error(conv + "weight", "does not fit InLine's residual predictor of " + std::to_string(heads) +
                                              " heads and width " + std::to_string(dim) + ": [" + std::to_string(rows) +
                                              ", " + std::to_string(per_group) + ", 1]");
  }
  return heads;
}

}  // namespace attnscope
