#include "models/backbone.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/cpu_threads.h"
#include "models/forward_progress.h"

namespace attnscope {

const std::vector<EnumEntry<OutputKind>>& EnumTable<OutputKind>::entries() {
  static const std::vector<EnumEntry<OutputKind>> table = {
      {OutputKind::Logits, "logits"}, {OutputKind::Embedding, "embedding"}, {OutputKind::Features, "features"}};
  return table;
}

int64_t Backbone::parameter_count() const {
  int64_t count = 0;
  for (const auto& parameter : parameters()) count += parameter.numel();
  return count;
}

int resolve_module_index(const std::string& text, int count, const std::string& error) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("-0123456789") != std::string::npos ||
      text.find('-', 1) != std::string::npos || text == "-")
    throw std::invalid_argument(error);
  const int index = std::stoi(text);
  if (index < -count || index >= count) throw std::invalid_argument(error);
  return index < 0 ? index + count : index;
}

std::string BlockNaming::block(int stage, int block) const {
  if (stage_prefix.empty()) return block_infix + std::to_string(block);
  return stage_prefix + std::to_string(stage + first_stage) + block_infix + std::to_string(block);
}

bool StagedPass::row_chunked() const { return cpu_inference(images) && !options.hook; }

void StagedPass::hook(const std::string& name, const TokenLayout& layout, torch::Tensor& value) const {
  if (options.hook) options.hook({name, layout, format}, value);
}

int StagedBackbone::attention_layers() const {
  int count = 0;
  for (const StageInfo& stage : design_.stages) count += stage.blocks;
  return count;
}

TokenLayout StagedBackbone::stage_layout(int stage, int grid_h, int grid_w) const {
  TokenLayout layout;
  layout.grid_h = grid_h;
  layout.grid_w = grid_w;
  layout.patch_size = design_.stages[size_t(stage)].reduction;
  return layout;
}

torch::Tensor StagedBackbone::leave_stage(int, const StageTokens& tokens, const StagedPass&) { return tokens.x; }

std::string StagedBackbone::resolve_stage_point(const std::string& spec, const std::string& bad) const {
  for (const StagePoint& point : design_.stage_points) {
    const size_t affixes = point.prefix.size() + point.suffix.size();
    if (spec.size() <= affixes || spec.rfind(point.prefix, 0) != 0 ||
        spec.compare(spec.size() - point.suffix.size(), point.suffix.size(), point.suffix) != 0)
      continue;
    const std::string index = spec.substr(point.prefix.size(), spec.size() - affixes);
    if (index.find('.') != std::string::npos) continue;
    const int stage = resolve_module_index(index, int(design_.stages.size()), bad);
    if (stage < point.first_stage) throw std::invalid_argument(bad);
    if (point.last_block) return design_.naming.block(stage, design_.stages[size_t(stage)].blocks - 1);
    return point.prefix + std::to_string(stage) + point.suffix;
  }
  return "";
}

void StagedBackbone::check_input(const torch::Tensor& images) const {
  if (images.dim() != 4 || images.size(1) != design_.in_chans)
    throw std::invalid_argument("input must be [B, " + std::to_string(design_.in_chans) + ", H, W]");
  const int64_t height = images.size(2), width = images.size(3), multiple = design_.input.multiple;
  const std::string not_multiple = "input " + std::to_string(width) + "x" + std::to_string(height) +
                                   " is not a multiple of the patch size " + std::to_string(multiple);
  if (height % multiple || width % multiple) throw std::invalid_argument(not_multiple);
  if (height < design_.min_side || width < design_.min_side)
    throw std::invalid_argument(design_.too_small ? design_.too_small(width, height) : not_multiple);
}

ForwardOutput StagedBackbone::forward(const torch::Tensor& images, const AttentionSettings& settings,
                                      const ForwardOptions& options) {
  if (!settings.ablation.empty())
    throw std::invalid_argument("--ablate: " + family() +
                                " has no single residual stream of heads to ablate (head ablation runs on ViT-shaped "
                                "models: timm, Hugging Face, CLIP, DINOv2)");
  if (settings.sae.intervenes())
    throw std::invalid_argument("--sae-off/--sae-add: " + family() +
                                " has no single residual stream for a sparse autoencoder (SAEs run on ViT-shaped "
                                "models: timm, Hugging Face, CLIP, DINOv2)");
  check_input(images);
  // Inference on the CPU: small ops on one core, the big ones on all (a family's row chunks,
  // attention, convolutions). With autograd (training, Grad-CAM's tail) every op keeps all cores.
  ScopedThreads small_ops(cpu_inference(images) ? 1 : configured_threads());
  ForwardOutput output;
  const StagedPass pass{images, settings, options, design_.format, options.capture ? &output.pool_attention : nullptr};
  if (options.capture) output.layers.reserve(size_t(attention_layers()));
  StageTokens tokens;
  TokenLayout first_layout;  // stage 0's grid: the output layout without captures
  int layer = 0, blocks = 0;
  for (const auto& stage : design_.stages) blocks += stage.blocks;
  for (int s = 0; s < int(design_.stages.size()); ++s) {
    tokens = enter_stage(s, tokens, pass);
    if (s == 0) first_layout = tokens.layout;
    for (int b = 0; b < design_.stages[size_t(s)].blocks; ++b, ++layer) {
      if (options.cancelled && options.cancelled()) throw Cancelled();
      block_started(layer, blocks, tokens.layout.total_tokens());
      BlockSite site{s, b, layer, design_.naming.block(s, b), tokens.layout, nullptr};
      if (options.capture) {
        AttentionCapture& capture = output.layers.emplace_back();
        capture.placement.name = site.name;
        capture.placement.stage = s;
        capture.placement.block = b;
        capture.layout = capture.key_layout = site.layout;
        site.capture = &capture;
      }
      tokens.x = run_block(site, tokens.x, pass);
    }
    tokens.x = leave_stage(s, tokens, pass);
  }
  output.logits = classify(tokens, pass);
  output.layout = output.layers.empty() ? first_layout : output.layers.front().layout;
  return output;
}

nlohmann::json StagedBackbone::describe() const {
  nlohmann::json described = describe_architecture();
  described["family"] = family();
  described["native_input"] = {design_.input.native_height, design_.input.native_width};
  described["num_classes"] = num_classes();
  described["output"] = to_string(output_kind());
  // One stage (ViT): its depth already counts them.
  if (hierarchical()) described["attention_layers"] = attention_layers();
  return described;
}

std::string StagedBackbone::default_hook_point() const {
  const int last = int(design_.stages.size()) - 1;
  const std::string block = design_.naming.block(last, design_.stages.back().blocks - 1);
  return design_.default_point.empty() ? block : block + "." + design_.default_point;
}

std::string StagedBackbone::hook_point_choices() const {
  const BlockNaming& naming = design_.naming;
  std::string choices, points;
  auto add = [&](const std::string& choice) { choices += (choices.empty() ? "" : ", ") + choice; };
  if (!naming.stage_prefix.empty()) {
    const std::string block = naming.stage_prefix + "S" + naming.block_infix + "B";
    for (const std::string& point : design_.block_points) add(block + "." + point);
    add(block + (naming.first_stage == 0 ? "" : " (S from " + std::to_string(naming.first_stage) + ")"));
  }
  for (const StagePoint& point : design_.stage_points) add(point.prefix + "S" + point.suffix);
  for (const auto& [name, module] : design_.named_points) add(name);
  for (const std::string& point : design_.block_points) points += "blocks.N." + point + " / ";
  return "use " + choices + (choices.empty() ? "" : ", or ") + points + "blocks.N with N counting the " +
         std::to_string(attention_layers()) + " blocks" + (design_.stages.size() > 1 ? " across stages" : "") +
         " (negative: from the last)";
}

std::pair<int, std::string> StagedBackbone::block_and_point(const std::string& text, int count,
                                                            const std::string& bad) const {
  const size_t dot = text.find('.');
  const std::string point = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (!point.empty() &&
      std::find(design_.block_points.begin(), design_.block_points.end(), point) == design_.block_points.end())
    throw std::invalid_argument(bad);
  return {resolve_module_index(text.substr(0, dot), count, bad), point.empty() ? "" : "." + point};
}

std::string StagedBackbone::resolve_hook_point(const std::string& spec) const {
  if (spec.empty()) return default_hook_point();
  const std::string bad = "--gradcam-layer '" + spec.substr(0, 80) + "' does not exist: " + hook_point_choices();
  if (auto named = design_.named_points.find(spec); named != design_.named_points.end()) return named->second;
  if (const std::string point = resolve_stage_point(spec, bad); !point.empty()) return point;
  const BlockNaming& naming = design_.naming;
  const int stages = int(design_.stages.size());
  if (spec.rfind("blocks.", 0) == 0) {
    auto [layer, point] = block_and_point(spec.substr(7), attention_layers(), bad);
    for (int s = 0; s < stages; layer -= design_.stages[size_t(s)].blocks, ++s)
      if (layer < design_.stages[size_t(s)].blocks) return naming.block(s, layer) + point;
  }
  if (naming.stage_prefix.empty() || spec.rfind(naming.stage_prefix, 0) != 0) throw std::invalid_argument(bad);
  const std::string rest = spec.substr(naming.stage_prefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || rest.compare(dot, naming.block_infix.size(), naming.block_infix) != 0)
    throw std::invalid_argument(bad);
  const std::string stage_text = rest.substr(0, dot);
  int stage = 0;
  if (naming.first_stage == 0) {
    stage = resolve_module_index(stage_text, stages, bad);
  } else {
    // Numbered from first_stage: whole numbers only, no count from the end.
    if (stage_text.empty() || stage_text.size() > 3 || stage_text.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(bad);
    stage = std::stoi(stage_text) - naming.first_stage;
    if (stage < 0 || stage >= stages) throw std::invalid_argument(bad);
  }
  const auto [block, point] =
      block_and_point(rest.substr(dot + naming.block_infix.size()), design_.stages[size_t(stage)].blocks, bad);
  return naming.block(stage, block) + point;
}

}  // namespace attnscope
