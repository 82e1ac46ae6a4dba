#include "models/vit.h"

#include "core/excerpt.h"

#include "models/checkpoint_keys.h"
#include "models/cpu_threads.h"
#include "models/forward_progress.h"
#include "models/sparse_autoencoder.h"
#include "models/token_linear.h"

#include <map>
#include <nlohmann/json.hpp>

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

StagedDesign vit_design(const VitArch& arch) {
  StagedDesign design;
  design.stages = {{arch.embed_dim, arch.patch_size, arch.depth}};
  design.naming = {"", "blocks."};
  design.block_points = {"norm1", "norm2"};
  if (arch.final_norm) design.named_points = {{"norm", "norm"}};
  design.format = HookPoint::Format::Tokens;
  design.in_chans = arch.in_chans;
  design.num_classes = arch.num_classes;
  design.input = {arch.native_height(), arch.native_width(), arch.patch_size};
  design.window = kSwappedInWindows;
  return design;
}

}  // namespace

TokenLayout VitArch::layout_for(int height, int width) const {
  TokenLayout layout;
  layout.has_class_token = class_token;
  layout.has_dist_token = dist_token;
  layout.register_tokens = register_tokens;
  layout.patch_size = patch_size;
  layout.grid_h = height / patch_size;
  layout.grid_w = width / patch_size;
  return layout;
}

std::string VitArch::family() const {
  if (source_layout == CheckpointLayout::TorchScript) return to_string(source_layout);
  // CaiT: class-attention blocks after the blocks (talking heads in them are its own, not said).
  std::string name = !class_blocks.empty() ? "cait"
                     : dist_token          ? "deit-distilled"
                     : class_token         ? "vit-cls"
                                           : "vit-gap";
  if (register_tokens > 0) name += "-reg" + std::to_string(register_tokens);
  if (rope.enabled()) name += "-rope";
  if (!blocks.empty() && blocks.front().attention.relative_bias_grid_h > 0) name += "-relpos";  // BEiT
  if (!blocks.empty() && blocks.front().attention.talking_heads && class_blocks.empty()) name += "-talking-heads";
  if (pool == GlobalPool::AttentionPool) name += "-map";
  return name_with_layout(name, source_layout);
}

void to_json(nlohmann::json& j, const VitArch& arch) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& block : arch.blocks) {
    nlohmann::json b{{"native_attention", to_string(block.attention.native)},
                     {"mlp_hidden", block.mlp_hidden},
                     {"qkv_bias", block.attention.qkv_bias}};
    if (block.attention.dwc_kernel) b["dwc_kernel"] = block.attention.dwc_kernel;
    if (block.attention.positional_encoding_tokens)
      b["positional_encoding_tokens"] = block.attention.positional_encoding_tokens;
    if (block.attention.anchors) b["anchors"] = block.attention.anchors;
    if (block.layer_scale) b["layer_scale"] = true;
    if (block.local_concentration) b["local_concentration"] = true;
    if (block.activation != MlpActivation::Gelu) b["activation"] = to_string(block.activation);
    if (block.gate != MlpGate::None) b["mlp_gate"] = block.gate == MlpGate::Packed ? "packed" : "separate";
    if (block.mlp_norm) b["mlp_norm"] = true;
    if (block.attention.qkv_layout == QkvLayout::FusedQvBias) b["qkv"] = "qkv + q_bias, v_bias";
    if (block.attention.qkv_layout == QkvLayout::Separate) b["qkv"] = "q_proj, k_proj, v_proj";
    if (block.attention.qk_norm) b["qk_norm"] = true;
    if (block.attention.inner_norm) b["attn_norm"] = true;
    if (block.attention.relative_bias_grid_h > 0)
      b["relative_bias_grid"] = {block.attention.relative_bias_grid_h, block.attention.relative_bias_grid_w};
    if (block.attention.talking_heads) b["talking_heads"] = true;
    blocks.push_back(b);
  }
  nlohmann::json class_blocks = nlohmann::json::array();
  for (const auto& block : arch.class_blocks)
    class_blocks.push_back({{"mlp_hidden", block.mlp_hidden}, {"qkv_bias", block.qkv_bias}});
  j = nlohmann::json{{"family", arch.family()},
                     {"embed_dim", arch.embed_dim},
                     {"depth", arch.depth},
                     {"heads", arch.heads},
                     {"head_dim", arch.heads ? arch.embed_dim / arch.heads : 0},
                     {"patch_size", arch.patch_size},
                     {"native_input", {arch.native_height(), arch.native_width()}},
                     {"num_classes", arch.num_classes},
                     {"class_token", arch.class_token},
                     {"dist_token", arch.dist_token},
                     {"register_tokens", arch.register_tokens},
                     {"abs_pos_embed", arch.abs_pos_embed},
                     {"rope", arch.rope},
                     {"global_pool", to_string(arch.pool)},
                     {"pos_embed_prefix_tokens", arch.positioned_prefix_tokens()},
                     {"pos_interpolation",
                      {{"antialias", arch.pos_interpolation.antialias}, {"offset", arch.pos_interpolation.offset}}},
                     {"norm_pre", arch.norm_pre},
                     {"pooler", arch.pooler},
                     {"output", to_string(arch.output_kind)},
                     {"source_layout", to_string(arch.source_layout)},
                     {"final_norm", arch.final_norm},
                     {"fc_norm", arch.fc_norm},
                     {"layer_norm_eps", arch.layer_norm_eps},
                     {"blocks", blocks}};
  if (!arch.class_blocks.empty()) j["class_attention_blocks"] = class_blocks;
  if (arch.pool == GlobalPool::AttentionPool)
    j["attn_pool"] = {{"heads", arch.attn_pool.heads},
                      {"mlp_hidden", arch.attn_pool.mlp_hidden},
                      {"activation", to_string(arch.attn_pool.activation)},
                      {"include_prefix", arch.attn_pool.include_prefix}};
}

std::vector<std::string> VisionTransformerImpl::summary_lines() const {
  std::map<std::string, int> kinds;
  for (const auto& block : arch_.blocks) ++kinds[to_string(block.attention.native)];
  std::string attention;
  for (const auto& [kind, count] : kinds) attention += kind + " x" + std::to_string(count) + "  ";
  return {"width/depth   " + std::to_string(arch_.embed_dim) + " / " + std::to_string(arch_.depth),
          "heads         " + std::to_string(arch_.heads) + " x " + std::to_string(arch_.embed_dim / arch_.heads),
          "patch         " + std::to_string(arch_.patch_size) + " (" + std::to_string(arch_.pos_grid_h) + "x" +
              std::to_string(arch_.pos_grid_w) + " patches, " + std::to_string(arch_.prefix_tokens()) +
              " prefix tokens)",
          "attention     " + attention +
              (!arch_.blocks.empty() && arch_.blocks.front().attention.talking_heads
                   ? "(talking heads: proj_l mixes the heads' scores, proj_w their probabilities)"
                   : ""),
          "positions     " + std::string(arch_.abs_pos_embed ? "pos_embed" : "") +
              (arch_.abs_pos_embed && arch_.rope.enabled() ? " + " : "") +
              (arch_.rope.enabled() ? "rotary " + arch_.rope.describe() : "") +
              (!arch_.abs_pos_embed && !arch_.rope.enabled() ? "none" : ""),
          "features      " + to_string(arch_.pool) +
              (arch_.pool == GlobalPool::AttentionPool
                   ? " (attention-pool head, " + std::to_string(arch_.attn_pool.heads) + " heads)"
               : !arch_.class_blocks.empty()
                   ? " (the class token of " + std::to_string(arch_.class_blocks.size()) + " class-attention blocks)"
                   : "")};
}

VitArch plain_vit_arch(int embed_dim, int depth, int heads, int patch_size, int grid, int num_classes) {
  VitArch arch;
  arch.embed_dim = embed_dim;
  arch.depth = depth;
  arch.heads = heads;
  arch.patch_size = patch_size;
  arch.pos_grid_h = arch.pos_grid_w = grid;
  arch.num_classes = num_classes;
  for (int i = 0; i < depth; ++i) {
    BlockArch block;
    block.attention.dim = embed_dim;
    block.attention.heads = heads;
    block.mlp_hidden = 4 * embed_dim;
    arch.blocks.push_back(block);
  }
  return arch;
}

VisionTransformerImpl::VisionTransformerImpl(const VitArch& arch) : StagedBackbone(vit_design(arch)), arch_(arch) {
  const int dim = arch.embed_dim;
  patch_embed = register_module("patch_embed", PatchEmbed(arch.in_chans, dim, arch.patch_size, arch.patch_bias));
  if (arch.class_token || !arch.class_blocks.empty())
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, dim}));
  if (arch.dist_token) dist_token = register_parameter("dist_token", torch::zeros({1, 1, dim}));
  if (arch.register_tokens > 0)
    reg_token = register_parameter("reg_token", torch::zeros({1, arch.register_tokens, dim}));
  const int positions = arch.pos_grid_h * arch.pos_grid_w + arch.positioned_prefix_tokens();
  if (arch.abs_pos_embed) pos_embed = register_parameter("pos_embed", torch::zeros({1, positions, dim}));
  auto norm_options = torch::nn::LayerNormOptions({dim}).eps(arch.layer_norm_eps);
  if (arch.norm_pre) norm_pre = register_module("norm_pre", torch::nn::LayerNorm(norm_options));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (const auto& block : arch.blocks) blocks->push_back(Block(block, arch.layer_norm_eps));
  blocks_token_only = torch::nn::ModuleList();
  if (!arch.class_blocks.empty()) {
    register_module("blocks_token_only", blocks_token_only);
    const MlpActivation activation = arch.blocks.empty() ? MlpActivation::Gelu : arch.blocks.front().activation;
    for (const auto& block : arch.class_blocks)
      blocks_token_only->push_back(ClassAttentionBlock(dim, arch.heads, block, activation, arch.layer_norm_eps));
  }
  if (arch.final_norm) norm = register_module("norm", torch::nn::LayerNorm(norm_options));
  if (arch.fc_norm) fc_norm = register_module("fc_norm", torch::nn::LayerNorm(norm_options));
  if (arch.num_classes > 0) {
    auto head_options = torch::nn::LinearOptions(dim, arch.num_classes).bias(arch.head_bias);
    head = register_module("head", torch::nn::Linear(head_options));
    if (arch.dist_token && arch.dist_head) head_dist = register_module("head_dist", torch::nn::Linear(head_options));
  }
  if (arch.pooler) pooler = register_module("pooler", torch::nn::Sequential(torch::nn::Linear(dim, dim)));
  if (arch.pool == GlobalPool::AttentionPool)
    attn_pool = register_module("attn_pool", AttentionPool(dim, arch.attn_pool, arch.layer_norm_eps));
}

torch::Tensor VisionTransformerImpl::embed_tokens(const torch::Tensor& images, const TokenLayout& layout) {
  auto patches = patch_embed->proj(images).flatten(2).transpose(1, 2);  // [B, N, C]
  const int64_t batch = images.size(0);
  std::vector<torch::Tensor> prefix;
  if (arch_.class_token) prefix.push_back(cls_token.expand({batch, -1, -1}));
  if (dist_token.defined()) prefix.push_back(dist_token.expand({batch, -1, -1}));
  if (reg_token.defined()) prefix.push_back(reg_token.expand({batch, -1, -1}));
  if (!pos_embed.defined()) {  // positions enter every block's attention as rotations instead
    prefix.push_back(patches);
    auto x = torch::cat(prefix, 1);
    return norm_pre.is_empty() ? x : norm_pre(x);
  }
  const int64_t prefix_positions = arch_.positioned_prefix_tokens();
  auto patch_positions =
      resize_patch_positions(pos_embed.index({Slice(), Slice(prefix_positions)}), arch_.pos_grid_h, arch_.pos_grid_w,
                             layout.grid_h, layout.grid_w, arch_.pos_interpolation);
  // Prefix tokens past the positioned ones (timm's no_embed_class, DINOv2's registers) get none.
  std::vector<torch::Tensor> positions{pos_embed.index({Slice(), Slice(0, prefix_positions)})};
  if (const int64_t unpositioned = layout.prefix_tokens() - prefix_positions; unpositioned > 0)
    positions.push_back(torch::zeros({1, unpositioned, patches.size(2)}, patches.options()));
  positions.push_back(patch_positions);
  prefix.push_back(patches);
  auto x = torch::cat(prefix, 1) + torch::cat(positions, 1);
  return norm_pre.is_empty() ? x : norm_pre(x);
}

torch::Tensor VisionTransformerImpl::pool_and_classify(const torch::Tensor& tokens, const TokenLayout& layout,
                                                       const ForwardHook& hook,
                                                       std::vector<PoolAttention>* pool_attention) {
  const TokenLayout read_layout = readout_layout(layout);
  auto x = blocks_token_only->is_empty() ? tokens : attend_from_class_token(tokens, pool_attention);
  if (!norm.is_empty()) {
    x = norm(x);
    if (hook) hook({"norm", read_layout, HookPoint::Format::Tokens}, x);
  }
  auto pooled = pool(x, read_layout, pool_attention);
  if (pool_attention)
    for (PoolAttention& attention : *pool_attention) attention.probabilities = attention.probabilities.detach();
  if (!fc_norm.is_empty()) pooled = fc_norm(pooled);
  if (!pooler.is_empty()) return torch::tanh(pooler->forward(pooled));
  if (head.is_empty()) return pooled;
  if (!head_dist.is_empty()) return (head(pooled) + head_dist(x.select(1, 1))) / 2;
  return head(pooled);
}

TokenLayout VisionTransformerImpl::readout_layout(const TokenLayout& blocks_layout) const {
  TokenLayout layout = blocks_layout;
  if (!arch_.class_blocks.empty()) layout.has_class_token = true;
  return layout;
}

torch::Tensor VisionTransformerImpl::attend_from_class_token(const torch::Tensor& patches,
                                                             std::vector<PoolAttention>* probabilities) {
  auto cls = cls_token.expand({patches.size(0), -1, -1});
  for (size_t i = 0; i < blocks_token_only->size(); ++i) {
    torch::Tensor attention;
    cls = blocks_token_only[i]->as<ClassAttentionBlockImpl>()->forward(patches, cls,
                                                                       probabilities ? &attention : nullptr);
    if (probabilities) probabilities->push_back({"blocks_token_only." + std::to_string(i) + ".attn", attention});
  }
  return torch::cat({cls, patches}, 1);
}

torch::Tensor VisionTransformerImpl::pool(const torch::Tensor& normed, const TokenLayout& layout,
                                          std::vector<PoolAttention>* pool_probabilities) {
  switch (arch_.pool) {
    case GlobalPool::Token:
      break;
    case GlobalPool::Average:
      return normed.index({Slice(), Slice(layout.prefix_tokens())}).mean(1);
    case GlobalPool::AttentionPool: {
      torch::Tensor attention;
      auto pooled =
          attn_pool(arch_.attn_pool.include_prefix ? normed : normed.index({Slice(), Slice(layout.prefix_tokens())}),
                    pool_probabilities ? &attention : nullptr);
      if (pool_probabilities) pool_probabilities->push_back({"attn_pool", attention});
      return pooled;
    }
  }
  return normed.select(1, 0);
}

StageTokens VisionTransformerImpl::enter_stage(int, const StageTokens&, const StagedPass& pass) {
  const TokenLayout layout = arch_.layout_for(int(pass.images.size(2)), int(pass.images.size(3)));
  return {embed_tokens(pass.images, layout), layout};
}

torch::Tensor VisionTransformerImpl::run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) {
  std::function<void(const char*, torch::Tensor&)> block_hook;
  if (pass.options.hook)
    block_hook = [&pass, &site](const char* point, torch::Tensor& value) {
      pass.hook(*point ? site.name + "." + point : site.name, site.layout, value);
    };
  std::function<void(torch::Tensor&)> probabilities_hook;
  if (pass.options.attention_hook)
    probabilities_hook = [&pass, &site](torch::Tensor& probabilities) {
      pass.options.attention_hook({site.layer, site.name + ".attn", site.layout, site.layout}, probabilities);
    };
  return blocks[size_t(site.block)]->as<BlockImpl>()->forward(x, site.layout, pass.settings, site.capture, block_hook,
                                                              probabilities_hook);
}

StageTokens VisionTransformerImpl::embed(const torch::Tensor& images) {
  check_input(images);
  const TokenLayout layout = arch_.layout_for(int(images.size(2)), int(images.size(3)));
  return {embed_tokens(images, layout), layout};
}

namespace {

std::string edit_name(int layer, int head) { return std::to_string(layer) + "." + std::to_string(head); }

// Head replacements grouped by block, checked against the model, the resumed block and the input.
std::vector<std::vector<std::pair<int, torch::Tensor>>> heads_by_block(const StreamEdits& edits, int first, int depth,
                                                                       int heads, int64_t batch, int64_t tokens,
                                                                       int64_t head_dim) {
  std::vector<std::vector<std::pair<int, torch::Tensor>>> by_block(static_cast<size_t>(depth));
  for (const HeadReplacement& edit : edits.heads) {
    const std::string name = "head " + edit_name(edit.layer, edit.head);
    if (edit.layer < 0 || edit.layer >= depth)
      throw std::invalid_argument(name + ": layer " + std::to_string(edit.layer) + " is outside 0.." +
                                  std::to_string(depth - 1));
    if (edit.head < 0 || edit.head >= heads)
      throw std::invalid_argument(name + ": head " + std::to_string(edit.head) + " is outside 0.." +
                                  std::to_string(heads - 1) + " (the model has " + std::to_string(heads) +
                                  " heads a layer)");
    if (edit.layer < first)
      throw std::invalid_argument(name + " is before block " + std::to_string(first) +
                                  " where this forward resumes: resume at or before its layer");
    for (const auto& [head, z] : by_block[size_t(edit.layer)])
      if (head == edit.head) throw std::invalid_argument(name + " is listed twice");
    if (edit.z.defined()) {
      const auto& z = edit.z;
      const bool per_image = z.dim() == 3;
      if ((z.dim() != 2 && !per_image) || (per_image && z.size(0) != batch) || z.size(-2) != tokens ||
          z.size(-1) != head_dim)
        throw std::invalid_argument(
            name + ": its replacement z is " + shape_text(z.sizes()) + ", not [" + std::to_string(tokens) + ", " +
            std::to_string(head_dim) + "] (tokens, head width) or [" + std::to_string(batch) + ", " +
            std::to_string(tokens) + ", " + std::to_string(head_dim) + "]: a z from an input of another size?");
    }
    by_block[size_t(edit.layer)].emplace_back(edit.head, edit.z);
  }
  return by_block;
}

std::vector<std::vector<const ResidualReplacement*>> residuals_by_block(const StreamEdits& edits, int first, int depth,
                                                                        int64_t batch, int64_t tokens, int64_t width) {
  std::vector<std::vector<const ResidualReplacement*>> by_block(static_cast<size_t>(depth));
  for (const ResidualReplacement& edit : edits.residuals) {
    const std::string name =
        "the input of block " + std::to_string(edit.layer) + " at token " + std::to_string(edit.token);
    if (edit.layer < first || edit.layer >= depth)
      throw std::invalid_argument(name + ": the block is outside " + std::to_string(first) + ".." +
                                  std::to_string(depth - 1) + (first > 0 ? " (where this forward runs)" : ""));
    if (edit.token < 0 || edit.token >= tokens)
      throw std::invalid_argument(name + ": the token is outside 0.." + std::to_string(tokens - 1));
    for (const ResidualReplacement* other : by_block[size_t(edit.layer)])
      if (other->token == edit.token) throw std::invalid_argument(name + " is replaced twice");
    const auto& value = edit.value;
    if (!value.defined() || (value.dim() != 1 && value.dim() != 2) || value.size(-1) != width ||
        (value.dim() == 2 && value.size(0) != batch))
      throw std::invalid_argument(name + ": the replacement must be [" + std::to_string(width) + "] or [" +
                                  std::to_string(batch) + ", " + std::to_string(width) + "]");
    by_block[size_t(edit.layer)].push_back(&edit);
  }
  return by_block;
}

// Transforms grouped by block, checked against the model; those before block `first` acted on the
// residual the forward resumes from.
std::vector<std::vector<const StreamTransform*>> transforms_by_block(const StreamEdits& edits, int first, int depth) {
  std::vector<std::vector<const StreamTransform*>> by_block(static_cast<size_t>(depth));
  for (const StreamTransform& transform : edits.transforms) {
    if (transform.point.layer < 0 || transform.point.layer >= depth)
      throw std::invalid_argument(stream_point_name(transform.point) + ": the model has blocks 0.." +
                                  std::to_string(depth - 1));
    if (transform.point.layer >= first) by_block[size_t(transform.point.layer)].push_back(&transform);
  }
  return by_block;
}

torch::Tensor apply_transforms(const std::vector<const StreamTransform*>& transforms, StreamSite site,
                               torch::Tensor value) {
  for (const StreamTransform* transform : transforms)
    if (transform->point.site == site) value = transform->apply(value);
  return value;
}

bool any_inside_block(const std::vector<const StreamTransform*>& transforms) {
  for (const StreamTransform* transform : transforms)
    if (transform->point.inside_block()) return true;
  return false;
}

// sqrt(biased variance + eps) over the last dimension: the scale a LayerNorm divides by.
torch::Tensor layer_norm_scale(const torch::Tensor& x, double eps) {
  return (x - x.mean(-1, /*keepdim=*/true)).pow(2).mean(-1).add(eps).sqrt();
}

}  // namespace

ForwardOutput VisionTransformerImpl::forward_from_block(int first, const torch::Tensor& resid_pre,
                                                        const TokenLayout& layout, const AttentionSettings& settings,
                                                        const ForwardOptions& options, const StreamEdits& edits,
                                                        const StreamRecording& recording,
                                                        ResidualStreamRecord* record) {
  const int depth = arch_.depth;
  const int64_t width = arch_.embed_dim, tokens = layout.total_tokens();
  if (first < 0 || first > depth)
    throw std::invalid_argument("block " + std::to_string(first) + " is outside 0.." + std::to_string(depth));
  if (resid_pre.dim() != 3 || resid_pre.size(1) != tokens || resid_pre.size(2) != width)
    throw std::invalid_argument("the residual to resume from is " + shape_text(resid_pre.sizes()) + ", not [B, " +
                                std::to_string(tokens) + ", " + std::to_string(width) + "]");
  if (recording.any_block() && !record) throw std::logic_error("a recording without a record to fill");
  const int64_t batch = resid_pre.size(0);
  const StreamEdits all_edits = with_session_edits(edits, settings, first, tokens);
  const auto heads_at =
      heads_by_block(all_edits, first, depth, arch_.heads, batch, tokens, width / std::max(1, arch_.heads));
  const auto residuals_at = residuals_by_block(all_edits, first, depth, batch, tokens, width);
  const auto transforms_at = transforms_by_block(all_edits, first, depth);
  torch::Tensor kept_tokens;
  if (record) {
    for (int64_t token : recording.tokens)
      if (token < 0 || token >= tokens)
        throw std::invalid_argument("recorded token " + std::to_string(token) + " is outside 0.." +
                                    std::to_string(tokens - 1));
    *record = ResidualStreamRecord();
    record->first_block = first;
    record->tokens = recording.tokens;
    for (auto* per_block : {&record->resid_pre, &record->attn_out, &record->local_out, &record->mlp_out, &record->z})
      per_block->resize(size_t(depth));
    if (!recording.tokens.empty())
      kept_tokens = torch::tensor(recording.tokens, torch::TensorOptions().dtype(torch::kLong)).to(resid_pre.device());
  }
  auto keep = [&](const torch::Tensor& t, int64_t token_dim) {
    return kept_tokens.defined() ? t.index_select(token_dim, kept_tokens) : t;
  };

  ScopedThreads small_ops(cpu_inference(resid_pre) ? 1 : configured_threads());
  ForwardOutput output;
  if (options.capture) output.layers.reserve(size_t(depth - first));
  torch::Tensor x = resid_pre;
  for (int b = first; b < depth; ++b) {
    if (options.cancelled && options.cancelled()) throw Cancelled();
    block_started(b, depth, x.size(1));
    if (!residuals_at[size_t(b)].empty()) {
      x = x.clone();
      for (const ResidualReplacement* edit : residuals_at[size_t(b)])
        x.select(1, edit->token).copy_(edit->value.to(x.device(), x.dtype()).expand({batch, width}));
    }
    // Recorded before the transforms at the block's input, as a forward resumed here takes it.
    if (recording.resid_pre) record->resid_pre[size_t(b)] = x;
    const auto& transforms = transforms_at[size_t(b)];
    x = apply_transforms(transforms, StreamSite::ResidPre, x);
    const std::string name = "blocks." + std::to_string(b);
    AttentionCapture* capture = nullptr;
    if (options.capture) {
      capture = &output.layers.emplace_back();
      capture->placement.name = name;
      capture->placement.block = b;
      capture->layout = capture->key_layout = layout;
    }
    std::function<void(const char*, torch::Tensor&)> block_hook;
    if (options.hook)
      block_hook = [&](const char* point, torch::Tensor& value) {
        options.hook({*point ? name + "." + point : name, layout, HookPoint::Format::Tokens}, value);
      };
    std::function<void(torch::Tensor&)> probabilities_hook;
    if (options.attention_hook)
      probabilities_hook = [&](torch::Tensor& probabilities) {
        options.attention_hook({b, name + ".attn", layout, layout}, probabilities);
      };
    auto* block = blocks[size_t(b)]->as<BlockImpl>();
    if (heads_at[size_t(b)].empty() && !recording.per_block_streams() && !any_inside_block(transforms)) {
      x = block->forward(x, layout, settings, capture, block_hook, probabilities_hook);
      x = apply_transforms(transforms, StreamSite::ResidPost, x);
      continue;
    }
    BlockStreams streams;
    streams.heads.value_bias = block->value_bias();
    streams.heads.replacements = heads_at[size_t(b)];
    streams.heads.record = recording.z;
    streams.record_outputs = recording.components;
    streams.transforms = transforms;
    x = block->forward_streams(x, layout, settings, capture, streams, block_hook, probabilities_hook);
    x = apply_transforms(transforms, StreamSite::ResidPost, x);
    if (recording.components) {
      record->attn_out[size_t(b)] = keep(streams.attn_out, 1);
      if (streams.local_out.defined()) record->local_out[size_t(b)] = keep(streams.local_out, 1);
      record->mlp_out[size_t(b)] = keep(streams.mlp_out, 1);
    }
    if (recording.z) record->z[size_t(b)] = keep(streams.heads.z, 2);
  }
  if (record) {
    record->resid_final = x;
    if (!norm.is_empty()) record->final_scale = layer_norm_scale(x, arch_.layer_norm_eps);
    if (!fc_norm.is_empty()) {
      const torch::Tensor normed = norm.is_empty() ? x : norm(x);
      const torch::Tensor pooled = pool(normed, layout);
      record->pooled_scale = layer_norm_scale(pooled, arch_.layer_norm_eps);
    }
  }
  output.logits = pool_and_classify(x, layout, options.hook, options.capture ? &output.pool_attention : nullptr);
  output.layout = layout;
  return output;
}

StreamEdits VisionTransformerImpl::with_session_edits(const StreamEdits& edits, const AttentionSettings& settings,
                                                      int first, int64_t tokens) const {
  StreamEdits all = edits;
  if (settings.sae.intervenes()) all.transforms.push_back(sae_intervention(settings.sae, arch_.depth, arch_.embed_dim));
  const HeadAblationSetting& ablation = settings.ablation;
  if (ablation.empty()) return all;
  const HeadMeanOutputs* means = nullptr;
  if (ablation.kind == AblationKind::Mean) {
    if (ablation.images.empty())
      throw std::invalid_argument(
          "--ablation mean needs --ablation-images DIR: the images each head's output is "
          "averaged over");
    means = head_means_.get();
    if (!means || means->key != head_means_key(settings, tokens))
      throw std::invalid_argument("--ablation mean: the heads' means over " + ablation.images +
                                  " were not taken for this input size and attention (prepare_head_ablation)");
  }
  for (const HeadIndex& head : ablation.heads) {
    if (head.layer < 0 || head.layer >= arch_.depth)
      throw std::invalid_argument("--ablate " + head_name(head) + ": layer " + std::to_string(head.layer) +
                                  " is outside 0.." + std::to_string(arch_.depth - 1));
    if (head.head < 0 || head.head >= arch_.heads)
      throw std::invalid_argument("--ablate " + head_name(head) + ": head " + std::to_string(head.head) +
                                  " is outside 0.." + std::to_string(arch_.heads - 1) + " (the model has " +
                                  std::to_string(arch_.heads) + " heads a layer)");
    // Heads before `first` were ablated by the run that gave the residual resumed from; a head the
    // caller edits itself (patching) keeps the caller's replacement.
    if (head.layer < first) continue;
    bool edited = false;
    for (const HeadReplacement& edit : edits.heads)
      edited = edited || (edit.layer == head.layer && edit.head == head.head);
    if (edited) continue;
    all.heads.push_back({head.layer, head.head, means ? means->z[head.layer][head.head] : torch::Tensor()});
  }
  return all;
}

ForwardOutput VisionTransformerImpl::forward(const torch::Tensor& images, const AttentionSettings& settings,
                                             const ForwardOptions& options) {
  if (settings.ablation.empty() && !settings.sae.intervenes())
    return StagedBackbone::forward(images, settings, options);
  return forward_with_streams(images, settings, options, {}, {}, nullptr);
}

std::string head_means_key(const AttentionSettings& settings, int64_t tokens) {
  AttentionSettings unablated = settings;
  unablated.ablation = {};
  return settings.ablation.images + "|" + to_string(settings.variant) + "|" + knobs_key(unablated) + "|" +
         std::to_string(tokens);
}

ForwardOutput VisionTransformerImpl::forward_with_streams(const torch::Tensor& images,
                                                          const AttentionSettings& settings,
                                                          const ForwardOptions& options, const StreamEdits& edits,
                                                          const StreamRecording& recording,
                                                          ResidualStreamRecord* record) {
  ScopedThreads small_ops(cpu_inference(images) ? 1 : configured_threads());
  const StageTokens tokens = embed(images);
  return forward_from_block(0, tokens.x, tokens.layout, settings, options, edits, recording, record);
}

double record_bytes(const StreamRecording& recording, int64_t batch, int64_t tokens, int64_t blocks, int64_t width,
                    bool local_out) {
  const double kept = recording.tokens.empty() ? double(tokens) : double(recording.tokens.size());
  double per_block = 0;
  if (recording.resid_pre) per_block += double(tokens) * width;
  if (recording.components) per_block += (local_out ? 3.0 : 2.0) * kept * width;
  if (recording.z) per_block += kept * width;
  // float32, and the final residual and its scales.
  return 4.0 * double(batch) * (double(blocks) * per_block + double(tokens) * (width + 1));
}

torch::Tensor VisionTransformerImpl::classify(const StageTokens& tokens, const StagedPass& pass) {
  return pool_and_classify(tokens.x, tokens.layout, pass.options.hook, pass.pool_attention);
}

}  // namespace attnscope
