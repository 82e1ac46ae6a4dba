#include "models/care.h"

#include <nlohmann/json.hpp>

#include "models/cpu_threads.h"
#include "models/local_attention.h"
#include "models/swin.h"

namespace attnscope {

namespace F = torch::nn::functional;

const char* const kCareWindowNote =
    "CARE has no windows: its linear attention part attends over the whole grid of its stage and the other "
    "parts are convolutions, so the window option does not apply";

namespace {

constexpr double kHeadNormEps = 1e-6;  // Head: partial(nn.LayerNorm, eps=1e-6)
constexpr int kStripKernel = 11;       // dwconvatt_1 (11, 1), dwconvatt_2 (1, 11)

std::string care_block_name(int stage, int block) {
  return "stages." + std::to_string(stage) + ".blocks." + std::to_string(block);
}

torch::nn::Conv2d depthwise(int channels, int kernel_h, int kernel_w) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, {kernel_h, kernel_w})
                               .padding({kernel_h / 2, kernel_w / 2})
                               .groups(channels));
}

torch::nn::Conv2d pointwise(int in, int out) { return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1)); }

// The authors' variant resolution on the linear part: native is ELU + 1 (a kernel no other family
// has), every swap runs on the part's own q, k, v over the whole grid.
ResolvedAttention resolve_care(const AttentionSettings& settings, int tokens) {
  if (settings.variant == Variant::Window) throw std::invalid_argument(kCareWindowNote);
  ResolvedAttention resolved = resolve_for_layer(settings, NativeAttention::Linear, {}, false, tokens);
  resolved.native = settings.variant == Variant::Native;
  if (resolved.native) resolved.kernel = Kernel::EluLinear;
  return resolved;
}

}  // namespace

int CareArch::attention_layers() const {
  int count = 0;
  for (const auto& stage : stages) count += int(stage.blocks.size());
  return count;
}

CareTokenMixerImpl::CareTokenMixerImpl(int part_channels, bool attention) {
  if (!attention) {
    dwconvatt_1 = register_module("dwconvatt_1", depthwise(part_channels, kStripKernel, 1));
    dwconvatt_2 = register_module("dwconvatt_2", depthwise(part_channels, 1, kStripKernel));
  }
  dwconv1 = register_module("dwconv1", depthwise(part_channels, 3, 3));
  dwconv2 = register_module("dwconv2", depthwise(part_channels, 7, 7));
  if (attention) qk = register_module("qk", pointwise(part_channels, 2 * part_channels));
}

CareInterModuleImpl::CareInterModuleImpl(int dim, int part_channels, const CareBlockArch& arch) {
  const int parts = 3 * part_channels;
  inter1_norm = register_module("inter1_norm", torch::nn::BatchNorm2d(parts));
  inter1_fc1 = register_module("inter1_fc1", pointwise(parts, arch.inter1_hidden));
  inter1_conv = register_module("inter1_conv", depthwise(arch.inter1_hidden, 3, 3));
  inter1_fc2 = register_module("inter1_fc2", pointwise(arch.inter1_hidden, parts));
  inter2_norm = register_module("inter2_norm", torch::nn::BatchNorm2d(dim));
  inter2_fc1 = register_module("inter2_fc1", pointwise(dim, arch.inter2_hidden));
  inter2_conv = register_module("inter2_conv", depthwise(arch.inter2_hidden, 3, 3));
  if (!arch.last) inter2_fc2 = register_module("inter2_fc2", pointwise(arch.inter2_hidden, dim));
}

CareBlockImpl::CareBlockImpl(int dim, int part_channels, const CareBlockArch& arch) {
  // Registration order as the authors' state_dict: gamma (CAREBlock's own parameter) first.
  if (!arch.last && arch.layer_scale) gamma = register_parameter("gamma", torch::ones({dim}));
  token_mixer = register_module("token_mixer", CareTokenMixer(part_channels, arch.attention));
  inter_layer = register_module("inter_layer", CareInterModule(dim, part_channels, arch));
}

CareStageImpl::CareStageImpl(int in_dim, const CareStageArch& arch) {
  if (arch.downsample)
    downsample = register_module(
        "downsample",
        torch::nn::Sequential(torch::nn::BatchNorm2d(in_dim),
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(in_dim, arch.dim, 2).stride(2))));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (const auto& block : arch.blocks) blocks->push_back(CareBlock(arch.dim, arch.part_channels, block));
}

CareHeadImpl::CareHeadImpl(int cls_dim, int classes) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cls_dim}).eps(kHeadNormEps)));
  fc = register_module("fc", torch::nn::Linear(cls_dim, classes));
}

torch::Tensor CareHeadImpl::forward(const torch::Tensor& features) {
  return fc(norm(torch::gelu(features.mean({2, 3}))));
}

CareNetImpl::CareNetImpl(const CareArch& arch) : arch_(arch) {
  const int width = arch.stages.front().dim;
  stem = register_module(
      "stem", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(arch.in_chans, width, 4).stride(4)),
                                    torch::nn::BatchNorm2d(width)));
  stages = register_module("stages", torch::nn::ModuleList());
  int in_dim = width;
  for (const auto& stage : arch.stages) {
    stages->push_back(CareStage(in_dim, stage));
    in_dim = stage.dim;
  }
  head = register_module("head", CareHead(arch.cls_dim, arch.num_classes));
  dist_head = register_module("dist_head", CareHead(arch.cls_dim, arch.num_classes));
}

torch::Tensor CareNetImpl::run_block(CareBlockImpl& block, const CareStageArch& stage, const CareBlockArch& block_arch,
                                     const torch::Tensor& x, const AttentionSettings& settings,
                                     AttentionCapture* capture) {
  const int64_t batch = x.size(0), height = x.size(2), width = x.size(3), tokens = height * width;
  const int64_t gc = stage.part_channels, memory = stage.memory_channels();
  auto& mixer = *block.token_mixer;
  auto& inter = *block.inter_layer;
  auto memory_part = x.narrow(1, 0, memory);
  auto attention_part = x.narrow(1, memory, gc);
  auto conv3 = mixer.dwconv1(x.narrow(1, memory + gc, gc));
  auto conv7 = mixer.dwconv2(x.narrow(1, memory + 2 * gc, gc));
  if (block_arch.attention) {
    const int64_t heads = block_arch.heads, head_dim = gc / heads;
    auto per_head = [&](const torch::Tensor& channels) {  // [B, gc, H, W] -> [B, h, N, d], channel = head * d + j
      return channels.reshape({batch, heads, head_dim, tokens}).transpose(-2, -1);
    };
    auto qk = mixer.qk(attention_part);
    GroupedAttention step;
    step.resolved = resolve_care(settings, int(tokens));
    step.group_grid.grid_h = int(height);
    step.group_grid.grid_w = int(width);
    auto out = attend_grouped(step, per_head(qk.narrow(1, 0, gc)), per_head(qk.narrow(1, gc, gc)),
                              per_head(attention_part), capture);  // [B, h, N, d]
    attention_part = out.transpose(-2, -1).reshape({batch, gc, height, width});
  } else {
    attention_part = mixer.dwconvatt_1(attention_part) + mixer.dwconvatt_2(attention_part);
  }
  // The dual interaction module: the three parts among themselves, then with the memory.
  auto parts = torch::cat({attention_part, conv3, conv7}, 1);
  parts = inter.inter1_fc2(inter.inter1_conv(torch::gelu(inter.inter1_fc1(inter.inter1_norm(parts))))) + parts;
  auto joined = torch::cat({memory_part, parts}, 1);
  auto mixed = inter.inter2_conv(torch::gelu(inter.inter2_fc1(inter.inter2_norm(joined))));
  if (block_arch.last) return mixed;
  mixed = inter.inter2_fc2(mixed) + joined;
  if (block.gamma.defined()) mixed = mixed * block.gamma.view({1, -1, 1, 1});
  return x + mixed;
}

ForwardOutput CareNetImpl::forward(const torch::Tensor& images, const AttentionSettings& settings,
                                   const ForwardOptions& options) {
  if (images.dim() != 4 || images.size(1) != arch_.in_chans)
    throw std::invalid_argument("input must be [B, " + std::to_string(arch_.in_chans) + ", H, W]");
  const int64_t smallest = int64_t(4) << (arch_.stages.size() - 1);
  if (images.size(2) < smallest || images.size(3) < smallest)
    throw std::invalid_argument("input must be at least " + std::to_string(smallest) + "x" + std::to_string(smallest) +
                                " pixels (a 4-pixel stem and " + std::to_string(arch_.stages.size() - 1) +
                                " halvings)");
  ScopedThreads small_ops(cpu_inference(images) ? 1 : configured_threads());
  ForwardOutput output;
  auto layout_of = [](const torch::Tensor& x, int stage) {
    TokenLayout layout;
    layout.grid_h = int(x.size(2));
    layout.grid_w = int(x.size(3));
    layout.patch_size = 4 << stage;
    return layout;
  };
  auto call_hook = [&](const std::string& name, const TokenLayout& layout, torch::Tensor& value) {
    if (options.hook) options.hook({name, layout, HookPoint::Format::ChannelsFirst}, value);
  };
  auto x = stem->forward(images);
  call_hook("stem", layout_of(x, 0), x);
  TokenLayout first_layout;  // stage 0's grid: the output layout without captures
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    auto& stage = *stages[s]->as<CareStageImpl>();
    const CareStageArch& stage_arch = arch_.stages[s];
    if (!stage.downsample.is_empty()) x = stage.downsample->forward(x);
    const TokenLayout layout = layout_of(x, int(s));
    if (s == 0) first_layout = layout;
    const int memory = stage_arch.memory_channels(), gc = stage_arch.part_channels;
    for (size_t b = 0; b < stage.blocks->size(); ++b) {
      if (options.cancelled && options.cancelled()) throw Cancelled();
      const CareBlockArch& block_arch = stage_arch.blocks[b];
      const std::string name = care_block_name(int(s), int(b));
      AttentionCapture* capture = nullptr;
      if (options.capture) {
        output.layers.emplace_back();
        capture = &output.layers.back();
      }
      x = run_block(*stage.blocks[b]->as<CareBlockImpl>(), stage_arch, block_arch, x, settings, capture);
      call_hook(name, layout_of(x, int(s)), x);
      if (capture) {
        capture->layout = layout;
        capture->key_layout = layout;
        LayerPlacement& at = capture->placement;
        at.name = name;
        at.stage = int(s);
        at.block = int(b);
        at.access = block_arch.attention ? "global" : "strip-conv";
        at.channels = {{"memory", 0, memory},
                       {"attention", memory, memory + gc},
                       {"dwconv3", memory + gc, memory + 2 * gc},
                       {"dwconv7", memory + 2 * gc, stage_arch.dim}};
      }
    }
  }
  // Eval: the mean of the two heads (training returns both).
  output.logits = (head->forward(x) + dist_head->forward(x)) / 2;
  output.layout = output.layers.empty() ? first_layout : output.layers.front().layout;
  return output;
}

nlohmann::json CareNetImpl::describe() const {
  nlohmann::json stages_json = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    const CareBlockArch& first = stage.blocks.front();
    stages_json.push_back(
        {{"dim", stage.dim},
         {"depth", stage.blocks.size()},
         {"channels",
          {{"memory", {0, stage.memory_channels()}},
           {"attention", {stage.memory_channels(), stage.memory_channels() + stage.part_channels}},
           {"dwconv3",
            {stage.memory_channels() + stage.part_channels, stage.memory_channels() + 2 * stage.part_channels}},
           {"dwconv7", {stage.memory_channels() + 2 * stage.part_channels, stage.dim}}}},
         {"token_mixer", first.attention ? "elu_linear attention" : "strip convolutions 11x1 + 1x11"},
         {"heads", first.heads},
         {"att_head_dim", stage.att_head_dim},
         {"inter_hidden", {first.inter1_hidden, first.inter2_hidden}}});
  }
  return {{"family", family()},
          {"native_input", {arch_.native_height, arch_.native_width}},
          {"num_classes", arch_.num_classes},
          {"output", output_kind()},
          {"cls_dim", arch_.cls_dim},
          {"classifier", "head and dist_head, averaged in eval"},
          {"attention_layers", attention_layers()},
          {"window", kCareWindowNote},
          {"stages", stages_json}};
}

std::vector<std::string> CareNetImpl::summary_lines() const {
  std::vector<std::string> lines{"stages        " + std::to_string(arch_.stages.size()) + ", " +
                                 std::to_string(attention_layers()) +
                                 " blocks (every block is a layer; strip-conv blocks have no attention)"};
  int grid_h = arch_.native_height / 4, grid_w = arch_.native_width / 4;
  int layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const CareStageArch& stage = arch_.stages[s];
    if (s > 0) grid_h /= 2, grid_w /= 2;
    const CareBlockArch& first = stage.blocks.front();
    const int memory = stage.memory_channels(), gc = stage.part_channels;
    const std::string mixer = first.attention ? "ELU+1 linear attention, " + std::to_string(first.heads) + " heads x " +
                                                    std::to_string(stage.att_head_dim) + " on channels " +
                                                    std::to_string(memory) + ".." + std::to_string(memory + gc - 1)
                                              : "strip convs on channels " + std::to_string(memory) + ".." +
                                                    std::to_string(memory + gc - 1) + " (no attention)";
    lines.push_back("stage " + std::to_string(s) + "       layers " + std::to_string(layer) + ".." +
                    std::to_string(layer + int(stage.blocks.size()) - 1) + ": dim " + std::to_string(stage.dim) + ", " +
                    mixer + ", memory 0.." + std::to_string(memory - 1) + ", grid " + std::to_string(grid_h) + "x" +
                    std::to_string(grid_w) + " (at the native input)");
    layer += int(stage.blocks.size());
  }
  lines.push_back("heads         head + dist_head (mean), LayerNorm " + std::to_string(arch_.cls_dim) + ", " +
                  std::to_string(arch_.num_classes) + " classes");
  lines.push_back(std::string("window        ") + kCareWindowNote);
  return lines;
}

std::string CareNetImpl::default_hook_point() const {
  // pytorch-grad-cam's choice for conv backbones: the last stage's output.
  return care_block_name(int(arch_.stages.size()) - 1, int(arch_.stages.back().blocks.size()) - 1);
}

std::string CareNetImpl::resolve_hook_point(const std::string& spec) const {
  if (spec.empty()) return default_hook_point();
  std::vector<int> depths;
  for (const auto& stage : arch_.stages) depths.push_back(int(stage.blocks.size()));
  const std::string bad = "--gradcam-layer '" + spec.substr(0, 80) +
                          "' does not exist: use stem, stages.S, stages.S.blocks.B, or blocks.N with N counting the " +
                          std::to_string(attention_layers()) + " blocks across stages";
  if (spec == "stem") return spec;
  if (spec.rfind("blocks.", 0) == 0) {
    const auto [s, b] = stage_and_block(depths, resolve_module_index(spec.substr(7), attention_layers(), bad));
    return care_block_name(s, b);
  }
  if (spec.rfind("stages.", 0) != 0) throw std::invalid_argument(bad);
  const std::string rest = spec.substr(7);
  const size_t dot = rest.find('.');
  const int stage = resolve_module_index(rest.substr(0, dot), int(depths.size()), bad);
  if (dot == std::string::npos) return care_block_name(stage, depths[size_t(stage)] - 1);
  if (rest.compare(dot, 8, ".blocks.") != 0) throw std::invalid_argument(bad);
  return care_block_name(stage, resolve_module_index(rest.substr(dot + 8), depths[size_t(stage)], bad));
}

}  // namespace attnscope
