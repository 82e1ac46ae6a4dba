#include "models/care.h"

#include <nlohmann/json.hpp>

#include "models/cpu_threads.h"
#include "models/local_attention.h"

namespace attnscope {

namespace F = torch::nn::functional;

const char* const kCareWindowNote =
    "CARE has no windows: its linear attention part attends over the whole grid of its stage and the other "
    "parts are convolutions, so the window option does not apply";

namespace {

constexpr double kHeadNormEps = 1e-6;  // Head: partial(nn.LayerNorm, eps=1e-6)
constexpr int kStripKernel = 11;       // dwconvatt_1 (11, 1), dwconvatt_2 (1, 11)

// No windows: the linear part attends over the whole grid and the rest are convolutions.
StagedDesign care_design(const CareArch& arch) {
  StagedDesign design = StagedDesign::hierarchical(arch, {"stages.", ".blocks."}, HookPoint::Format::ChannelsFirst, 4);
  design.block_points = {};   // a block is one module: its output is its only point
  design.default_point = "";  // pytorch-grad-cam's choice for conv backbones: the last stage's output
  design.named_points = {{"stem", "stem"}};
  design.stage_points = {{"stages.", "", 0, /*last_block=*/true}};
  design.min_side = 4 << (arch.stages.size() - 1);  // a 4-pixel stem and a halving per later stage
  design.too_small = [smallest = std::to_string(design.min_side), halvings = arch.stages.size() - 1](int64_t, int64_t) {
    return "input must be at least " + smallest + "x" + smallest + " pixels (a 4-pixel stem and " +
           std::to_string(halvings) + " halvings)";
  };
  design.window.text = kCareWindowNote;
  return design;
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

CareNetImpl::CareNetImpl(const CareArch& arch) : StagedBackbone(care_design(arch)), arch_(arch) {
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

torch::Tensor CareNetImpl::mix_block(CareBlockImpl& block, const CareStageArch& stage, const CareBlockArch& block_arch,
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

StageTokens CareNetImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  auto& downsample = stages[size_t(stage)]->as<CareStageImpl>()->downsample;
  torch::Tensor x = stage == 0 ? stem->forward(pass.images) : previous.x;
  const TokenLayout stem_layout = stage_layout(0, int(x.size(2)), int(x.size(3)));
  if (stage == 0) pass.hook("stem", stem_layout, x);
  if (!downsample.is_empty()) x = downsample->forward(x);
  return {x, stage_layout(stage, int(x.size(2)), int(x.size(3)))};
}

torch::Tensor CareNetImpl::run_block(const BlockSite& site, const torch::Tensor& input, const StagedPass& pass) {
  const CareStageArch& stage_arch = arch_.stages[size_t(site.stage)];
  const CareBlockArch& block_arch = stage_arch.blocks[size_t(site.block)];
  auto& block = *stages[size_t(site.stage)]->as<CareStageImpl>()->blocks[size_t(site.block)]->as<CareBlockImpl>();
  auto x = mix_block(block, stage_arch, block_arch, input, pass.settings, site.capture);
  pass.hook(site.name, stage_layout(site.stage, int(x.size(2)), int(x.size(3))), x);
  if (AttentionCapture* capture = site.capture) {
    const int memory = stage_arch.memory_channels(), gc = stage_arch.part_channels;
    capture->placement.access = block_arch.attention ? "global" : "strip-conv";
    capture->placement.channels = {{"memory", 0, memory, false},
                                   {"attention", memory, memory + gc, true},
                                   {"dwconv3", memory + gc, memory + 2 * gc, false},
                                   {"dwconv7", memory + 2 * gc, stage_arch.dim, false}};
  }
  return x;
}

torch::Tensor CareNetImpl::classify(const StageTokens& tokens, const StagedPass&) {
  // Eval: the mean of the two heads (training returns both).
  return (head->forward(tokens.x) + dist_head->forward(tokens.x)) / 2;
}

nlohmann::json CareNetImpl::describe_architecture() const {
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
  return {{"cls_dim", arch_.cls_dim},
          {"classifier", "head and dist_head, averaged in eval"},
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

}  // namespace attnscope
