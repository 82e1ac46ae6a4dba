#include "models/swin.h"

#include <nlohmann/json.hpp>

#include "models/attention_kernels_successors.h"
#include "models/cpu_threads.h"
#include "models/row_chunked.h"
#include "models/token_linear.h"

namespace attnscope {

namespace {

torch::nn::LayerNormOptions swin_norm_options(int dim, double eps) {
  return torch::nn::LayerNormOptions({dim}).eps(eps);
}

StagedDesign swin_design(const SwinArch& arch) {
  StagedDesign design = StagedDesign::hierarchical(arch, {"layers.", ".blocks."}, HookPoint::Format::ChannelsLast,
                                                   arch.patch_size, arch.patch_size);
  design.named_points = {{"norm", "norm"}};
  design.min_side = arch.patch_size;  // refused as not a multiple
  design.window.kind = WindowSupport::Kind::Trained;
  design.window.text =
      "the window of every windowed block (as timm changes it: bias tables resized, shift w/2); 0: the trained "
      "windows";
  return design;
}

}  // namespace

SwinAttentionImpl::SwinAttentionImpl(int dim, const SwinBlockArch& arch) : arch(arch), dim(dim) {
  if (arch.native == NativeAttention::Pola)
    qkvg = register_module("qkvg", torch::nn::Linear(torch::nn::LinearOptions(dim, 4 * dim).bias(arch.qkv_bias)));
  else
    qkv = register_module("qkv",
                          torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(arch.qkv_bias && !arch.v2)));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  if (arch.v2) {
    if (arch.qkv_bias) {
      q_bias = register_parameter("q_bias", torch::zeros({dim}));
      v_bias = register_parameter("v_bias", torch::zeros({dim}));
    }
    logit_scale = register_parameter("logit_scale", torch::zeros({arch.heads, 1, 1}));
    cpb_mlp = register_module(
        "cpb_mlp", torch::nn::Sequential(torch::nn::Linear(2, 512), torch::nn::ReLU(),
                                         torch::nn::Linear(torch::nn::LinearOptions(512, arch.heads).bias(false))));
  } else if (arch.native == NativeAttention::Softmax) {
    const int side = 2 * arch.table_window - 1;
    relative_position_bias_table =
        register_parameter("relative_position_bias_table", torch::zeros({int64_t(side) * side, arch.heads}));
  } else if (arch.native == NativeAttention::Agent) {
    // agent_swin.py's AgentAttention: a depthwise 3 x 3 on V over all channels, no class slot.
    const int64_t heads = arch.heads, agents = arch.agents, side = arch.agent_side;
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).groups(dim).padding(1)));
    agent_biases = successor_kernels::register_agent_biases(*this, heads, agents, side);
  } else if (arch.native == NativeAttention::InLine) {
    // inline_swin.py's InLineAttention: 3 x 3 kernels per channel predicted from the mean token.
    residual = register_module("residual", successor_kernels::inline_residual_predictor(dim, arch.heads));
  } else {
    // FLatten's focused blocks and PolaFormer's (pola_swin.py: the same DWC, scale and positional
    // encoding, plus the learned power).
    const int head_dim = dim / arch.heads;
    if (arch.native == NativeAttention::Pola)
      power = register_parameter("power", torch::zeros({1, int64_t(arch.heads), 1, int64_t(head_dim)}));
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(head_dim, head_dim, arch.dwc_kernel)
                                                       .groups(head_dim)
                                                       .padding(arch.dwc_kernel / 2)));
    scale = register_parameter("scale", torch::zeros({1, 1, dim}));
    positional_encoding = register_parameter("positional_encoding",
                                             torch::zeros({1, int64_t(arch.encoding_side) * arch.encoding_side, dim}));
  }
}

KernelParameters SwinAttentionImpl::kernel_parameters() const {
  KernelParameters parameters;
  parameters.scale = scale;
  parameters.positional_encoding = positional_encoding;
  parameters.learned_agents = arch.agents;
  parameters.power = power;
  return parameters;
}

torch::Tensor SwinAttentionImpl::project_input(const torch::Tensor& x) {
  if (!q_bias.defined()) return token_linear(qkv, x);
  return torch::nn::functional::linear(x, qkv->weight, torch::cat({q_bias, torch::zeros_like(q_bias), v_bias}));
}

namespace {

// timm's SwinV2 WindowAttention._make_pair_wise_relative_positions: offsets -(w-1)..(w-1) per axis,
// divided by (pretrained window - 1) (or window - 1), times 8, then sign * log2(|x| + 1) / log2(8).
torch::Tensor log_spaced_coordinates(int window_h, int window_w, int pretrained) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32);
  auto rows = torch::arange(-(window_h - 1), window_h, options),
       cols = torch::arange(-(window_w - 1), window_w, options);
  auto grid = torch::meshgrid({rows, cols}, "ij");
  auto table = torch::stack({grid[0], grid[1]}, -1);  // [2h-1, 2w-1, 2]
  const double divide_h = pretrained > 0 ? pretrained - 1 : window_h - 1;
  const double divide_w = pretrained > 0 ? pretrained - 1 : window_w - 1;
  table = table / torch::tensor({std::max(divide_h, 1.0), std::max(divide_w, 1.0)}, options) * 8.0;
  return torch::sign(table) * torch::log2(table.abs() + 1.0) / std::log2(8.0);
}

}  // namespace

torch::Tensor SwinAttentionImpl::relative_bias(int window_h, int window_w) {
  if (arch.v2) {
    // The bias is a function of the window (16 sigmoid(cpb_mlp(coordinates))), kept per window
    // when the weights cannot change.
    const bool keep = !c10::GradMode::is_enabled();
    auto& kept = resized_tables_[{window_h, window_w}];
    torch::Tensor table = keep && kept.defined() && kept.device() == logit_scale.device() ? kept : torch::Tensor();
    if (!table.defined()) {
      auto coordinates = log_spaced_coordinates(window_h, window_w, arch.pretrained_window).to(logit_scale.device());
      table = cpb_mlp->forward(coordinates).view({-1, arch.heads});
      if (keep) kept = table;
    }
    const int area = window_h * window_w;
    auto index = relative_position_index(window_h, window_w).to(table.device()).view({-1});
    return 16.0 * torch::sigmoid(table.index_select(0, index).view({area, area, -1}).permute({2, 0, 1}));
  }
  torch::Tensor table = relative_position_bias_table;
  if (window_h != arch.table_window || window_w != arch.table_window) {
    // Another window than the table's: timm's resize, once per window (weights do not change).
    auto& resized = resized_tables_[{window_h, window_w}];
    if (!resized.defined() || resized.device() != table.device()) {
      torch::NoGradGuard no_grad;
      resized = resize_relative_position_table(table, window_h, window_w);
    }
    table = resized;
  }
  const int area = window_h * window_w;
  auto index = relative_position_index(window_h, window_w).to(table.device()).view({-1});
  return table.index_select(0, index).view({area, area, -1}).permute({2, 0, 1});  // [h, S, S]
}

SwinAttentionImpl::WindowGeometry& SwinAttentionImpl::geometry(const WindowPlan& plan, torch::Device device) {
  const auto key =
      std::make_tuple(plan.grid_h, plan.grid_w, plan.window_h, plan.window_w, plan.shift_h, plan.shift_w, device.str());
  auto found = geometry_.find(key);
  if (found != geometry_.end()) return found->second;
  WindowGeometry built;
  built.shift_mask = shift_mask(plan);
  if (built.shift_mask.defined()) {
    built.shift_mask = built.shift_mask.to(device);
    built.forbidden = built.shift_mask != 0;
  }
  built.slots = window_slots(plan).to(device);
  return geometry_.emplace(key, std::move(built)).first->second;
}

GroupedAttention SwinAttentionImpl::attention_step(const WindowPlan& plan, const AttentionSettings& settings,
                                                   const torch::Tensor& like, bool capture) {
  const bool focused_block = arch.encoded();  // FLatten's and PolaFormer's
  GroupedAttention step;
  step.parameters = kernel_parameters();
  step.resolved = resolve_for_layer(settings, arch.native, step.parameters, !dwc.is_empty() || !residual.is_empty(),
                                    plan.grid_h * plan.grid_w);
  if (!dwc.is_empty()) {
    step.dwc_weight = dwc->weight;
    step.dwc_bias = dwc->bias;
  }
  if (kernel_spec(step.resolved.kernel).global_only) {
    // Anchors are global by construction: one group of every token, anchors pooled from K.
    step.group_grid.grid_h = plan.grid_h;
    step.group_grid.grid_w = plan.grid_w;
    if (step.resolved.learned_agent_bias)
      successor_kernels::add_agent_position_biases(agent_biases, step.group_grid, step.parameters);
    if (step.resolved.learned_positional_encoding)
      step.parameters.positional_encoding = resize_grid_encoding(positional_encoding, plan.grid_h, plan.grid_w);
    return step;
  }
  step.group_grid.grid_h = plan.window_h;
  step.group_grid.grid_w = plan.window_w;
  WindowGeometry& windows = geometry(plan, like.device());
  // FLatten's focused blocks roll like any block but never read the shift mask.
  const bool masked = windows.shift_mask.defined() && !(step.resolved.native && focused_block);
  if (masked) step.forbidden = windows.forbidden;
  if (kernel_spec(step.resolved.kernel).takes_additive) {
    // The relative position bias [1, h, S, S] (FLatten's L blocks have none) plus the shift mask
    // [G, 1, S, S]; attend() adds it broadcast over the images of the batch. Without autograd the
    // sum is kept: weights do not change between inferences.
    const bool keep = !c10::GradMode::is_enabled();
    torch::Tensor additive = keep ? windows.inference_additive : torch::Tensor();
    if (!additive.defined() || additive.scalar_type() != like.scalar_type()) {
      additive = torch::Tensor();
      if (arch.v2 || relative_position_bias_table.defined())
        additive = relative_bias(plan.window_h, plan.window_w).unsqueeze(0);
      if (masked) {
        auto per_window = windows.shift_mask.to(like.dtype()).unsqueeze(1);
        additive = additive.defined() ? additive + per_window : per_window;
      }
      if (keep && additive.defined()) windows.inference_additive = additive.contiguous();
    }
    step.additive = step.capture_additive = additive;
  }
  if (step.resolved.learned_positional_encoding)
    step.parameters.positional_encoding = resize_grid_encoding(positional_encoding, plan.window_h, plan.window_w);
  if (capture) step.query_slots = step.key_slots = windows.slots;
  return step;
}

torch::Tensor SwinAttentionImpl::attend_groups(const torch::Tensor& projected, const GroupedAttention& step,
                                               AttentionCapture* capture) {
  const int64_t groups = projected.size(0), area = projected.size(1), heads = arch.heads, head_dim = dim / heads;
  auto parts = projected.view({groups, area, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});  // q, k, v
  torch::Tensor q = parts[0], k = parts[1];
  if (arch.v2) {
    // Cosine attention: unit q and k, scaled by exp(min(logit_scale, ln 100)); the kernel's own d^-0.5
    // is undone so that the softmax scores are V2's.
    namespace F = torch::nn::functional;
    const auto scale = torch::clamp_max(logit_scale, std::log(100.0)).exp().unsqueeze(0) * std::sqrt(double(head_dim));
    q = F::normalize(q, F::NormalizeFuncOptions().dim(-1)) * scale;
    k = F::normalize(k, F::NormalizeFuncOptions().dim(-1));
  }
  auto out = attend_grouped(step, q, k, parts[2], capture);  // [N', h, S, d]
  return out.transpose(1, 2).reshape({groups, area, dim});
}

torch::Tensor SwinAttentionImpl::forward(const torch::Tensor& x, const WindowPlan& plan,
                                         const AttentionSettings& settings, AttentionCapture* capture) {
  const int64_t batch = x.size(0);
  GroupedAttention step = attention_step(plan, settings, x, capture != nullptr);
  const bool whole_grid = kernel_spec(step.resolved.kernel).global_only;
  // Tokens [N', S, C]: the whole grid per image (global kernels) or the (rolled) windows.
  auto tokens = whole_grid ? x.reshape({batch, int64_t(plan.grid_h) * plan.grid_w, dim}) : to_windows(x, plan);
  if (step.resolved.dwc && !residual.is_empty()) {
    // inline_swin: residual(x.mean(dim=1).unsqueeze(-1)).reshape(b * c, 1, 3, 3), per window.
    torch::nn::Sequential predictor = residual;
    step.local_kernels = predictor->forward(tokens.mean(1).unsqueeze(-1)).reshape({tokens.size(0) * dim, 1, 3, 3});
  }
  torch::Tensor out;
  if (!qkvg.is_empty()) {
    // pola_swin: q, k, v and the gate g from one linear; x = (attention + dwc(v)) * g before proj.
    auto projected = token_linear(qkvg, tokens);
    out = attend_groups(projected.narrow(-1, 0, 3 * dim).contiguous(), step, capture) *
          projected.narrow(-1, 3 * dim, dim);
  } else {
    out = attend_groups(project_input(tokens), step, capture);
  }
  out = token_linear(proj, out);
  return whole_grid ? out.view({batch, plan.grid_h, plan.grid_w, dim}) : from_windows(out, plan, batch);
}

SwinBlockImpl::SwinBlockImpl(int dim, const SwinBlockArch& arch, double eps) : post_norm(arch.v2) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(swin_norm_options(dim, eps)));
  attn = register_module("attn", SwinAttention(dim, arch));
  norm2 = register_module("norm2", torch::nn::LayerNorm(swin_norm_options(dim, eps)));
  mlp = register_module("mlp", Mlp(dim, arch.mlp_hidden));
}

namespace {

// Fewer large windows than cores (a stage-wide window, as InLine-Swin's and Agent-Swin's 56 x 56):
// the window's own ops take every core, since no chunking by windows can. A 7 x 7 window stays on
// one core, as the engine runs small ops (models/cpu_threads.h).
bool few_large_windows(const WindowPlan& plan, int64_t batch) {
  return batch * plan.windows() < configured_threads() && plan.window_area() >= 196;
}

}  // namespace

torch::Tensor SwinBlockImpl::forward_by_window_chunks(const torch::Tensor& x, const WindowPlan& plan,
                                                      const GroupedAttention& step, AttentionCapture* capture,
                                                      torch::Tensor& normed_input) {
  const int64_t batch = x.size(0), dim = x.size(3), area = plan.window_area(), groups = batch * plan.windows();
  const int64_t rows = groups * area;
  // The window frame: rolled, padded, partitioned. Norms and the MLP act per token, attention per
  // window, so the whole block runs there and goes back once.
  const WindowFrame frame = window_frame(plan, batch, x.device());
  auto x_rows = x.reshape({-1, dim}).index_select(0, frame.to_frame);
  const torch::Tensor& padding = frame.padding;  // timm pads the normed tokens with zeros
  torch::Tensor normed = capture ? torch::empty_like(x_rows) : torch::Tensor();
  auto projected = torch::empty({rows, attn->qkv->weight.size(0)}, x.options());
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    auto chunk = post_norm ? x_rows.narrow(0, begin, end - begin).clone() : norm1(x_rows.narrow(0, begin, end - begin));
    if (padding.defined()) chunk.masked_fill_(padding.narrow(0, begin, end - begin).unsqueeze(1), 0.0);
    if (capture) normed.narrow(0, begin, end - begin).copy_(chunk);
    torch::Tensor out = projected.narrow(0, begin, end - begin);
    rows_linear_into(out, attn->qkv, chunk);
    if (attn->q_bias.defined()) out.add_(torch::cat({attn->q_bias, torch::zeros_like(attn->q_bias), attn->v_bias}));
  });
  torch::Tensor merged;
  {
    std::optional<ScopedThreads> all_cores;
    if (few_large_windows(plan, batch)) all_cores.emplace(configured_threads());
    merged = attn->attend_groups(projected.view({groups, area, -1}), step, capture).view({rows, dim});
  }
  auto result = torch::empty_like(x_rows);
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    torch::Tensor out = result.narrow(0, begin, end - begin);
    rows_linear_into(out, attn->proj, merged.narrow(0, begin, end - begin));
    if (post_norm) {  // Swin V2: x + norm1(attn(x)), then x + norm2(mlp(x))
      out.copy_(norm1(out)).add_(x_rows.narrow(0, begin, end - begin));
      out.add_(norm2(rows_linear(mlp->fc2, torch::gelu(rows_linear(mlp->fc1, out)))));
      return;
    }
    out.add_(x_rows.narrow(0, begin, end - begin));
    auto hidden = torch::gelu(rows_linear(mlp->fc1, norm2(out)));
    out.add_(rows_linear(mlp->fc2, hidden));
  });
  if (capture) normed_input = normed.index_select(0, frame.from_frame).view({batch, -1, dim});
  return result.index_select(0, frame.from_frame).view(x.sizes());
}

PatchMergingImpl::PatchMergingImpl(int dim, int out_dim, double eps, bool norm_after) : norm_after(norm_after) {
  norm = register_module("norm", torch::nn::LayerNorm(swin_norm_options(norm_after ? out_dim : 4 * dim, eps)));
  reduction = register_module("reduction", torch::nn::Linear(torch::nn::LinearOptions(4 * dim, out_dim).bias(false)));
}

torch::Tensor PatchMergingImpl::forward(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  const int64_t batch = x.size(0), channels = x.size(3);
  auto padded = x;
  if (x.size(1) % 2 || x.size(2) % 2) padded = F::pad(x, F::PadFuncOptions({0, 0, 0, x.size(2) % 2, 0, x.size(1) % 2}));
  const int64_t height = padded.size(1) / 2, width = padded.size(2) / 2;
  // Each 2 x 2 cell's tokens in the order (0,0), (1,0), (0,1), (1,1): row offset first.
  auto merged = padded.reshape({batch, height, 2, width, 2, channels}).permute({0, 1, 3, 4, 2, 5}).flatten(3);
  if (norm_after) return norm(token_linear(reduction, merged));
  if (!cpu_inference(x)) return token_linear(reduction, norm(merged));
  const int64_t rows = batch * height * width;
  auto merged_rows = merged.reshape({rows, 4 * channels});
  auto out = torch::empty({rows, reduction->weight.size(0)}, x.options());
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    torch::Tensor chunk = out.narrow(0, begin, end - begin);
    rows_linear_into(chunk, reduction, norm(merged_rows.narrow(0, begin, end - begin)));
  });
  return out.view({batch, height, width, -1});
}

SwinStageImpl::SwinStageImpl(int in_dim, const SwinStageArch& arch, double eps) {
  if (arch.downsample)
    downsample = register_module("downsample", PatchMerging(in_dim, arch.dim, eps, arch.merge_norm_after));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (const auto& block : arch.blocks) blocks->push_back(SwinBlock(arch.dim, block, eps));
}

SwinPatchEmbedImpl::SwinPatchEmbedImpl(int in_chans, int dim, int patch, bool with_norm, double eps) {
  proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, dim, patch).stride(patch)));
  if (with_norm) norm = register_module("norm", torch::nn::LayerNorm(swin_norm_options(dim, eps)));
}

ClassifierHeadImpl::ClassifierHeadImpl(int dim, int classes) {
  fc = register_module("fc", torch::nn::Linear(dim, classes));
}

SwinTransformerImpl::SwinTransformerImpl(const SwinArch& arch) : StagedBackbone(swin_design(arch)), arch_(arch) {
  patch_embed = register_module("patch_embed", SwinPatchEmbed(arch.in_chans, arch.embed_dim, arch.patch_size,
                                                              arch.patch_norm, arch.layer_norm_eps));
  layers = register_module("layers", torch::nn::ModuleList());
  int in_dim = arch.embed_dim;
  for (const auto& stage : arch.stages) {
    layers->push_back(SwinStage(in_dim, stage, arch.layer_norm_eps));
    in_dim = stage.dim;
  }
  norm = register_module("norm", torch::nn::LayerNorm(swin_norm_options(in_dim, arch.layer_norm_eps)));
  if (arch.num_classes > 0) head = register_module("head", ClassifierHead(in_dim, arch.num_classes));
}

std::string SwinTransformerImpl::family() const {
  const bool v2 = !arch_.stages.empty() && arch_.stages.front().blocks.front().v2;
  std::string name = v2 ? "swin-v2" : "swin";
  for (const auto& stage : arch_.stages)
    for (const auto& block : stage.blocks)
      if (block.native == NativeAttention::Focused)
        name = "flatten-swin";
      else if (block.native == NativeAttention::Pola)
        name = "pola-swin";
      else if (block.native == NativeAttention::Agent)
        name = "agent-swin";
      else if (block.native == NativeAttention::InLine)
        name = "inline-swin";
  return name_with_layout(name, arch_.source_layout);
}

nlohmann::json SwinTransformerImpl::describe_architecture() const {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& block : stage.blocks) {
      nlohmann::json b{{"native_attention", to_string(block.native)},
                       {"heads", block.heads},
                       {"window", block.window},
                       {"mlp_hidden", block.mlp_hidden}};
      if (block.encoded()) {
        b["dwc_kernel"] = block.dwc_kernel;
        b["positional_encoding_window"] = block.encoding_side;
      } else if (block.native == NativeAttention::Agent) {
        b["agents"] = block.agents;
        b["agent_bias_grid"] = block.agent_side;
      } else if (block.native == NativeAttention::Softmax) {
        b["table_window"] = block.table_window;
      }
      blocks.push_back(b);
    }
    stages.push_back({{"dim", stage.dim}, {"downsample", stage.downsample}, {"blocks", blocks}});
  }
  return {{"source_layout", to_string(arch_.source_layout)},
          {"patch_size", arch_.patch_size},
          {"embed_dim", arch_.embed_dim},
          {"layer_norm_eps", arch_.layer_norm_eps},
          {"attn_type", arch_.attn_type},
          {"stages", stages}};
}

std::vector<std::string> SwinTransformerImpl::summary_lines() const {
  std::vector<std::string> lines{"patch         " + std::to_string(arch_.patch_size) + ", width " +
                                 std::to_string(arch_.embed_dim) + ", " + std::to_string(arch_.stages.size()) +
                                 " stages, " + std::to_string(attention_layers()) + " attention blocks"};
  int grid_h = arch_.native_height / arch_.patch_size, grid_w = arch_.native_width / arch_.patch_size;
  int layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const SwinStageArch& stage = arch_.stages[s];
    if (s > 0) grid_h = (grid_h + 1) / 2, grid_w = (grid_w + 1) / 2;
    std::string kinds;
    for (const auto& block : stage.blocks) {
      const int window = std::min(block.window, std::min(grid_h, grid_w));
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(layer++) + ":" + to_string(block.native) +
               (block.whole_stage() ? " global" : " w" + std::to_string(window)) +
               (block.agents > 0 ? " A" + std::to_string(block.agents) : "");
    }
    lines.push_back("stage " + std::to_string(s) + "       " + std::to_string(stage.blocks.size()) + " blocks, dim " +
                    std::to_string(stage.dim) + ", " + std::to_string(stage.blocks.front().heads) + " heads, grid " +
                    std::to_string(grid_h) + "x" + std::to_string(grid_w) + " (at the native input): " + kinds);
  }
  return lines;
}

StageTokens SwinTransformerImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  torch::Tensor x;
  if (stage == 0) {
    {
      ScopedThreads all_cores(configured_threads());
      x = patch_embed->proj(pass.images).permute({0, 2, 3, 1});  // [B, H, W, C]
    }
    if (!patch_embed->norm.is_empty()) x = patch_embed->norm(x);
  } else {
    auto& merging = layers[size_t(stage)]->as<SwinStageImpl>()->downsample;
    x = merging.is_empty() ? previous.x : merging(previous.x);
  }
  return {x, stage_layout(stage, int(x.size(1)), int(x.size(2)))};
}

torch::Tensor SwinTransformerImpl::run_block(const BlockSite& site, const torch::Tensor& input,
                                             const StagedPass& pass) {
  auto& block = *layers[size_t(site.stage)]->as<SwinStageImpl>()->blocks[size_t(site.block)]->as<SwinBlockImpl>();
  const SwinBlockArch& block_arch = arch_.stages[size_t(site.stage)].blocks[size_t(site.block)];
  // timm clamps windows against the stage's resolution as the patch grid halved s times (floor),
  // while the tokens themselves come from merges that pad odd sides.
  const int resolution_h = int(pass.images.size(2) / arch_.patch_size) >> site.stage,
            resolution_w = int(pass.images.size(3) / arch_.patch_size) >> site.stage;
  const int grid_h = site.layout.grid_h, grid_w = site.layout.grid_w;
  const int window = pass.settings.window > 0 ? pass.settings.window : block_arch.window;
  const WindowPlan plan =
      pass.settings.window <= 0 && block_arch.whole_stage()
          ? plan_windows(grid_h, grid_w, grid_h, grid_w, grid_h, grid_w, /*shifted=*/false)
          : plan_windows(grid_h, grid_w, resolution_h, resolution_w, window, window, /*shifted=*/site.block % 2 == 1);
  AttentionCapture* capture = site.capture;
  // Inference on the CPU runs the block by chunks of its window frame, one core each.
  const bool by_window_chunks = pass.row_chunked();
  const GroupedAttention step = by_window_chunks
                                    ? block.attn->attention_step(plan, pass.settings, input, capture != nullptr)
                                    : GroupedAttention{};
  torch::Tensor x, normed;
  const int64_t batch = input.size(0);
  if (by_window_chunks && !kernel_spec(step.resolved.kernel).global_only && block.attn->qkvg.is_empty()) {
    x = block.forward_by_window_chunks(input, plan, step, capture, normed);
  } else {
    std::optional<ScopedThreads> all_cores;
    if (few_large_windows(plan, batch)) all_cores.emplace(configured_threads());
    if (block.post_norm) {  // Swin V2: the attention reads the block's input; norms follow attention and MLP
      normed = input;
      // Hooked at norm1's output as a forward hook on timm's module would be (pytorch-grad-cam's
      // target layer for Swin), here the normed attention output.
      auto attended = block.norm1(block.attn(input, plan, pass.settings, capture));
      pass.hook(site.name + ".norm1", site.layout, attended);
      x = input + attended;
    } else {
      normed = block.norm1(input);
      pass.hook(site.name + ".norm1", site.layout, normed);
      x = input + block.attn(normed, plan, pass.settings, capture);
    }
    auto flat = x.reshape({batch, int64_t(grid_h) * grid_w, x.size(3)});
    flat = block.post_norm ? flat + block.norm2(block.mlp(flat)) : flat + block.mlp(block.norm2(flat));
    x = flat.view({batch, grid_h, grid_w, -1});
    pass.hook(site.name, site.layout, x);
  }
  if (capture) {
    capture->normed_input = normed.reshape({batch, int64_t(grid_h) * grid_w, -1});
    LayerPlacement& at = capture->placement;
    if (kernel_spec(capture->attention.kernel).global_only || plan.windows() == 1) {
      at.access = "global";
    } else {
      at.access = plan.shifted() ? "shifted-window" : "window";
      at.window_h = plan.window_h;
      at.window_w = plan.window_w;
      at.shift_h = plan.shift_h;
      at.shift_w = plan.shift_w;
    }
  }
  return x;
}

torch::Tensor SwinTransformerImpl::classify(const StageTokens& tokens, const StagedPass& pass) {
  auto x = norm(tokens.x);
  pass.hook("norm", tokens.layout, x);
  auto pooled = x.mean({1, 2});
  return head.is_empty() ? pooled : head->fc(pooled);
}

}  // namespace attnscope
