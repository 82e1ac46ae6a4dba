#include "models/l2vit.h"

#include <nlohmann/json.hpp>

#include "models/cpu_threads.h"
#include "models/token_linear.h"

namespace attnscope {

namespace F = torch::nn::functional;

namespace {

// The stem quarters the image, padded to whole 4 x 4 patches, and each downsampling halves the
// grid, padding odd sides: any input size runs.
StagedDesign l2vit_design(const L2ViTArch& arch) {
  StagedDesign design = StagedDesign::hierarchical(arch, {"stages.", "."}, HookPoint::Format::ChannelsLast, 4);
  design.named_points = {{"norm", "norm"}};
  design.window.kind = WindowSupport::Kind::Trained;
  design.window.text =
      "the window of every local (LWA) block, zero-padded as the authors' code pads it; 0: the trained window. "
      "Global (LGA) blocks attend over the whole grid, so the window does not apply to them";
  return design;
}

torch::Tensor channels_first(const torch::Tensor& x) { return x.permute({0, 3, 1, 2}); }
torch::Tensor channels_last(const torch::Tensor& x) { return x.permute({0, 2, 3, 1}); }

// Zero padding at the right and bottom of [B, C, H, W] up to multiples of `multiple`.
torch::Tensor pad_to_multiple(const torch::Tensor& x, int64_t multiple) {
  const int64_t bottom = (multiple - x.size(2) % multiple) % multiple,
                right = (multiple - x.size(3) % multiple) % multiple;
  if (bottom == 0 && right == 0) return x;
  return F::pad(x, F::PadFuncOptions({0, right, 0, bottom}));
}

}  // namespace

L2ViTConvStemImpl::L2ViTConvStemImpl(int in_chans, int dim, bool conv_bias) {
  const int hidden = dim / 2;
  proj = register_module(
      "proj", torch::nn::Sequential(
                  torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, hidden, 3).stride(2).padding(1).bias(conv_bias)),
                  torch::nn::BatchNorm2d(hidden), torch::nn::ReLU(),
                  torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, dim, 3).stride(2).padding(1).bias(conv_bias)),
                  torch::nn::BatchNorm2d(dim)));
}

L2ViTStemImpl::L2ViTStemImpl(int in_chans, int dim, bool conv_bias) {
  proj = register_module("proj", L2ViTConvStem(in_chans, dim, conv_bias));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
}

torch::Tensor L2ViTStemImpl::forward(const torch::Tensor& images) {
  // PatchEmbed pads the image to whole 4 x 4 patches before the stem.
  return norm(channels_last(proj->proj->forward(pad_to_multiple(images, 4))));
}

L2ViTDownsampleImpl::L2ViTDownsampleImpl(int in_dim, int out_dim) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({in_dim})));
  proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_dim, out_dim, 2).stride(2)));
}

torch::Tensor L2ViTDownsampleImpl::forward(const torch::Tensor& x) {
  return channels_last(proj(pad_to_multiple(channels_first(norm(x)), 2)));
}

L2ViTPositionalConvImpl::L2ViTPositionalConvImpl(int dim) {
  proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).padding(1).groups(dim)));
}

torch::Tensor L2ViTPositionalConvImpl::forward(const torch::Tensor& x) {
  return x + channels_last(proj(channels_first(x)));
}

L2ViTAttentionImpl::L2ViTAttentionImpl(int dim, const L2ViTBlockArch& arch) : arch(arch), dim(dim) {
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(arch.qkv_bias)));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  if (arch.global) temperature = register_parameter("temperature", torch::ones({arch.heads, 1, 1}));
}

torch::Tensor L2ViTAttentionImpl::forward(const torch::Tensor& x, int window, const AttentionSettings& settings,
                                          AttentionCapture* capture) {
  const int64_t batch = x.size(0), grid_h = x.size(1), grid_w = x.size(2), heads = arch.heads, head_dim = dim / heads;
  GroupedAttention step;
  // Only the native kernel uses the trained temperature: a swap to `enhanced` scores with d^-0.5,
  // as on every other layer.
  if (arch.global && settings.variant == Variant::Native) step.parameters.temperature = temperature;
  const NativeAttention native = arch.global ? NativeAttention::Enhanced : NativeAttention::Softmax;
  step.resolved = resolve_for_layer(settings, native, step.parameters, false, int(grid_h * grid_w));
  if (settings.variant != Variant::Native && step.resolved.native && arch.global) step.resolved.native = false;
  auto split = [&](const torch::Tensor& tokens) {  // [N', S, C] -> q, k, v [N', h, S, d]
    auto projected = token_linear(qkv, tokens);
    return projected.view({tokens.size(0), tokens.size(1), 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  };
  if (arch.global || kernel_spec(step.resolved.kernel).global_only) {
    // One group of every token (anchors are global by construction, as on Swin's windows).
    step.group_grid.grid_h = int(grid_h);
    step.group_grid.grid_w = int(grid_w);
    auto parts = split(x.reshape({batch, grid_h * grid_w, dim}));
    auto out = attend_grouped(step, parts[0], parts[1], parts[2], capture);
    auto merged = out.transpose(1, 2).reshape({batch, grid_h * grid_w, dim});
    return token_linear(proj, merged).view({batch, grid_h, grid_w, dim});
  }
  // The authors' local windows: the normed grid zero-padded at the bottom and right to whole
  // windows (padding tokens are keys whose q, k, v are the qkv bias), no clamp, shift or mask.
  WindowPlan plan;
  plan.grid_h = int(grid_h);
  plan.grid_w = int(grid_w);
  plan.window_h = plan.window_w = window;
  plan.padded_h = int((grid_h + window - 1) / window * window);
  plan.padded_w = int((grid_w + window - 1) / window * window);
  step.group_grid.grid_h = window;
  step.group_grid.grid_w = window;
  if (capture) {
    step.query_slots = window_slots(plan).to(x.device());
    step.key_slots = step.query_slots;
  }
  auto parts = split(to_windows(x, plan));  // [B*G, h, S, d]
  auto out = attend_grouped(step, parts[0], parts[1], parts[2], capture);
  auto merged = out.transpose(1, 2).reshape({batch * plan.windows(), int64_t(plan.window_area()), dim});
  return from_windows(token_linear(proj, merged), plan, batch);
}

L2ViTBlockImpl::L2ViTBlockImpl(int dim, const L2ViTBlockArch& arch) {
  cpe = register_module("cpe", torch::nn::ModuleList());
  cpe->push_back(L2ViTPositionalConv(dim));
  if (!arch.global) cpe->push_back(L2ViTPositionalConv(dim));
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  attn = register_module("attn", L2ViTAttention(dim, arch));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden));
  if (arch.global) {
    norm3 = register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    local_mp = register_module("local_mp", LocalConcentration(dim));
  }
}

void capture_local_concentration(const LocalConcentrationImpl& lcm, AttentionCapture& capture) {
  torch::NoGradGuard no_grad;
  capture.lcm_conv1 = lcm.conv1->weight.detach();
  capture.lcm_conv2 = lcm.conv2->weight.detach();
  capture.lcm_gain =
      (lcm.bn->weight / torch::sqrt(lcm.bn->running_var + lcm.bn->options.eps()) * kLcmGeluSlope).detach();
}

L2ViTImpl::L2ViTImpl(const L2ViTArch& arch) : StagedBackbone(l2vit_design(arch)), arch_(arch) {
  downsample_layers = register_module("downsample_layers", torch::nn::ModuleList());
  stages = register_module("stages", torch::nn::ModuleList());
  int in_dim = 0;
  for (size_t s = 0; s < arch.stages.size(); ++s) {
    const int dim = arch.stages[s].dim;
    if (s == 0)
      downsample_layers->push_back(L2ViTStem(arch.in_chans, dim, arch.stem_conv_bias));
    else
      downsample_layers->push_back(L2ViTDownsample(in_dim, dim));
    auto stage = torch::nn::ModuleList();
    for (const auto& block : arch.stages[s].blocks) stage->push_back(L2ViTBlock(dim, block));
    stages->push_back(stage);
    in_dim = dim;
  }
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({in_dim})));
  if (arch.num_classes > 0) head = register_module("head", torch::nn::Linear(in_dim, arch.num_classes));
}

nlohmann::json L2ViTImpl::describe_architecture() const {
  nlohmann::json stage_list = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    std::string kinds;
    for (const auto& block : stage.blocks) kinds += block.global ? "G" : "L";
    stage_list.push_back({{"dim", stage.dim},
                          {"heads", stage.blocks.front().heads},
                          {"blocks", kinds},
                          {"mlp_hidden", stage.blocks.front().mlp_hidden}});
  }
  return {{"block_type", "mix_local_enhanced_vit"},
          {"window", arch_.window},
          {"block_kinds", "L: local window attention (softmax), G: enhanced linear global attention + LCM"},
          {"stages", stage_list}};
}

std::vector<std::string> L2ViTImpl::summary_lines() const {
  std::vector<std::string> lines{"stem          conv stem (stride 4), " + std::to_string(arch_.stages.size()) +
                                 " stages, " + std::to_string(attention_layers()) + " attention blocks, window " +
                                 std::to_string(arch_.window)};
  int grid_h = (arch_.native_height + 3) / 4, grid_w = (arch_.native_width + 3) / 4;
  int layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    if (s > 0) grid_h = (grid_h + 1) / 2, grid_w = (grid_w + 1) / 2;
    std::string kinds;
    for (const auto& block : arch_.stages[s].blocks)
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(layer++) +
               (block.global ? ":enhanced global + LCM" : ":softmax w" + std::to_string(arch_.window));
    lines.push_back("stage " + std::to_string(s) + "       " + std::to_string(arch_.stages[s].blocks.size()) +
                    " blocks, dim " + std::to_string(arch_.stages[s].dim) + ", " +
                    std::to_string(arch_.stages[s].blocks.front().heads) + " heads, grid " + std::to_string(grid_h) +
                    "x" + std::to_string(grid_w) + " (at the native input): " + kinds);
  }
  return lines;
}

StageTokens L2ViTImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  // downsample_layers.0 is the stem.
  auto x = stage == 0 ? downsample_layers[0]->as<L2ViTStemImpl>()->forward(pass.images)
                      : downsample_layers[size_t(stage)]->as<L2ViTDownsampleImpl>()->forward(previous.x);
  return {x, stage_layout(stage, int(x.size(1)), int(x.size(2)))};
}

torch::Tensor L2ViTImpl::run_block(const BlockSite& site, const torch::Tensor& input, const StagedPass& pass) {
  auto& stage = *stages[size_t(site.stage)]->as<torch::nn::ModuleListImpl>();
  auto& block = *stage[size_t(site.block)]->as<L2ViTBlockImpl>();
  const bool global = arch_.stages[size_t(site.stage)].blocks[size_t(site.block)].global;
  const int window = pass.settings.window > 0 ? pass.settings.window : arch_.window;
  AttentionCapture* capture = site.capture;
  auto x = block.cpe[0]->as<L2ViTPositionalConvImpl>()->forward(input);
  auto normed = block.norm1(x);
  pass.hook(site.name + ".norm1", site.layout, normed);
  x = x + block.attn(normed, window, pass.settings, capture);
  if (global) {
    // The LCM runs before the MLP although its modules are registered after it.
    auto& lcm = *block.local_mp;
    auto local = channels_first(block.norm3(x));
    x = x + channels_last(lcm.conv2(lcm.bn(torch::gelu(lcm.conv1(local)))));
  } else {
    x = block.cpe[1]->as<L2ViTPositionalConvImpl>()->forward(x);
  }
  x = x + block.mlp(block.norm2(x));
  pass.hook(site.name, site.layout, x);
  if (capture) {
    capture->normed_input = normed.reshape({input.size(0), int64_t(site.layout.grid_h) * site.layout.grid_w, -1});
    if (!global && !kernel_spec(capture->attention.kernel).global_only) {
      capture->placement.access = "window";
      capture->placement.window_h = capture->placement.window_w = window;
    }
    if (global) capture_local_concentration(*block.local_mp, *capture);
  }
  return x;
}

torch::Tensor L2ViTImpl::classify(const StageTokens& tokens, const StagedPass& pass) {
  auto x = norm(tokens.x);
  pass.hook("norm", tokens.layout, x);
  auto pooled = x.mean({1, 2});
  return head.is_empty() ? pooled : head(pooled);
}

}  // namespace attnscope
