#include "models/arch_limits.h"

#include <cmath>
#include <cstdio>

#include "core/checkpoint.h"
#include "core/excerpt.h"

namespace attnscope {

namespace {

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / double(1 << 30));
  return text;
}

}  // namespace

void check_dimension(const std::string& family, const ArchDimension& d) {
  if (d.value < d.range.min || d.value > d.range.max)
    throw CheckpointError("the " + family + "'s " + d.name + " read from '" + excerpt(d.source) + "' is " +
                          std::to_string(d.value) + ", outside " + std::to_string(d.range.min) + ".." +
                          std::to_string(d.range.max) + ": the checkpoint is damaged or not a model attnscope runs");
}

void check_arch_limits(const ArchEstimate& estimate) {
  for (const ArchDimension& d : estimate.dimensions) check_dimension(estimate.family, d);
  if (!(estimate.total_bytes() <= kMaxModelBytes))
    throw CheckpointError("the " + estimate.family + " these shapes describe would need about " +
                          gigabytes(estimate.total_bytes()) + " (parameters " + gigabytes(estimate.parameter_bytes) +
                          ", one forward pass " + gigabytes(estimate.forward_bytes) + "), more than the " +
                          gigabytes(kMaxModelBytes) + " attnscope allows a model");
}

ArchEstimate vit_arch_estimate(const VitArch& arch) {
  ArchEstimate estimate;
  estimate.family = "ViT";
  auto add = [&](const std::string& name, const std::string& source, int64_t value, SizeRange range) {
    estimate.dimensions.push_back({name, source, value, range});
  };
  // Sizes a ViT may lack: 0 says it has none.
  auto or_none = [](SizeRange range) { return SizeRange{0, range.max}; };
  add("width", "patch_embed.proj.weight", arch.embed_dim, kWidthRange);
  add("input channel count", "patch_embed.proj.weight", arch.in_chans, kRgbRange);
  add("patch size", "patch_embed.proj.weight", arch.patch_size, kPatchRange);
  add("depth", "blocks.N", arch.depth, kDepthRange);
  add("head count", "the metadata, --arch heads or the attention parameters", arch.heads, kHeadRange);
  add("position grid height", "pos_embed", arch.pos_grid_h, kGridRange);
  add("position grid width", "pos_embed", arch.pos_grid_w, kGridRange);
  add("class count", "head.weight", arch.num_classes, kClassRange);
  add("register token count", "reg_token", arch.register_tokens, or_none(kGridRange));
  if (arch.pool == GlobalPool::AttentionPool) {
    add("attention-pool head count", "attn_pool_num_heads", arch.attn_pool.heads, kHeadRange);
    add("attention-pool MLP hidden size", "attn_pool.mlp.fc1.weight", arch.attn_pool.mlp_hidden, kHiddenRange);
  }
  for (size_t i = 0; i < arch.blocks.size(); ++i) {
    const BlockArch& block = arch.blocks[i];
    const std::string prefix = "blocks." + std::to_string(i) + ".";
    add("MLP hidden size", prefix + (block.gate == MlpGate::Separate ? "mlp.fc1_x.weight" : "mlp.fc1.weight"),
        block.mlp_hidden, kHiddenRange);
    add("anchor count", prefix + "attn.dist_anchor_B.weight", block.attention.anchors, SizeRange{0, 65536});
    add("depthwise kernel size", prefix + "attn.dwc.weight", block.attention.dwc_kernel, or_none(kKernelRange));
    add("positional encoding length", prefix + "attn.positional_encoding", block.attention.positional_encoding_tokens,
        or_none(kEncodingRange));
  }

  for (size_t i = 0; i < arch.class_blocks.size(); ++i)
    add("MLP hidden size", "blocks_token_only." + std::to_string(i) + ".mlp.fc1.weight",
        arch.class_blocks[i].mlp_hidden, kHiddenRange);

  // Counted in doubles: no product of these can overflow, and a rough figure is all a bound needs.
  const double width = arch.embed_dim,
               tokens = double(arch.prefix_tokens()) + double(arch.pos_grid_h) * arch.pos_grid_w;
  double parameters = width * arch.in_chans * arch.patch_size * arch.patch_size + tokens * width;
  double widest = width;
  for (const BlockArch& block : arch.blocks) {
    const AttentionArch& attention = block.attention;
    const double mlp_inputs = block.gate == MlpGate::None ? 1 : 2;  // a gated MLP has two input projections
    parameters +=
        4 * width * width + (1 + mlp_inputs) * width * block.mlp_hidden + 12 * width;  // qkv, proj, MLP, norms
    parameters += double(attention.anchors) * width + double(attention.dwc_kernel) * attention.dwc_kernel * width +
                  double(attention.positional_encoding_tokens) * width;
    if (block.local_concentration) parameters += 2 * 49 * width;
    widest = std::max(widest, double(block.mlp_hidden));
  }
  for (const ClassAttentionArch& block : arch.class_blocks)
    parameters += 4 * width * width + 2 * width * block.mlp_hidden + 8 * width;
  const double heads_of_classes = arch.dist_token && arch.dist_head ? 2 : 1;
  parameters += heads_of_classes * double(arch.num_classes) * (width + 1) + (arch.pooler ? width * width : 0);
  if (arch.pool == GlobalPool::AttentionPool) parameters += 4 * width * width + 2 * width * arch.attn_pool.mlp_hidden;
  estimate.parameter_bytes = 4 * parameters;
  // Captures keep about six [T, C] tensors per block; one block's MLP activations and every head's
  // T x T matrix of one layer exist at a time.
  const double heads = std::max(arch.heads, 1);
  estimate.forward_bytes =
      4 * (6 * tokens * width * std::max(arch.depth, 1) + tokens * widest + 2 * heads * tokens * tokens);
  return estimate;
}

void StagedMemory::add_block(const Block& block) {
  Stage& stage = stages_.back();
  parameters_ += block.parameters;
  stage.blocks += 1;
  stage.heads = std::max(stage.heads, block.heads);
  stage.widest = std::max(stage.widest, block.widest);
}

double StagedMemory::forward_bytes() const {
  double floats = 0;
  for (const Stage& stage : stages_)
    floats += 6 * stage.tokens * stage.width * stage.blocks + stage.tokens * stage.widest +
              2 * stage.heads * stage.tokens * stage.tokens;
  return 4 * floats;
}

}  // namespace attnscope
