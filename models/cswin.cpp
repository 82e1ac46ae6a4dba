#include "models/cswin.h"

#include <nlohmann/json.hpp>

#include "models/attention_kernels_successors.h"
#include "models/cpu_threads.h"
#include "models/local_attention.h"
#include "models/token_linear.h"

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

constexpr int kStemKernel = 7, kStemStride = 4, kStemPadding = 2;  // stage1_conv_embed.0
constexpr int kMergeKernel = 3, kMergeStride = 2, kMergePadding = 1;
constexpr double kLayerNormEps = 1e-5;  // nn.LayerNorm's default, every norm of the model

torch::nn::LayerNormOptions cswin_norm_options(int dim) {
  return torch::nn::LayerNormOptions({dim}).eps(kLayerNormEps);
}

StagedDesign cswin_design(const CSwinArch& arch) {
  StagedDesign design =
      StagedDesign::hierarchical(arch, {"stage", ".", 1}, HookPoint::Format::ChannelsLast, kStemStride);
  design.named_points = {{"norm", "norm"}, {"stage1_conv_embed", "stage1_conv_embed"}};
  design.stage_points = {{"merge", "", 1}};
  design.min_side = kStemKernel - 2 * kStemPadding;  // what the 7x7 stem can read
  design.too_small = [](int64_t width, int64_t height) {
    return "input " + std::to_string(width) + "x" + std::to_string(height) + " is smaller than the 7x7 stem can read";
  };
  design.window.text =
      "CSwin's blocks attend in cross-shaped stripes of their trained width (LePE is trained on them), so there is "
      "no window to change; the outlines show the query's stripe for the selected head";
  return design;
}

// [B, H, W, C] -> zero-padded to the plan's padded grid (before and after, as planned).
torch::Tensor pad_to_plan(const torch::Tensor& x, const StripePlan& plan) {
  if (plan.padded_h == plan.grid_h && plan.padded_w == plan.grid_w) return x;
  const int bottom = plan.padded_h - plan.grid_h - plan.pad_top, right = plan.padded_w - plan.grid_w - plan.pad_left;
  return F::pad(x, F::PadFuncOptions({0, 0, plan.pad_left, right, plan.pad_top, bottom}));
}

// [B, Hp, Wp, C] padded -> [B * G, S, C], stripes row-major over the grid, tokens row-major in a stripe.
torch::Tensor to_stripes(const torch::Tensor& padded, const StripePlan& plan) {
  const int64_t batch = padded.size(0), channels = padded.size(3);
  return padded
      .reshape(
          {batch, plan.padded_h / plan.stripe_h, plan.stripe_h, plan.padded_w / plan.stripe_w, plan.stripe_w, channels})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({batch * plan.stripes(), plan.stripe_area(), channels});
}

// [B * G, S, C] -> [B, H, W, C], the padding cropped.
torch::Tensor from_stripes(const torch::Tensor& stripes, const StripePlan& plan, int64_t batch) {
  const int64_t channels = stripes.size(-1);
  auto grid = stripes
                  .reshape({batch, plan.padded_h / plan.stripe_h, plan.padded_w / plan.stripe_w, plan.stripe_h,
                            plan.stripe_w, channels})
                  .permute({0, 1, 3, 2, 4, 5})
                  .reshape({batch, plan.padded_h, plan.padded_w, channels});
  if (plan.padded_h == plan.grid_h && plan.padded_w == plan.grid_w) return grid;
  return grid.index(
      {Slice(), Slice(plan.pad_top, plan.pad_top + plan.grid_h), Slice(plan.pad_left, plan.pad_left + plan.grid_w)});
}

// LePE: the depthwise 3x3 `get_v` on each stripe of V alone (zero padding at stripe borders):
// [B, Hp, Wp, C] padded -> [B * G, S, C].
torch::Tensor locally_enhanced_position(const torch::Tensor& padded_v, const StripePlan& plan,
                                        torch::nn::Conv2d& get_v) {
  const int64_t batch = padded_v.size(0), channels = padded_v.size(3);
  auto images = padded_v
                    .reshape({batch, plan.padded_h / plan.stripe_h, plan.stripe_h, plan.padded_w / plan.stripe_w,
                              plan.stripe_w, channels})
                    .permute({0, 1, 3, 5, 2, 4})
                    .reshape({batch * plan.stripes(), channels, plan.stripe_h, plan.stripe_w});
  return get_v(images).reshape({batch * plan.stripes(), channels, plan.stripe_area()}).transpose(1, 2);
}

}  // namespace

std::string to_string(StripeOrientation orientation) {
  switch (orientation) {
    case StripeOrientation::Vertical:
      return "vertical";
    case StripeOrientation::Horizontal:
      return "horizontal";
    case StripeOrientation::Whole:
      return "whole";
  }
  return "?";
}

StripePlan plan_stripes(int grid_h, int grid_w, StripeOrientation orientation, int split) {
  StripePlan plan;
  plan.orientation = orientation;
  plan.grid_h = grid_h;
  plan.grid_w = grid_w;
  plan.stripe_h = orientation == StripeOrientation::Horizontal ? split : grid_h;
  plan.stripe_w = orientation == StripeOrientation::Vertical ? split : grid_w;
  const int pad_h = (plan.stripe_h - grid_h % plan.stripe_h) % plan.stripe_h;
  const int pad_w = (plan.stripe_w - grid_w % plan.stripe_w) % plan.stripe_w;
  plan.pad_top = pad_h / 2;
  plan.pad_left = pad_w / 2;
  plan.padded_h = grid_h + pad_h;
  plan.padded_w = grid_w + pad_w;
  return plan;
}

torch::Tensor stripe_slots(const StripePlan& plan) {
  const int columns = plan.padded_w / plan.stripe_w;
  auto slots = torch::full({plan.stripes(), plan.stripe_area()}, -1, torch::kLong);
  auto at = slots.accessor<int64_t, 2>();
  for (int stripe = 0; stripe < plan.stripes(); ++stripe)
    for (int slot = 0; slot < plan.stripe_area(); ++slot) {
      const int row = (stripe / columns) * plan.stripe_h + slot / plan.stripe_w - plan.pad_top;
      const int col = (stripe % columns) * plan.stripe_w + slot % plan.stripe_w - plan.pad_left;
      if (row >= 0 && row < plan.grid_h && col >= 0 && col < plan.grid_w)
        at[stripe][slot] = int64_t(row) * plan.grid_w + col;
    }
  return slots;
}

CSwinBranchImpl::CSwinBranchImpl(int dim, const CSwinBlockArch& arch)
    : arch(arch), dim(dim), heads(arch.heads / arch.branches) {
  get_v = register_module("get_v", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).padding(1).groups(dim)));
  if (arch.native == NativeAttention::Agent) {
    const int64_t h = heads, agents = arch.agents, side = arch.agent_side;
    agent_biases = successor_kernels::register_agent_biases(*this, h, agents, side);
  }
  if (arch.native == NativeAttention::InLine) {
    residual = register_module("residual", successor_kernels::inline_residual_predictor(dim, heads));
  }
  if (arch.native == NativeAttention::Focused) {
    const int head_dim = dim / heads;
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(head_dim, head_dim, arch.dwc_kernel)
                                                       .groups(head_dim)
                                                       .padding(arch.dwc_kernel / 2)));
    scale = register_parameter("scale", torch::zeros({1, 1, dim}));
    positional_encoding = register_parameter("positional_encoding",
                                             torch::zeros({1, int64_t(arch.encoding_side) * arch.encoding_side, dim}));
  }
}

torch::Tensor CSwinBranchImpl::forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const StripePlan& plan, const AttentionSettings& settings,
                                       AttentionCapture* capture, const torch::Tensor& input_mean) {
  const int64_t batch = q.size(0);
  // The block's own focused computation (scale, positional encoding, DWC) runs only natively; a
  // swapped kernel, focused included, starts from the raw q, k, v in the same stripes. LePE stays.
  const bool own_focused = arch.native == NativeAttention::Focused && settings.variant == Variant::Native;
  GroupedAttention step;
  if (own_focused) {
    step.parameters.scale = scale;
    step.parameters.positional_encoding = positional_encoding;
  }
  step.parameters.learned_agents = arch.agents;
  step.resolved = resolve_for_layer(settings, arch.native, step.parameters, own_focused || !residual.is_empty(),
                                    plan.stripe_area());
  if (arch.native == NativeAttention::Focused && !own_focused) step.resolved.native = false;
  step.resolved.window = 0;
  step.group_grid.grid_h = plan.stripe_h;
  step.group_grid.grid_w = plan.stripe_w;
  if (step.resolved.learned_positional_encoding)
    step.parameters.positional_encoding = resize_grid_encoding(positional_encoding, plan.stripe_h, plan.stripe_w);
  if (step.resolved.learned_agent_bias)  // agent_cswin: one stripe, the whole grid its biases were trained on
    successor_kernels::add_agent_position_biases(agent_biases, step.group_grid, step.parameters);
  if (step.resolved.dwc && !residual.is_empty()) {
    // inline_cswin: residual(x_mean.unsqueeze(-1)).reshape(b * c, 1, 3, 3) with b the images (one stripe).
    torch::nn::Sequential predictor = residual;
    step.local_kernels = predictor->forward(input_mean.unsqueeze(-1)).reshape({batch * dim, 1, 3, 3});
  } else if (step.resolved.dwc) {
    step.dwc_weight = dwc->weight;
    step.dwc_bias = dwc->bias;
  }
  if (capture) {
    step.query_slots = stripe_slots(plan).to(q.device());
    step.key_slots = step.query_slots;
  }
  const auto padded_v = pad_to_plan(v, plan);
  const auto lepe = locally_enhanced_position(padded_v, plan, get_v);  // [B*G, S, Cb]
  auto qh = split_heads(to_stripes(pad_to_plan(q, plan), plan), heads);
  auto kh = split_heads(to_stripes(pad_to_plan(k, plan), plan), heads);
  auto vh = split_heads(to_stripes(padded_v, plan), heads);
  auto out = attend_grouped(step, qh, kh, vh, capture);  // [B*G, h, S, d], DWC included
  auto merged = out.transpose(1, 2).reshape({batch * plan.stripes(), plan.stripe_area(), dim}) + lepe;
  return from_stripes(merged, plan, batch);
}

CSwinBlockImpl::CSwinBlockImpl(int dim, const CSwinBlockArch& arch, double eps) : arch(arch), dim(dim) {
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(arch.qkv_bias)));
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps)));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  attns = register_module("attns", torch::nn::ModuleList());
  for (int b = 0; b < arch.branches; ++b) attns->push_back(CSwinBranch(dim / arch.branches, arch));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps)));
}

std::vector<StripePlan> CSwinBlockImpl::plans(int grid_h, int grid_w) const {
  if (arch.branches == 1) return {plan_stripes(grid_h, grid_w, StripeOrientation::Whole, 0)};
  return {plan_stripes(grid_h, grid_w, StripeOrientation::Vertical, arch.split),
          plan_stripes(grid_h, grid_w, StripeOrientation::Horizontal, arch.split)};
}

torch::Tensor CSwinBlockImpl::attend(const torch::Tensor& x, const AttentionSettings& settings,
                                     AttentionCapture* capture, const torch::Tensor& input) {
  const auto projected = token_linear(qkv, x);  // [B, H, W, 3C]: q, k, v of every channel
  const std::vector<StripePlan> stripe_plans = plans(int(x.size(1)), int(x.size(2)));
  const int64_t width = dim / arch.branches;
  if (capture && arch.branches > 1) {
    capture->branches.assign(size_t(arch.branches), AttentionCapture{});
    capture->branch_first_head.clear();
  }
  std::vector<torch::Tensor> outputs;
  for (int b = 0; b < arch.branches; ++b) {
    // Branch b takes channels [b C/2, (b+1) C/2) of q, k and v alike.
    auto part = [&](int which) { return projected.narrow(3, which * dim + b * width, width); };
    AttentionCapture* branch_capture = nullptr;
    if (capture) {
      branch_capture = arch.branches == 1 ? capture : &capture->branches[size_t(b)];
      if (arch.branches > 1) capture->branch_first_head.push_back(b * (arch.heads / arch.branches));
    }
    auto& branch = *attns[size_t(b)]->as<CSwinBranchImpl>();
    const torch::Tensor input_mean =
        branch.residual.is_empty() ? torch::Tensor() : input.mean({1, 2}).narrow(1, b * width, width);
    outputs.push_back(
        branch.forward(part(0), part(1), part(2), stripe_plans[size_t(b)], settings, branch_capture, input_mean));
  }
  return token_linear(proj, arch.branches == 1 ? outputs.front() : torch::cat(outputs, 3));
}

CSwinMergeImpl::CSwinMergeImpl(int in_dim, int out_dim, double eps) {
  conv = register_module(
      "conv", torch::nn::Conv2d(
                  torch::nn::Conv2dOptions(in_dim, out_dim, kMergeKernel).stride(kMergeStride).padding(kMergePadding)));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out_dim}).eps(eps)));
}

torch::Tensor CSwinMergeImpl::forward(const torch::Tensor& x) {
  return norm(conv(x.permute({0, 3, 1, 2})).permute({0, 2, 3, 1}));
}

CSwinTransformerImpl::CSwinTransformerImpl(const CSwinArch& arch) : StagedBackbone(cswin_design(arch)), arch_(arch) {
  stem_conv = torch::nn::Conv2d(
      torch::nn::Conv2dOptions(arch.in_chans, arch.embed_dim, kStemKernel).stride(kStemStride).padding(kStemPadding));
  stem_norm = torch::nn::LayerNorm(cswin_norm_options(arch.embed_dim));
  stage1_conv_embed =
      register_module("stage1_conv_embed", torch::nn::Sequential(stem_conv, torch::nn::Identity(), stem_norm));
  int in_dim = arch.embed_dim;
  for (size_t s = 0; s < arch.stages.size(); ++s) {
    const CSwinStageArch& stage = arch.stages[s];
    if (s > 0)
      merges.push_back(register_module("merge" + std::to_string(s), CSwinMerge(in_dim, stage.dim, kLayerNormEps)));
    auto blocks = register_module("stage" + std::to_string(s + 1), torch::nn::ModuleList());
    for (const auto& block : stage.blocks) blocks->push_back(CSwinBlock(stage.dim, block, kLayerNormEps));
    stages.push_back(blocks);
    in_dim = stage.dim;
  }
  norm = register_module("norm", torch::nn::LayerNorm(cswin_norm_options(in_dim)));
  if (arch.num_classes > 0) head = register_module("head", torch::nn::Linear(in_dim, arch.num_classes));
}

std::string CSwinTransformerImpl::family() const {
  std::string name = "flatten-cswin";  // also a file of softmax blocks alone
  for (const auto& stage : arch_.stages)
    for (const auto& block : stage.blocks)
      if (block.native == NativeAttention::Agent)
        name = "agent-cswin";
      else if (block.native == NativeAttention::InLine)
        name = "inline-cswin";
  return name;
}

nlohmann::json CSwinTransformerImpl::describe_architecture() const {
  nlohmann::json stages_json = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& block : stage.blocks) {
      nlohmann::json b{{"native_attention", to_string(block.native)},
                       {"heads", block.heads},
                       {"branches", block.branches},
                       {"mlp_hidden", block.mlp_hidden}};
      if (block.branches > 1) b["stripe_width"] = block.split;
      if (block.native == NativeAttention::Focused) {
        b["dwc_kernel"] = block.dwc_kernel;
        b["positional_encoding_grid"] = block.encoding_side;
      }
      if (block.native == NativeAttention::Agent) {
        b["agents"] = block.agents;
        b["agent_bias_grid"] = block.agent_side;
      }
      blocks.push_back(b);
    }
    stages_json.push_back({{"dim", stage.dim}, {"blocks", blocks}});
  }
  return {{"embed_dim", arch_.embed_dim},
          {"stem", "conv 7x7 stride 4 padding 2 + LayerNorm"},
          {"layer_norm_eps", kLayerNormEps},
          {"attn_type", arch_.attn_type},
          {"split_size", arch_.split_size},
          {"la_split_size", arch_.la_split_size},
          {"focusing_factor", arch_.focusing_factor},
          {"stages", stages_json}};
}

std::vector<std::string> CSwinTransformerImpl::summary_lines() const {
  std::vector<std::string> lines{"stem          conv 7x7/4, width " + std::to_string(arch_.embed_dim) + ", " +
                                 std::to_string(arch_.stages.size()) + " stages, " +
                                 std::to_string(attention_layers()) + " attention blocks"};
  int grid_h = (arch_.native_height + 2 * kStemPadding - kStemKernel) / kStemStride + 1;
  int grid_w = (arch_.native_width + 2 * kStemPadding - kStemKernel) / kStemStride + 1;
  int layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const CSwinStageArch& stage = arch_.stages[s];
    if (s > 0) grid_h = (grid_h + 1) / 2, grid_w = (grid_w + 1) / 2;
    std::string kinds;
    for (const auto& block : stage.blocks) {
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(layer++) + ":" + to_string(block.native) +
               (block.agents > 0 ? " A" + std::to_string(block.agents) : "") +
               (block.branches > 1 ? " stripes " + std::to_string(block.split) : " global");
    }
    lines.push_back("stage " + std::to_string(s) + "       " + std::to_string(stage.blocks.size()) + " blocks, dim " +
                    std::to_string(stage.dim) + ", " + std::to_string(stage.blocks.front().heads) + " heads, grid " +
                    std::to_string(grid_h) + "x" + std::to_string(grid_w) + " (at the native input): " + kinds);
  }
  return lines;
}

StageTokens CSwinTransformerImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  auto x = stage == 0 ? stem_norm(stem_conv(pass.images).permute({0, 2, 3, 1}))  // [B, H, W, C]
                      : merges[size_t(stage) - 1](previous.x);
  const TokenLayout layout = stage_layout(stage, int(x.size(1)), int(x.size(2)));
  pass.hook(stage == 0 ? "stage1_conv_embed" : "merge" + std::to_string(stage), layout, x);
  return {x, layout};
}

torch::Tensor CSwinTransformerImpl::run_block(const BlockSite& site, const torch::Tensor& input,
                                              const StagedPass& pass) {
  auto& block = *stages[size_t(site.stage)][size_t(site.block)]->as<CSwinBlockImpl>();
  AttentionCapture* capture = site.capture;
  auto normed = block.norm1(input);
  pass.hook(site.name + ".norm1", site.layout, normed);
  auto x = input + block.attend(normed, pass.settings, capture, input);
  x = x + block.mlp(block.norm2(x));
  pass.hook(site.name, site.layout, x);
  if (!capture) return x;
  const int grid_h = site.layout.grid_h, grid_w = site.layout.grid_w;
  if (!capture->branches.empty()) {
    // Each branch's stripes as its own layer; the block's capture names the block.
    const std::vector<StripePlan> plans = block.plans(grid_h, grid_w);
    for (size_t i = 0; i < capture->branches.size(); ++i) {
      AttentionCapture& branch = capture->branches[i];
      branch.layout = branch.key_layout = site.layout;
      branch.placement = capture->placement;
      branch.placement.name = site.name + ".attns." + std::to_string(i);
      branch.placement.access = to_string(plans[i].orientation) + "-stripes";
      branch.placement.window_h = plans[i].stripe_h;
      branch.placement.window_w = plans[i].stripe_w;
    }
    capture->placement.access = "cross-shaped-stripes";
    capture->attention = capture->branches.front().attention;
    capture->heads = arch_.stages[size_t(site.stage)].blocks[size_t(site.block)].heads;
    capture->head_dim = capture->branches.front().head_dim;
  }
  capture->normed_input = normed.reshape({input.size(0), int64_t(grid_h) * grid_w, -1});
  return x;
}

torch::Tensor CSwinTransformerImpl::classify(const StageTokens& tokens, const StagedPass& pass) {
  auto x = norm(tokens.x);
  pass.hook("norm", tokens.layout, x);
  auto pooled = x.mean({1, 2});
  return head.is_empty() ? pooled : head(pooled);
}

}  // namespace attnscope
