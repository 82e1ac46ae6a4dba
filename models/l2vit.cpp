#include "models/l2vit.h"

#include <nlohmann/json.hpp>

#include "models/cpu_threads.h"
#include "models/swin.h"
#include "models/token_linear.h"

namespace attnscope {

namespace F = torch::nn::functional;

namespace {

std::string l2vit_block_name(int stage, int block) {
  return "stages." + std::to_string(stage) + "." + std::to_string(block);
}

std::vector<int> stage_depths(const L2ViTArch& arch) {
  std::vector<int> depths;
  for (const auto& stage : arch.stages) depths.push_back(int(stage.blocks.size()));
  return depths;
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

int L2ViTArch::attention_layers() const {
  int count = 0;
  for (const auto& stage : stages) count += int(stage.blocks.size());
  return count;
}

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
  if (settings.variant != Variant::Native && step.resolved.kernel == Kernel::Enhanced && arch.global)
    step.resolved.native = false;
  auto split = [&](const torch::Tensor& tokens) {  // [N', S, C] -> q, k, v [N', h, S, d]
    auto projected = token_linear(qkv, tokens);
    return projected.view({tokens.size(0), tokens.size(1), 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  };
  if (arch.global || step.resolved.kernel == Kernel::Anchor) {
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

L2ViTImpl::L2ViTImpl(const L2ViTArch& arch) : arch_(arch) {
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

nlohmann::json L2ViTImpl::describe() const {
  nlohmann::json stage_list = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    std::string kinds;
    for (const auto& block : stage.blocks) kinds += block.global ? "G" : "L";
    stage_list.push_back({{"dim", stage.dim},
                          {"heads", stage.blocks.front().heads},
                          {"blocks", kinds},
                          {"mlp_hidden", stage.blocks.front().mlp_hidden}});
  }
  return {{"family", family()},
          {"block_type", "mix_local_enhanced_vit"},
          {"window", arch_.window},
          {"native_input", {arch_.native_height, arch_.native_width}},
          {"num_classes", arch_.num_classes},
          {"output", output_kind()},
          {"attention_layers", attention_layers()},
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

InputGeometry L2ViTImpl::input_geometry() const {
  // The stem pads any image to whole patches and the downsamplings pad odd grids: any size runs.
  return {arch_.native_height, arch_.native_width, 1};
}

std::string L2ViTImpl::default_hook_point() const {
  const int last = int(arch_.stages.size()) - 1;
  return l2vit_block_name(last, int(arch_.stages.back().blocks.size()) - 1) + ".norm1";
}

std::string L2ViTImpl::resolve_hook_point(const std::string& spec) const {
  if (spec.empty()) return default_hook_point();
  const std::vector<int> depths = stage_depths(arch_);
  const std::string bad = "--gradcam-layer '" + spec.substr(0, 80) +
                          "' does not exist: use stages.S.B.norm1, stages.S.B, norm, or blocks.N.norm1 / blocks.N "
                          "with N counting the " +
                          std::to_string(attention_layers()) + " blocks across stages";
  if (spec == "norm") return spec;
  // "I" or "I.norm1" after a prefix.
  auto split_suffix = [&](const std::string& rest, std::string& index, std::string& point) {
    const size_t dot = rest.find('.');
    index = rest.substr(0, dot);
    point = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (point != "" && point != "norm1") throw std::invalid_argument(bad);
  };
  std::string index, point;
  if (spec.rfind("blocks.", 0) == 0) {
    split_suffix(spec.substr(7), index, point);
    const auto [stage, block] = stage_and_block(depths, resolve_module_index(index, attention_layers(), bad));
    return l2vit_block_name(stage, block) + (point.empty() ? "" : "." + point);
  }
  if (spec.rfind("stages.", 0) == 0) {
    const std::string rest = spec.substr(7);
    const size_t dot = rest.find('.');
    if (dot == std::string::npos) throw std::invalid_argument(bad);
    const int stage = resolve_module_index(rest.substr(0, dot), int(depths.size()), bad);
    split_suffix(rest.substr(dot + 1), index, point);
    const int block = resolve_module_index(index, depths[size_t(stage)], bad);
    return l2vit_block_name(stage, block) + (point.empty() ? "" : "." + point);
  }
  throw std::invalid_argument(bad);
}

ForwardOutput L2ViTImpl::forward(const torch::Tensor& images, const AttentionSettings& settings,
                                 const ForwardOptions& options) {
  if (images.dim() != 4 || images.size(1) != arch_.in_chans)
    throw std::invalid_argument("input must be [B, " + std::to_string(arch_.in_chans) + ", H, W]");
  ScopedThreads small_ops(cpu_inference(images) ? 1 : configured_threads());
  const int64_t batch = images.size(0);
  ForwardOutput output;
  auto layout_of = [&](int grid_h, int grid_w, int stage) {
    TokenLayout layout;
    layout.grid_h = grid_h;
    layout.grid_w = grid_w;
    layout.patch_size = 4 << stage;
    return layout;
  };
  auto call_hook = [&](const std::string& name, int stage, torch::Tensor& value) {
    if (!options.hook) return;
    options.hook({name, layout_of(int(value.size(1)), int(value.size(2)), stage), HookPoint::Format::ChannelsLast},
                 value);
  };
  const int window = settings.window > 0 ? settings.window : arch_.window;
  torch::Tensor x;
  TokenLayout first_layout;  // stage 0's grid: the output layout without captures
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    x = s == 0 ? downsample_layers[0]->as<L2ViTStemImpl>()->forward(images)
               : downsample_layers[s]->as<L2ViTDownsampleImpl>()->forward(x);
    const int grid_h = int(x.size(1)), grid_w = int(x.size(2));
    if (s == 0) first_layout = layout_of(grid_h, grid_w, 0);
    auto& stage = *stages[s]->as<torch::nn::ModuleListImpl>();
    for (size_t b = 0; b < stage.size(); ++b) {
      if (options.cancelled && options.cancelled()) throw Cancelled();
      auto& block = *stage[b]->as<L2ViTBlockImpl>();
      const bool global = arch_.stages[s].blocks[b].global;
      const std::string name = l2vit_block_name(int(s), int(b));
      AttentionCapture* capture = nullptr;
      if (options.capture) {
        output.layers.emplace_back();
        capture = &output.layers.back();
      }
      x = block.cpe[0]->as<L2ViTPositionalConvImpl>()->forward(x);
      auto normed = block.norm1(x);
      call_hook(name + ".norm1", int(s), normed);
      x = x + block.attn(normed, window, settings, capture);
      if (global) {
        // The LCM runs before the MLP although its modules are registered after it.
        auto& lcm = *block.local_mp;
        auto local = channels_first(block.norm3(x));
        x = x + channels_last(lcm.conv2(lcm.bn(torch::gelu(lcm.conv1(local)))));
      } else {
        x = block.cpe[1]->as<L2ViTPositionalConvImpl>()->forward(x);
      }
      x = x + block.mlp(block.norm2(x));
      call_hook(name, int(s), x);
      if (capture) {
        capture->layout = layout_of(grid_h, grid_w, int(s));
        capture->key_layout = capture->layout;
        capture->normed_input = normed.reshape({batch, int64_t(grid_h) * grid_w, -1});
        LayerPlacement& at = capture->placement;
        at.name = name;
        at.stage = int(s);
        at.block = int(b);
        if (global || capture->attention.kernel == Kernel::Anchor) {
          at.access = "global";
        } else {
          at.access = "window";
          at.window_h = at.window_w = window;
        }
        if (global) capture_local_concentration(*block.local_mp, *capture);
      }
    }
  }
  x = norm(x);
  call_hook("norm", int(arch_.stages.size()) - 1, x);
  auto pooled = x.mean({1, 2});
  output.logits = head.is_empty() ? pooled : head(pooled);
  output.layout = output.layers.empty() ? first_layout : output.layers.front().layout;
  return output;
}

}  // namespace attnscope
