#include "models/mlla.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "models/arch_config.h"
#include "models/checkpoint_keys.h"
#include "models/cpu_threads.h"
#include "models/local_attention.h"
#include "models/model_families.h"
#include "models/token_linear.h"

namespace attnscope {

namespace {

StagedDesign mlla_design(const MllaArch& arch) {
  StagedDesign design = StagedDesign::hierarchical(arch, {"layers.", ".blocks."}, HookPoint::Format::Tokens, 4);
  design.min_side = 8;
  design.too_small = [](int64_t, int64_t) { return std::string("input must be at least 8x8 pixels"); };
  design.window.text = "MLLA's linear attention is global: it has no window";
  return design;
}

// A depthwise conv over tokens [B, N, C] of an H x W grid.
torch::Tensor depthwise_on_tokens(torch::nn::Conv2d& conv, const torch::Tensor& x, int64_t height, int64_t width) {
  auto image = x.view({x.size(0), height, width, x.size(2)}).permute({0, 3, 1, 2});
  return conv(image).flatten(2).transpose(1, 2);
}

torch::nn::Conv2d depthwise3x3(int dim) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 3).padding(1).groups(dim));
}

// One stage as the authors name it: `blocks` and, before the next stage, `downsample.conv`.
struct MllaLayerImpl : torch::nn::Module {
  MllaLayerImpl(const MllaStageArch& stage, int grid_h, int grid_w) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (const auto& block : stage.blocks) blocks->push_back(MllaBlock(stage, block, grid_h, grid_w));
    if (stage.merge_hidden > 0) {
      const int wide = stage.merge_hidden;
      auto conv = torch::nn::Sequential(
          MllaConvLayer(torch::nn::Conv2dOptions(stage.dim, wide, 1), false, true),
          MllaConvLayer(torch::nn::Conv2dOptions(wide, wide, 3).stride(2).padding(1).groups(wide), false, true),
          MllaConvLayer(torch::nn::Conv2dOptions(wide, 2 * stage.dim, 1), true, false));
      downsample = register_module("downsample", std::make_shared<torch::nn::Module>());
      downsample->register_module("conv", conv);
      merge = conv;
    }
  }
  torch::nn::ModuleList blocks{nullptr};
  std::shared_ptr<torch::nn::Module> downsample;
  torch::nn::Sequential merge{nullptr};
};
TORCH_MODULE(MllaLayer);

}  // namespace

MllaConvLayerImpl::MllaConvLayerImpl(torch::nn::Conv2dOptions options, bool with_norm, bool with_relu)
    : relu(with_relu) {
  const int64_t channels = options.out_channels();
  conv = register_module("conv", torch::nn::Conv2d(options));
  if (with_norm) norm = register_module("norm", torch::nn::BatchNorm2d(channels));
}

torch::Tensor MllaConvLayerImpl::forward(const torch::Tensor& x) {
  auto y = conv(x);
  if (!norm.is_empty()) y = norm(y);
  return relu ? torch::relu(y) : y;
}

MllaStemImpl::MllaStemImpl(int in_chans, int dim) {
  const int half = dim / 2;
  auto options = [](int in, int out, int kernel) {
    return torch::nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(false);
  };
  conv1 = register_module("conv1", MllaConvLayer(options(in_chans, half, 3).stride(2), true, true));
  conv2 = register_module("conv2", torch::nn::Sequential(MllaConvLayer(options(half, half, 3), true, true),
                                                         MllaConvLayer(options(half, half, 3), true, false)));
  conv3 = register_module("conv3", torch::nn::Sequential(MllaConvLayer(options(half, 4 * dim, 3).stride(2), true, true),
                                                         MllaConvLayer(options(4 * dim, dim, 1), true, false)));
}

torch::Tensor MllaStemImpl::forward(const torch::Tensor& images) {
  auto x = conv1(images);
  x = conv2->forward(x) + x;
  return conv3->forward(x);
}

MllaAttentionImpl::MllaAttentionImpl(int dim, int heads, int grid_h, int grid_w, bool qkv_bias) : heads(heads) {
  qk = register_module("qk", torch::nn::Linear(torch::nn::LinearOptions(dim, 2 * dim).bias(qkv_bias)));
  lepe = register_module("lepe", depthwise3x3(dim));
  rope = register_module("rope", std::make_shared<torch::nn::Module>());
  rope->register_buffer("rotations", torch::zeros({grid_h, grid_w, dim / 2, 2}));  // C / 2 complex pairs
}

torch::Tensor MllaAttentionImpl::forward(const torch::Tensor& x, const TokenLayout& layout,
                                         const AttentionSettings& settings, AttentionCapture* capture) {
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
  auto projected = token_linear(qk, x);
  // q, k = qk(x); v = x: the kernel's features (ELU + 1, the RoPE of the grid) are MLLA's own.
  auto q = split_heads(projected.narrow(-1, 0, dim).contiguous(), heads);
  auto k = split_heads(projected.narrow(-1, dim, dim).contiguous(), heads);
  auto v = split_heads(x.contiguous(), heads);
  GroupedAttention step;
  step.resolved = resolve_for_layer(settings, Kernel::Mlla, step.parameters, false, int(tokens));
  step.group_grid = layout;
  auto out = attend_grouped(step, q, k, v, capture).transpose(1, 2).reshape({batch, tokens, dim});
  return out + depthwise_on_tokens(lepe, x, layout.grid_h, layout.grid_w);  // LePE on v, outside the matrix
}

MllaBlockImpl::MllaBlockImpl(const MllaStageArch& stage, const MllaBlockArch& block, int grid_h, int grid_w) {
  const int dim = stage.dim;
  cpe1 = register_module("cpe1", depthwise3x3(dim));
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  in_proj = register_module("in_proj", torch::nn::Linear(dim, dim));
  act_proj = register_module("act_proj", torch::nn::Linear(dim, dim));
  dwc = register_module("dwc", depthwise3x3(dim));
  attn = register_module("attn", MllaAttention(dim, stage.heads, grid_h, grid_w, block.qkv_bias));
  out_proj = register_module("out_proj", torch::nn::Linear(dim, dim));
  cpe2 = register_module("cpe2", depthwise3x3(dim));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  mlp = register_module("mlp", Mlp(dim, block.mlp_hidden));
}

MllaImpl::MllaImpl(const MllaArch& arch) : StagedBackbone(mlla_design(arch)), arch_(arch) {
  patch_embed = register_module("patch_embed", MllaStem(arch.in_chans, arch.embed_dim));
  layers = register_module("layers", torch::nn::ModuleList());
  int grid_h = arch.native_height / 4, grid_w = arch.native_width / 4;
  for (const auto& stage : arch.stages) {
    layers->push_back(MllaLayer(stage, grid_h, grid_w));
    grid_h /= 2, grid_w /= 2;
  }
  const int width = arch.stages.back().dim;
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  if (arch.num_classes > 0) head = register_module("head", torch::nn::Linear(width, arch.num_classes));
}

nlohmann::json MllaImpl::describe_architecture() const {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : arch_.stages)
    stages.push_back({{"dim", stage.dim},
                      {"heads", stage.heads},
                      {"blocks", stage.blocks.size()},
                      {"mlp_hidden", stage.blocks.front().mlp_hidden},
                      {"merge_hidden", stage.merge_hidden}});
  return {{"source_layout", "authors"}, {"embed_dim", arch_.embed_dim}, {"stages", stages}};
}

std::vector<std::string> MllaImpl::summary_lines() const {
  std::vector<std::string> lines{"stem          conv 3x3/2 x2 (BatchNorm), width " + std::to_string(arch_.embed_dim) +
                                 ", " + std::to_string(arch_.stages.size()) + " stages, " +
                                 std::to_string(attention_layers()) + " attention blocks"};
  int grid = arch_.native_height / 4, layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const MllaStageArch& stage = arch_.stages[s];
    lines.push_back("stage " + std::to_string(s) + "       layers " + std::to_string(layer) + ".." +
                    std::to_string(layer + int(stage.blocks.size()) - 1) + ": mlla (ELU+1, RoPE, LePE, gated), dim " +
                    std::to_string(stage.dim) + ", " + std::to_string(stage.heads) + " heads, grid " +
                    std::to_string(grid) + "x" + std::to_string(grid) + " (at the native input)");
    layer += int(stage.blocks.size());
    grid /= 2;
  }
  return lines;
}

StageTokens MllaImpl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  torch::Tensor image;
  {
    ScopedThreads all_cores(configured_threads());
    if (stage == 0) {
      image = patch_embed(pass.images);
    } else {
      auto& merge = layers[size_t(stage - 1)]->as<MllaLayerImpl>()->merge;
      image = merge->forward(previous.x.view({previous.x.size(0), previous.layout.grid_h, previous.layout.grid_w, -1})
                                 .permute({0, 3, 1, 2}));
    }
  }
  return {image.flatten(2).transpose(1, 2), stage_layout(stage, int(image.size(2)), int(image.size(3)))};
}

torch::Tensor MllaImpl::run_block(const BlockSite& site, const torch::Tensor& input, const StagedPass& pass) {
  auto& block = *layers[size_t(site.stage)]->as<MllaLayerImpl>()->blocks[size_t(site.block)]->as<MllaBlockImpl>();
  const int64_t height = site.layout.grid_h, width = site.layout.grid_w;
  // Every op of the block on every core: its four depthwise 3 x 3 convolutions and gated products
  // are a third of the forward, and at every stage they gain more than waking the threads costs
  // (the engine's default runs small ops on one core: models/cpu_threads.h).
  ScopedThreads all_cores(configured_threads());
  auto x = input + depthwise_on_tokens(block.cpe1, input, height, width);
  auto normed = block.norm1(x);
  pass.hook(site.name + ".norm1", site.layout, normed);
  auto gate = torch::silu(block.act_proj(normed));
  auto mixed = torch::silu(depthwise_on_tokens(block.dwc, block.in_proj(normed), height, width));
  x = x + block.out_proj(block.attn(mixed, site.layout, pass.settings, site.capture) * gate);
  x = x + depthwise_on_tokens(block.cpe2, x, height, width);
  x = x + block.mlp(block.norm2(x));
  pass.hook(site.name, site.layout, x);
  if (site.capture) {
    site.capture->normed_input = normed;
    site.capture->placement.access = "global";
  }
  return x;
}

torch::Tensor MllaImpl::classify(const StageTokens& tokens, const StagedPass& pass) {
  auto x = norm(tokens.x);
  pass.hook("norm", tokens.layout, x);
  auto pooled = x.mean(1);
  return head.is_empty() ? pooled : head(pooled);
}

// ---- checkpoint ---------------------------------------------------------------------------------

namespace {

bool looks_like_mlla(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("patch_embed.conv1.conv.weight") &&
         checkpoint.tensors.count("layers.0.blocks.0.attn.qk.weight");
}

MllaArch infer_mlla_arch(ShapeReader& shapes, const nlohmann::json& meta, std::vector<ArchAssumption>& assumed) {
  MllaArch arch;
  arch.in_chans = shapes.size("patch_embed.conv1.conv.weight", 4, 1, "input channel count", kRgbRange);
  arch.embed_dim = shapes.size("patch_embed.conv3.1.conv.weight", 4, 0, "width", kWidthRange);
  if (shapes.size("patch_embed.conv1.conv.weight", 4, 0, "stem width", kWidthRange) * 2 != arch.embed_dim)
    throw shapes.error("patch_embed.conv1.conv.weight",
                       "is not half the width " + std::to_string(arch.embed_dim) + " (MLLA's stem)");
  size_t stage_count = 0;
  while (stage_count < 64 && shapes.has("layers." + std::to_string(stage_count) + ".blocks.0.norm1.weight"))
    ++stage_count;
  const std::vector<int> given_heads = stage_counts(meta, "heads", stage_count);
  std::vector<int> heads_used;
  bool heads_assumed = false;
  int in_dim = arch.embed_dim, depth = 0;
  for (int s = 0; shapes.has("layers." + std::to_string(s) + ".blocks.0.norm1.weight"); ++s) {
    shapes.bounded("stage count", "layers.S", s + 1, kStageRange);
    const std::string layer = "layers." + std::to_string(s) + ".";
    MllaStageArch stage;
    stage.dim = shapes.size(layer + "blocks.0.norm1.weight", 1, 0, "width", kWidthRange);
    if (stage.dim != in_dim)
      throw shapes.error(layer + "blocks.0.norm1.weight", "has width " + std::to_string(stage.dim) + " after " +
                                                              std::to_string(in_dim) + " (a merge doubles it)");
    if (stage.dim % 4 != 0)
      throw shapes.error(layer + "blocks.0.norm1.weight",
                         "gives width " + std::to_string(stage.dim) + ": MLLA's RoPE needs a multiple of 4");
    for (int b = 0; shapes.has(layer + "blocks." + std::to_string(b) + ".norm1.weight"); ++b) {
      shapes.bounded("depth", "layers.S.blocks.B", ++depth, kDepthRange);
      const std::string prefix = layer + "blocks." + std::to_string(b) + ".";
      if (shapes.tensor(prefix + "attn.qk.weight", 2).sizes() != c10::IntArrayRef({2 * stage.dim, stage.dim}))
        throw shapes.error(prefix + "attn.qk.weight", "is not [2C, C] for the width " + std::to_string(stage.dim));
      MllaBlockArch block;
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      block.qkv_bias = shapes.has(prefix + "attn.qk.bias");
      stage.blocks.push_back(block);
    }
    const std::string merge = layer + "downsample.conv.0.conv.weight";
    if (shapes.has(merge)) stage.merge_hidden = shapes.size(merge, 4, 0, "merge width", kHiddenRange);
    if (!given_heads.empty() && size_t(s) < given_heads.size()) {
      stage.heads = given_heads[size_t(s)];
    } else {
      stage.heads = std::max(1, stage.dim / 32);  // the released models' head width
      heads_assumed = true;
    }
    if (stage.dim % stage.heads != 0 || (stage.dim / stage.heads) % 2 != 0)
      throw CheckpointError(std::to_string(stage.heads) + " heads do not split the width " + std::to_string(stage.dim) +
                            " of stage " + std::to_string(s) +
                            " into heads of an even width (RoPE rotates channel pairs)");
    heads_used.push_back(stage.heads);
    arch.stages.push_back(stage);
    in_dim = stage.merge_hidden > 0 ? 2 * stage.dim : stage.dim;
  }
  if (arch.stages.empty()) throw CheckpointError("no MLLA stage found (missing 'layers.0.blocks.0.norm1.weight')");
  if (heads_assumed)
    assumed.push_back({"heads", heads_used, "width / 32, the released models' head width; no key shows the heads"});
  if (shapes.has("head.weight")) arch.num_classes = shapes.size("head.weight", 2, 0, "class count", kClassRange);
  // The training input: the RoPE buffer of the first block holds its grid.
  const std::string rotations = "layers.0.blocks.0.attn.rope.rotations";
  int native = 0;
  if (meta.contains("img_size") && meta["img_size"].is_number_integer()) {
    native = shapes.bounded("native input size", "arch img_size", meta["img_size"].get<int64_t>(), kInputRange);
  } else if (shapes.has(rotations)) {
    native = shapes.bounded("native input size", rotations,
                            int64_t(shapes.size(rotations, 4, 0, "RoPE grid", kGridRange)) * 4, kInputRange);
  } else {
    native = 224;
    assumed.push_back({"img_size", native, "MLLA's training input; no RoPE buffer shows it"});
  }
  arch.native_height = arch.native_width = native;
  return arch;
}

StagedMemory mlla_memory(const MllaArch& arch) {
  const double embed = arch.embed_dim, width = arch.stages.back().dim, classes = arch.num_classes;
  const double stem =
      9 * (arch.in_chans * embed / 2 + 2 * embed * embed / 4 + embed / 2 * 4 * embed) + 4 * embed * embed;
  return StagedMemory::halving(
      arch.stages, double(arch.native_height) / 4, 0, stem + (classes + 2) * width,
      [](const MllaStageArch& stage, const MllaBlockArch& block) {
        const double dim = stage.dim, hidden = block.mlp_hidden;
        return StagedMemory::Block{5 * dim * dim + 2 * dim * hidden + 50 * dim, double(stage.heads), hidden};
      });
}

InferredBackbone infer_mlla(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "MLLA");
  return inferred_backbone<MllaImpl>(shapes, infer_mlla_arch(shapes, input.meta, input.assumed), mlla_memory);
}

}  // namespace

// LeapLabTHU/MLLA cfgs/mlla_{t,s,b}.yaml (MODEL.NAME) with mlla.py's defaults (mlp_ratio 4, 224 px).
const std::vector<ReleasedArch>& mlla_released() {
  static const std::vector<ReleasedArch> table = {
      {"mlla_tiny", R"({"embed_dim":64,"depths":[2,4,8,4],"num_heads":[2,4,8,16],"img_size":224})"},
      {"mlla_small", R"({"embed_dim":64,"depths":[3,6,21,6],"num_heads":[2,4,8,16],"img_size":224})"},
      {"mlla_base", R"({"embed_dim":96,"depths":[3,6,21,6],"num_heads":[3,6,12,24],"img_size":224})"},
  };
  return table;
}

const BackboneFamily& mlla_family() {
  static const BackboneFamily family{"mlla",
                                     "MLLA",
                                     looks_like_mlla,
                                     infer_mlla,
                                     {},
                                     mlla_released(),
                                     {},
                                     {{{"MODEL", "MLLA", "NUM_HEADS"}, "num_heads"}}};
  return family;
}

}  // namespace attnscope
