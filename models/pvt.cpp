#include "models/pvt.h"

#include <nlohmann/json.hpp>

#include "models/attention_kernels_successors.h"
#include "models/cpu_threads.h"
#include "models/row_chunked.h"
#include "models/token_linear.h"

namespace attnscope {

namespace F = torch::nn::functional;

namespace {

torch::nn::LayerNormOptions pvt_norm_options(int dim, double eps) {
  return torch::nn::LayerNormOptions({dim}).eps(eps);
}

// The overlapping patch embeddings keep every side (a 7x7 stem with stride 4, then 3x3 with
// stride 2): a stage's reduction is 4 << stage.
StagedDesign pvt_design(const PvtArch& arch) {
  StagedDesign design = StagedDesign::hierarchical(arch, {"stages.", ".blocks."}, HookPoint::Format::Tokens, 4);
  design.named_points = {{"norm", "stages." + std::to_string(arch.stages.size() - 1) + ".norm"}};
  design.stage_points = {{"stages.", ".norm"}};
  design.min_side = 8;
  design.too_small = [](int64_t, int64_t) { return std::string("input must be at least 8x8 pixels"); };
  design.window.text = "PVT's keys are a reduced grid (spatial reduction), not windows";
  return design;
}

// [B, N, C] tokens of an H x W grid <-> [B, C, H, W], as a channels-last view: convolutions then
// run on it without copying to NCHW, and depthwise ones about 20x faster (transpose + reshape gives
// the batch dimension a stride that LibTorch does not recognise as channels-last).
torch::Tensor to_image(const torch::Tensor& tokens, int height, int width) {
  return tokens.view({tokens.size(0), height, width, tokens.size(2)}).permute({0, 3, 1, 2});
}
torch::Tensor to_tokens(const torch::Tensor& image) { return image.flatten(2).transpose(1, 2); }

// F.interpolate(mode="linear", align_corners=False) from n to N points as an [N, n] matrix.
torch::Tensor linear_resampling(int64_t from, int64_t to, const torch::TensorOptions& options) {
  auto identity = torch::eye(from, options).unsqueeze(0);  // [1, n, n]: channel j is the j-th basis vector
  auto resampled = F::interpolate(identity, F::InterpolateFuncOptions()
                                                .size(std::vector<int64_t>{to})
                                                .mode(torch::kLinear)
                                                .align_corners(false));  // [1, n, N]
  return resampled[0].t().contiguous();                                  // [N, n]
}

}  // namespace

PvtAttentionImpl::PvtAttentionImpl(int dim, const PvtBlockArch& arch, double eps) : arch(arch), dim(dim) {
  if (arch.native == NativeAttention::Pola)
    qg = register_module("qg", torch::nn::Linear(torch::nn::LinearOptions(dim, 2 * dim).bias(arch.qkv_bias)));
  else
    q = register_module("q", torch::nn::Linear(torch::nn::LinearOptions(dim, dim).bias(arch.qkv_bias)));
  kv = register_module("kv", torch::nn::Linear(torch::nn::LinearOptions(dim, 2 * dim).bias(arch.qkv_bias)));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  if (arch.pooled || arch.sr_ratio > 1) {
    const int kernel = arch.pooled ? 1 : arch.sr_ratio;
    sr = register_module("sr", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, kernel).stride(kernel)));
    norm = register_module("norm", torch::nn::LayerNorm(pvt_norm_options(dim, eps)));
  }
  if (arch.native == NativeAttention::Focused || arch.native == NativeAttention::Pola) {
    const int head_dim = dim / arch.heads;
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(head_dim, head_dim, arch.dwc_kernel)
                                                       .groups(head_dim)
                                                       .padding(arch.dwc_kernel / 2)));
    if (arch.native == NativeAttention::Pola)
      power = register_parameter("power", torch::zeros({1, int64_t(arch.heads), 1, int64_t(head_dim)}));
    scale = register_parameter("scale", torch::zeros({1, 1, dim}));
    positional_encoding = register_parameter("positional_encoding", torch::zeros({1, arch.encoding_tokens, dim}));
  }
  if (arch.native == NativeAttention::Agent) {
    const int64_t heads = arch.heads, agents = arch.agents, side = arch.agent_side;
    dwc = register_module("dwc", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).groups(dim).padding(1)));
    agent_biases = successor_kernels::register_agent_biases(*this, heads, agents, side);
  }
  if (arch.native == NativeAttention::InLine) {
    residual = register_module("residual", successor_kernels::inline_residual_predictor(dim, arch.heads));
  }
}

torch::Tensor PvtAttentionImpl::reduced_keys(const torch::Tensor& x, int height, int width, TokenLayout& key_layout) {
  key_layout.grid_h = height;
  key_layout.grid_w = width;
  if (arch.pooled) {
    auto pooled = F::adaptive_avg_pool2d(to_image(x, height, width), F::AdaptiveAvgPool2dFuncOptions({7, 7}));
    key_layout.grid_h = key_layout.grid_w = 7;
    return torch::gelu(norm(to_tokens(sr(pooled))));
  }
  if (arch.sr_ratio <= 1) return x;
  auto image = sr(to_image(x, height, width));
  key_layout.grid_h = int(image.size(2));
  key_layout.grid_w = int(image.size(3));
  return norm(to_tokens(image));
}

torch::Tensor PvtAttentionImpl::mix(const torch::Tensor& queries, const torch::Tensor& reduced, int height, int width,
                                    const AttentionSettings& settings, AttentionCapture* capture,
                                    const TokenLayout& key_layout) {
  const int64_t batch = queries.size(0), tokens = queries.size(1), heads = arch.heads, head_dim = dim / heads;
  const int64_t keys = reduced.size(1);
  auto query = queries.view({batch, tokens, heads, head_dim}).permute({0, 2, 1, 3});
  auto pairs = token_linear(kv, reduced).view({batch, keys, 2, heads, head_dim}).permute({2, 0, 3, 1, 4});

  GroupedAttention step;
  step.parameters.scale = scale;
  step.parameters.positional_encoding = positional_encoding;
  step.parameters.power = power;
  step.parameters.learned_agents = arch.agents;
  step.resolved = resolve_for_layer(settings, arch.native, step.parameters, !dwc.is_empty() || !residual.is_empty(),
                                    key_layout.grid_h * key_layout.grid_w);
  step.group_grid = key_layout;          // pooled anchors come from the keys' grid
  if (step.resolved.learned_agent_bias)  // agent_pvt's blocks keep every token as a key (sr 1)
    successor_kernels::add_agent_position_biases(agent_biases, key_layout, step.parameters);
  if (step.resolved.learned_positional_encoding && positional_encoding.size(1) != keys)
    // Trained for another key grid (another input size): resized as timm resizes pos_embed.
    step.parameters.positional_encoding =
        resize_grid_encoding(positional_encoding, key_layout.grid_h, key_layout.grid_w);
  auto values = pairs[1];
  const bool dwc_on = step.resolved.dwc;
  step.resolved.dwc = false;  // FLatten-PVT's DWC runs below, on V over the queries' grid
  auto out = attend_grouped(step, query, pairs[0], values, capture);  // [B, h, N, d]
  if (dwc_on) {
    // With reduced keys, V is first resampled to every query token (1-D linear over the
    // flattened order), then the DWC runs on the H x W grid.
    torch::Tensor resampling;
    auto full_values = values;
    if (keys != tokens) {
      resampling = linear_resampling(keys, tokens, values.options());  // [N, n]
      full_values = torch::matmul(resampling, values);
    }
    TokenLayout grid;
    grid.grid_h = height;
    grid.grid_w = width;
    torch::Tensor local_kernels;
    if (!residual.is_empty()) {
      // inline_pvt: residual(x.mean(dim=1).unsqueeze(-1)).reshape(b * c, 1, 3, 3); its keys are x.
      torch::nn::Sequential predictor = residual;
      local_kernels = predictor->forward(reduced.mean(1).unsqueeze(-1)).reshape({batch * dim, 1, 3, 3});
      out = out + depthwise_conv_per_item(full_values, local_kernels, grid);
    } else {
      out = out + depthwise_conv_on_values(full_values, dwc->weight, dwc->bias, grid);
    }
    if (capture) {
      capture->attention.dwc = true;
      capture->dwc_weight = (local_kernels.defined() ? local_kernels : dwc->weight).detach();
      if (resampling.defined()) capture->value_resampling = resampling;
    }
  }
  return out.transpose(1, 2).reshape({batch, tokens, dim});
}

torch::Tensor PvtAttentionImpl::forward(const torch::Tensor& x, int height, int width,
                                        const AttentionSettings& settings, AttentionCapture* capture,
                                        TokenLayout& key_layout) {
  auto reduced = reduced_keys(x, height, width, key_layout);
  if (!qg.is_empty()) {
    // pola_pvt: q, g = qg(x); x = (attention + dwc(v)) * g before proj.
    auto projected = token_linear(qg, x);
    auto mixed = mix(projected.narrow(-1, 0, dim).contiguous(), reduced, height, width, settings, capture, key_layout);
    return token_linear(proj, mixed * projected.narrow(-1, dim, dim));
  }
  return token_linear(proj, mix(token_linear(q, x), reduced, height, width, settings, capture, key_layout));
}

PvtMlpImpl::PvtMlpImpl(int dim, int hidden, bool relu, bool depthwise) : relu(relu) {
  fc1 = register_module("fc1", torch::nn::Linear(dim, hidden));
  if (depthwise)
    dwconv = register_module("dwconv",
                             torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, hidden, 3).padding(1).groups(hidden)));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
}

torch::Tensor PvtMlpImpl::forward(const torch::Tensor& x, int height, int width) {
  if (dwconv.is_empty()) return token_linear(fc2, torch::gelu(token_linear(fc1, x)));
  auto hidden = to_image(token_linear(fc1, x), height, width);
  if (relu) hidden = torch::relu(hidden);
  return token_linear(fc2, torch::gelu(to_tokens(dwconv(hidden))));
}

PvtBlockImpl::PvtBlockImpl(int dim, const PvtBlockArch& arch, bool linear, double block_eps, double embed_eps) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(pvt_norm_options(dim, block_eps)));
  attn = register_module("attn", PvtAttention(dim, arch, embed_eps));
  norm2 = register_module("norm2", torch::nn::LayerNorm(pvt_norm_options(dim, block_eps)));
  mlp = register_module("mlp", PvtMlp(dim, arch.mlp_hidden, linear, arch.mlp_dwconv));
}

torch::Tensor PvtBlockImpl::forward_by_row_chunks(const torch::Tensor& x, int height, int width,
                                                  const AttentionSettings& settings, AttentionCapture* capture,
                                                  TokenLayout& key_layout, torch::Tensor& normed_input) {
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2), rows = batch * tokens;
  const int64_t hidden_dim = mlp->fc1->weight.size(0);
  auto x_rows = x.reshape({rows, dim});
  auto normed = torch::empty_like(x_rows), queries = torch::empty_like(x_rows);
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    auto chunk = norm1(x_rows.narrow(0, begin, end - begin));
    normed.narrow(0, begin, end - begin).copy_(chunk);
    torch::Tensor out = queries.narrow(0, begin, end - begin);
    rows_linear_into(out, attn->q, chunk);
  });
  normed_input = normed.view({batch, tokens, dim});
  torch::Tensor reduced;
  {
    ScopedThreads all_cores(configured_threads());
    reduced = attn->reduced_keys(normed_input, height, width, key_layout);
  }
  auto merged = attn->mix(queries.view({batch, tokens, dim}), reduced, height, width, settings, capture, key_layout)
                    .reshape({rows, dim});
  auto attended = torch::empty_like(x_rows), hidden = torch::empty({rows, hidden_dim}, x.options());
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    torch::Tensor out = attended.narrow(0, begin, end - begin);
    rows_linear_into(out, attn->proj, merged.narrow(0, begin, end - begin));
    out.add_(x_rows.narrow(0, begin, end - begin));
    torch::Tensor expanded = hidden.narrow(0, begin, end - begin);
    rows_linear_into(expanded, mlp->fc1, norm2(out));
    if (mlp->relu) expanded.relu_();
  });
  torch::Tensor mixed = hidden;
  if (!mlp->dwconv.is_empty()) {
    ScopedThreads all_cores(configured_threads());
    mixed = to_tokens(mlp->dwconv(to_image(hidden.view({batch, tokens, hidden_dim}), height, width)))
                .reshape({rows, hidden_dim});
  }
  auto result = torch::empty_like(x_rows);
  for_each_row_tile(rows, [&](int64_t begin, int64_t end) {
    torch::Tensor out = result.narrow(0, begin, end - begin);
    rows_linear_into(out, mlp->fc2, torch::gelu(mixed.narrow(0, begin, end - begin)));
    out.add_(attended.narrow(0, begin, end - begin));
  });
  return result.view({batch, tokens, dim});
}

OverlapPatchEmbedImpl::OverlapPatchEmbedImpl(int in_chans, int dim, int kernel, int stride, double eps, int padding) {
  proj = register_module(
      "proj",
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(in_chans, dim, kernel).stride(stride).padding(padding < 0 ? kernel / 2 : padding)));
  norm = register_module("norm", torch::nn::LayerNorm(pvt_norm_options(dim, eps)));
}

PvtStageImpl::PvtStageImpl(int in_dim, const PvtStageArch& arch, bool linear, double block_eps, double embed_eps) {
  if (arch.downsample) downsample = register_module("downsample", OverlapPatchEmbed(in_dim, arch.dim, 3, 2, embed_eps));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (const auto& block : arch.blocks) blocks->push_back(PvtBlock(arch.dim, block, linear, block_eps, embed_eps));
  norm = register_module("norm", torch::nn::LayerNorm(pvt_norm_options(arch.dim, block_eps)));
}

PyramidVisionTransformerImpl::PyramidVisionTransformerImpl(const PvtArch& arch)
    : StagedBackbone(pvt_design(arch)), arch_(arch) {
  patch_embed =
      register_module("patch_embed", OverlapPatchEmbed(arch.in_chans, arch.stages.front().dim, 7, 4, arch.embed_eps));
  stages = register_module("stages", torch::nn::ModuleList());
  int in_dim = arch.stages.front().dim;
  for (const auto& stage : arch.stages) {
    stages->push_back(PvtStage(in_dim, stage, arch.linear, arch.block_eps, arch.embed_eps));
    in_dim = stage.dim;
  }
  if (arch.num_classes > 0) head = register_module("head", torch::nn::Linear(in_dim, arch.num_classes));
}

std::string PyramidVisionTransformerImpl::family() const {
  std::string name = arch_.flatten ? "flatten-pvt-v2" : "pvt-v2";
  if (arch_.linear) name += "-li";
  return name_with_layout(name, arch_.source_layout);
}

nlohmann::json PyramidVisionTransformerImpl::describe_architecture() const {
  nlohmann::json stages_json = nlohmann::json::array();
  for (const auto& stage : arch_.stages) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& block : stage.blocks) {
      nlohmann::json b{{"native_attention", to_string(block.native)},
                       {"heads", block.heads},
                       {"sr_ratio", block.sr_ratio},
                       {"pooled", block.pooled},
                       {"mlp_hidden", block.mlp_hidden}};
      if (block.native == NativeAttention::Focused) {
        b["dwc_kernel"] = block.dwc_kernel;
        b["positional_encoding_tokens"] = block.encoding_tokens;
      }
      blocks.push_back(b);
    }
    stages_json.push_back({{"dim", stage.dim}, {"blocks", blocks}});
  }
  return {{"source_layout", to_string(arch_.source_layout)}, {"linear", arch_.linear}, {"stages", stages_json}};
}

std::vector<std::string> PyramidVisionTransformerImpl::summary_lines() const {
  std::vector<std::string> lines{"stages        " + std::to_string(arch_.stages.size()) + ", " +
                                 std::to_string(attention_layers()) + " attention blocks" +
                                 (arch_.linear ? ", -li (keys pooled to 7x7)" : "")};
  int grid_h = (arch_.native_height + 3) / 4, grid_w = (arch_.native_width + 3) / 4;
  int layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const PvtStageArch& stage = arch_.stages[s];
    if (s > 0) grid_h = (grid_h + 1) / 2, grid_w = (grid_w + 1) / 2;
    const PvtBlockArch& first = stage.blocks.front();
    const int keys_h = first.pooled ? 7 : grid_h / first.sr_ratio, keys_w = first.pooled ? 7 : grid_w / first.sr_ratio;
    lines.push_back("stage " + std::to_string(s) + "       layers " + std::to_string(layer) + ".." +
                    std::to_string(layer + int(stage.blocks.size()) - 1) + ": " + to_string(first.native) + ", dim " +
                    std::to_string(stage.dim) + ", " + std::to_string(first.heads) + " heads, queries " +
                    std::to_string(grid_h) + "x" + std::to_string(grid_w) + ", keys " + std::to_string(keys_h) + "x" +
                    std::to_string(keys_w) + " (at the native input)");
    layer += int(stage.blocks.size());
  }
  return lines;
}

StageTokens PyramidVisionTransformerImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  // The stem on the image, later a stage's overlapping patch embedding on the previous grid; on all cores.
  auto& embedding = stage == 0 ? patch_embed : stages[size_t(stage)]->as<PvtStageImpl>()->downsample;
  if (embedding.is_empty()) return {previous.x, stage_layout(stage, previous.layout.grid_h, previous.layout.grid_w)};
  torch::Tensor features;
  {
    ScopedThreads all_cores(configured_threads());
    features = embedding->proj(stage == 0 ? pass.images
                                          : to_image(previous.x, previous.layout.grid_h, previous.layout.grid_w));
  }
  return {embedding->norm(to_tokens(features)), stage_layout(stage, int(features.size(2)), int(features.size(3)))};
}

torch::Tensor PyramidVisionTransformerImpl::run_block(const BlockSite& site, const torch::Tensor& input,
                                                      const StagedPass& pass) {
  auto& block = *stages[size_t(site.stage)]->as<PvtStageImpl>()->blocks[size_t(site.block)]->as<PvtBlockImpl>();
  const int height = site.layout.grid_h, width = site.layout.grid_w;
  AttentionCapture* capture = site.capture;
  TokenLayout key_layout = site.layout;
  torch::Tensor x, normed;
  if (pass.row_chunked()) {
    // Per-token ops by row chunks, one core each; the spatial reduction and convolutions on all.
    x = block.forward_by_row_chunks(input, height, width, pass.settings, capture, key_layout, normed);
  } else {
    normed = block.norm1(input);
    pass.hook(site.name + ".norm1", site.layout, normed);
    x = input + block.attn(normed, height, width, pass.settings, capture, key_layout);
    x = x + block.mlp(block.norm2(x), height, width);
    pass.hook(site.name, site.layout, x);
  }
  if (capture) {
    const PvtBlockArch& block_arch = arch_.stages[size_t(site.stage)].blocks[size_t(site.block)];
    key_layout.patch_size = site.layout.patch_size * std::max(1, height / std::max(1, key_layout.grid_h));
    capture->key_layout = key_layout;
    capture->normed_input = normed;
    capture->placement.access =
        block_arch.pooled ? "pooled-keys" : (block_arch.sr_ratio > 1 ? "spatial-reduction" : "global");
  }
  return x;
}

torch::Tensor PyramidVisionTransformerImpl::leave_stage(int stage, const StageTokens& tokens, const StagedPass& pass) {
  auto x = stages[size_t(stage)]->as<PvtStageImpl>()->norm(tokens.x);
  pass.hook("stages." + std::to_string(stage) + ".norm", tokens.layout, x);
  return x;
}

torch::Tensor PyramidVisionTransformerImpl::classify(const StageTokens& tokens, const StagedPass&) {
  auto pooled = tokens.x.mean(1);
  return head.is_empty() ? pooled : head(pooled);
}

}  // namespace attnscope
