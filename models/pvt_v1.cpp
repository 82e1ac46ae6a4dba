#include "models/pvt_v1.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/arch_config.h"
#include "models/checkpoint_keys.h"
#include "models/cpu_threads.h"
#include "models/model_families.h"

namespace attnscope {

namespace F = torch::nn::functional;

namespace {

// The grids halve by stride-2 convolutions after the stem: sides multiples of patch << (stages - 1)
// keep every cell.
StagedDesign pvt_v1_design(const PvtV1Arch& arch) {
  const int multiple = arch.patch_size << (arch.stages.size() - 1);
  StagedDesign design =
      StagedDesign::hierarchical(arch, {"block", ".", 1}, HookPoint::Format::Tokens, arch.patch_size, multiple);
  design.min_side = multiple;
  design.too_small = [multiple](int64_t, int64_t) {
    return "input must be at least " + std::to_string(multiple) + "x" + std::to_string(multiple) + " pixels";
  };
  design.window.text = "PVT's keys are a reduced grid (spatial reduction), not windows";
  return design;
}

}  // namespace

PvtV1Impl::PvtV1Impl(const PvtV1Arch& arch) : StagedBackbone(pvt_v1_design(arch)), arch_(arch) {
  int in_dim = arch.in_chans;
  for (size_t s = 0; s < arch.stages.size(); ++s) {
    const PvtStageArch& stage = arch.stages[s];
    const std::string number = std::to_string(s + 1);
    const int kernel = s == 0 ? arch.patch_size : 2;
    patch_embeds.push_back(register_module(
        "patch_embed" + number, OverlapPatchEmbed(in_dim, stage.dim, kernel, kernel, arch.embed_eps, /*padding=*/0)));
    const int64_t side = arch.position_sides[s];
    pos_embeds.push_back(register_parameter("pos_embed" + number, torch::zeros({1, side * side, int64_t(stage.dim)})));
    blocks.push_back(register_module("block" + number, torch::nn::ModuleList()));
    for (const auto& block : stage.blocks)
      blocks.back()->push_back(PvtBlock(stage.dim, block, false, arch.block_eps, arch.embed_eps));
    in_dim = stage.dim;
  }
  if (arch.unused_norm)
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({in_dim}).eps(arch.block_eps)));
  if (arch.num_classes > 0) head = register_module("head", torch::nn::Linear(in_dim, arch.num_classes));
}

std::string PvtV1Impl::family() const {
  std::string name = "pvt-v1";
  for (const auto& stage : arch_.stages)
    for (const auto& block : stage.blocks)
      if (block.native == NativeAttention::Agent)
        name = "agent-pvt";
      else if (block.native == NativeAttention::InLine)
        name = "inline-pvt";
      else if (block.native == NativeAttention::Pola)
        name = "pola-pvt";
  return name;
}

nlohmann::json PvtV1Impl::describe_architecture() const {
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    nlohmann::json blocks_json = nlohmann::json::array();
    for (const auto& block : arch_.stages[s].blocks) {
      nlohmann::json b{{"native_attention", to_string(block.native)},
                       {"heads", block.heads},
                       {"sr_ratio", block.sr_ratio},
                       {"mlp_hidden", block.mlp_hidden}};
      if (block.native == NativeAttention::Agent) {
        b["agents"] = block.agents;
        b["agent_bias_grid"] = block.agent_side;
      }
      if (block.native == NativeAttention::Pola) {
        b["dwc_kernel"] = block.dwc_kernel;
        b["positional_encoding_tokens"] = block.encoding_tokens;
      }
      blocks_json.push_back(b);
    }
    stages.push_back(
        {{"dim", arch_.stages[s].dim}, {"position_grid", arch_.position_sides[s]}, {"blocks", blocks_json}});
  }
  return {{"source_layout", "authors"},
          {"patch_size", arch_.patch_size},
          {"attn_type", arch_.attn_type},
          {"unused_norm", arch_.unused_norm},
          {"stages", stages}};
}

std::vector<std::string> PvtV1Impl::summary_lines() const {
  std::vector<std::string> lines{
      "patch         " + std::to_string(arch_.patch_size) + ", " + std::to_string(arch_.stages.size()) + " stages, " +
      std::to_string(attention_layers()) + " attention blocks, attn_type " + arch_.attn_type};
  int grid = arch_.native_height / arch_.patch_size, layer = 0;
  for (size_t s = 0; s < arch_.stages.size(); ++s) {
    const PvtStageArch& stage = arch_.stages[s];
    if (s > 0) grid /= 2;
    const PvtBlockArch& first = stage.blocks.front();
    const int keys = grid / std::max(1, first.sr_ratio);
    lines.push_back("stage " + std::to_string(s) + "       layers " + std::to_string(layer) + ".." +
                    std::to_string(layer + int(stage.blocks.size()) - 1) + ": " + to_string(first.native) +
                    (first.agents > 0 ? " A" + std::to_string(first.agents) : "") + ", dim " +
                    std::to_string(stage.dim) + ", " + std::to_string(first.heads) + " heads, queries " +
                    std::to_string(grid) + "x" + std::to_string(grid) + ", keys " + std::to_string(keys) + "x" +
                    std::to_string(keys) + " (at the native input)");
    layer += int(stage.blocks.size());
  }
  if (arch_.unused_norm) lines.push_back("note          `norm` is stored but pola_pvt's forward does not apply it");
  return lines;
}

StageTokens PvtV1Impl::enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) {
  OverlapPatchEmbed& embedding = patch_embeds[size_t(stage)];
  torch::Tensor features;
  {
    ScopedThreads all_cores(configured_threads());
    features = embedding->proj(
        stage == 0
            ? pass.images
            : previous.x.view({previous.x.size(0), previous.layout.grid_h, previous.layout.grid_w, previous.x.size(2)})
                  .permute({0, 3, 1, 2}));
  }
  const int grid_h = int(features.size(2)), grid_w = int(features.size(3));
  auto x = embedding->norm(features.flatten(2).transpose(1, 2));
  // _get_pos_embed: the stored grid, bilinearly resized (align_corners=False) to another.
  torch::Tensor position = pos_embeds[size_t(stage)];
  const int64_t side = arch_.position_sides[size_t(stage)];
  if (side != grid_h || side != grid_w)
    position = F::interpolate(position.reshape({1, side, side, -1}).permute({0, 3, 1, 2}),
                              F::InterpolateFuncOptions()
                                  .size(std::vector<int64_t>{grid_h, grid_w})
                                  .mode(torch::kBilinear)
                                  .align_corners(false))
                   .reshape({1, -1, int64_t(grid_h) * grid_w})
                   .permute({0, 2, 1});
  return {x + position, stage_layout(stage, grid_h, grid_w)};
}

torch::Tensor PvtV1Impl::run_block(const BlockSite& site, const torch::Tensor& input, const StagedPass& pass) {
  auto& block = *blocks[size_t(site.stage)][size_t(site.block)]->as<PvtBlockImpl>();
  const int height = site.layout.grid_h, width = site.layout.grid_w;
  AttentionCapture* capture = site.capture;
  TokenLayout key_layout = site.layout;
  torch::Tensor x, normed;
  if (pass.row_chunked() && !block.attn->q.is_empty()) {
    x = block.forward_by_row_chunks(input, height, width, pass.settings, capture, key_layout, normed);
  } else {  // and PolaFormer's gated blocks
    normed = block.norm1(input);
    pass.hook(site.name + ".norm1", site.layout, normed);
    x = input + block.attn(normed, height, width, pass.settings, capture, key_layout);
    x = x + block.mlp(block.norm2(x), height, width);
    pass.hook(site.name, site.layout, x);
  }
  if (capture) {
    key_layout.patch_size = site.layout.patch_size * std::max(1, height / std::max(1, key_layout.grid_h));
    capture->key_layout = key_layout;
    capture->normed_input = normed;
    capture->placement.access =
        arch_.stages[size_t(site.stage)].blocks[size_t(site.block)].sr_ratio > 1 ? "spatial-reduction" : "global";
  }
  return x;
}

torch::Tensor PvtV1Impl::classify(const StageTokens& tokens, const StagedPass&) {
  auto pooled = tokens.x.mean(1);  // x.mean(dim=1), no norm
  return head.is_empty() ? pooled : head(pooled);
}

// ---- checkpoint ---------------------------------------------------------------------------------

namespace {

bool looks_like_pvt_v1(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("patch_embed1.proj.weight") && checkpoint.tensors.count("pos_embed1") &&
         checkpoint.tensors.count("block1.0.norm1.weight");
}

// The released heads of each family's four stages, for softmax stages no key shows.
std::vector<int> released_heads(NativeAttention successor) {
  if (successor == NativeAttention::InLine) return {2, 4, 10, 16};
  return {1, 2, 5, 8};
}

PvtV1Arch infer_pvt_v1_arch(ShapeReader& shapes, const nlohmann::json& meta, std::vector<ArchAssumption>& assumed) {
  PvtV1Arch arch;
  const std::string stem = "patch_embed1.proj.weight";
  arch.in_chans = shapes.size(stem, 4, 1, "input channel count", kRgbRange);
  arch.patch_size = shapes.size(stem, 4, 2, "patch size", kPatchRange);
  int in_dim = arch.in_chans;
  NativeAttention successor = NativeAttention::Softmax;
  std::vector<size_t> heads_unknown;
  for (int s = 0; shapes.has("patch_embed" + std::to_string(s + 1) + ".proj.weight"); ++s) {
    shapes.bounded("stage count", "patch_embedS", s + 1, kStageRange);
    const std::string number = std::to_string(s + 1), embed = "patch_embed" + number + ".proj.weight";
    PvtStageArch stage;
    stage.dim = shapes.size(embed, 4, 0, "width", kWidthRange);
    const auto& kernel = shapes.tensor(embed, 4);
    const int64_t expected_kernel = s == 0 ? arch.patch_size : 2;
    if (kernel.size(1) != in_dim || kernel.size(2) != expected_kernel || kernel.size(3) != expected_kernel)
      throw shapes.error(embed, "is not PVT's patch embedding [C, " + std::to_string(in_dim) + ", " +
                                    std::to_string(expected_kernel) + ", " + std::to_string(expected_kernel) + "]");
    const std::string position = "pos_embed" + number;
    const int tokens = shapes.size(position, 3, 1, "position grid", kEncodingRange);
    const int side = int(std::lround(std::sqrt(double(tokens))));
    if (side * side != tokens || shapes.tensor(position, 3).size(2) != stage.dim)
      throw shapes.error(position, "is not [1, side^2, " + std::to_string(stage.dim) + "]");
    arch.position_sides.push_back(side);
    for (int b = 0; shapes.has("block" + number + "." + std::to_string(b) + ".norm1.weight"); ++b) {
      const std::string prefix = "block" + number + "." + std::to_string(b) + ".", attn = prefix + "attn.";
      PvtBlockArch block;
      block.mlp_dwconv = false;
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      if (shapes.has(attn + "sr.weight"))
        block.sr_ratio = shapes.size(attn + "sr.weight", 4, 2, "sr ratio", kGridRange);
      if (shapes.has(attn + "an_bias")) {
        const AgentShapes agent = read_agent_attention(shapes, attn, stage.dim);
        block.native = NativeAttention::Agent;
        block.heads = agent.heads;
        block.agents = agent.agents;
        block.agent_side = agent.side;
        if (agent.side != side || block.sr_ratio != 1)
          throw shapes.error(attn + "ah_bias",
                             "is for a " + std::to_string(agent.side) + "x" + std::to_string(agent.side) +
                                 " key grid on a stage of " + std::to_string(side) + "x" + std::to_string(side) +
                                 " with sr " + std::to_string(block.sr_ratio) +
                                 ": agent blocks whose keys are reduced (agent_sr_ratios above 1) are not read "
                                 "(no released Agent-PVT has them)");
      } else if (shapes.has(attn + "residual.0.weight")) {
        block.native = NativeAttention::InLine;
        block.heads = read_inline_residual(shapes, attn, stage.dim);
        if (block.sr_ratio != 1)
          throw shapes.error(attn + "sr.weight",
                             "reduces InLine's keys, which inline_pvt.py cannot (it reshapes k "
                             "to every token): not an InLine-PVT block");
      } else if (shapes.has(attn + "qg.weight")) {
        const FocusedShapes focused = read_focused_attention(shapes, attn, stage.dim);
        block.native = NativeAttention::Pola;
        block.heads = focused.heads;
        block.dwc_kernel = focused.dwc_kernel;
        block.encoding_tokens = focused.encoding_tokens;
        if (shapes.tensor(attn + "power", 4).sizes() != c10::IntArrayRef({1, block.heads, 1, stage.dim / block.heads}))
          throw shapes.error(attn + "power", "is not [1, heads, 1, head width] for the " + std::to_string(block.heads) +
                                                 " heads its dwc gives");
        if (shapes.tensor(attn + "qg.weight", 2).sizes() != c10::IntArrayRef({2 * stage.dim, stage.dim}))
          throw shapes.error(attn + "qg.weight",
                             "is not [2C, C] (q and the gate) for the width " + std::to_string(stage.dim));
        shapes.tensor(attn + "scale", 3);
      } else {
        shapes.tensor(attn + "q.weight", 2);  // spatial-reduction softmax: heads from the config
        heads_unknown.push_back(size_t(s));
      }
      if (block.native != NativeAttention::Softmax) {
        if (successor != NativeAttention::Softmax && successor != block.native)
          throw CheckpointError("a PVT mixing " + to_string(successor) + " and " + to_string(block.native) +
                                " blocks: no released model does");
        successor = block.native;
      }
      block.qkv_bias = shapes.has(attn + (block.native == NativeAttention::Pola ? "qg.bias" : "q.bias"));
      stage.blocks.push_back(block);
    }
    if (stage.blocks.empty())
      throw CheckpointError("stage " + std::to_string(s) + " has no blocks (missing 'block" + number +
                            ".0.norm1.weight')");
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (arch.stages.empty()) throw CheckpointError("no PVT stage found (missing 'patch_embed1.proj.weight')");
  arch.unused_norm = shapes.has("norm.weight");
  if (shapes.has("head.weight")) arch.num_classes = shapes.size("head.weight", 2, 0, "class count", kClassRange);

  // Heads of softmax stages: the config, else the released models' (listed as assumed).
  const std::vector<int> given = stage_counts(meta, "heads", arch.stages.size());
  const std::vector<int> released = released_heads(successor);
  std::vector<int> heads_used;
  bool heads_assumed = false;
  for (size_t s = 0; s < arch.stages.size(); ++s) {
    for (auto& block : arch.stages[s].blocks) {
      if (block.native == NativeAttention::Softmax) {
        const bool from_config = !given.empty();
        if (!from_config) heads_assumed = true;
        block.heads = from_config                             ? given[s]
                      : arch.stages.size() == released.size() ? released[s]
                                                              : std::max(1, arch.stages[s].dim / 64);
      } else if (!given.empty() && given[s] != block.heads) {
        throw CheckpointError("the config gives stage " + std::to_string(s) + " " + std::to_string(given[s]) +
                              " heads, the weights of its blocks have " + std::to_string(block.heads) +
                              ": the config is not this model's");
      }
      if (block.heads < 1 || arch.stages[s].dim % block.heads != 0)
        throw CheckpointError(std::to_string(block.heads) + " heads do not divide the width " +
                              std::to_string(arch.stages[s].dim) + " of stage " + std::to_string(s));
    }
    heads_used.push_back(arch.stages[s].blocks.front().heads);
  }
  if (heads_assumed && !heads_unknown.empty())
    assumed.push_back({"heads", heads_used,
                       "the released models' heads for the softmax stages; no key shows them (give the config, or "
                       "--arch heads=...)"});
  std::vector<int> weights_agents;
  for (const auto& stage : arch.stages) weights_agents.push_back(stage.blocks.front().agents);
  check_config_agent_counts(meta, weights_agents, [&](size_t s) {
    return shapes.file_key("block" + std::to_string(s + 1) + ".0.attn.an_bias");
  });
  const char* letters = attn_type_letters(successor);
  for (const auto& stage : arch.stages)
    arch.attn_type += stage.blocks.front().native == NativeAttention::Softmax ? letters[1] : letters[0];
  // The training input: the first stage's position grid.
  arch.native_height = arch.native_width = shapes.bounded(
      "native input size", "pos_embed1", int64_t(arch.position_sides.front()) * arch.patch_size, kInputRange);
  if (meta.contains("img_size") && meta["img_size"].is_number_integer() &&
      meta["img_size"].get<int>() != arch.native_height)
    throw CheckpointError("the config gives img_size " + std::to_string(meta["img_size"].get<int>()) +
                          ", but pos_embed1 holds a " + std::to_string(arch.position_sides.front()) + "x" +
                          std::to_string(arch.position_sides.front()) + " grid of " + std::to_string(arch.patch_size) +
                          "-px patches (" + std::to_string(arch.native_height) + " px)");
  return arch;
}

StagedMemory pvt_v1_memory(const PvtV1Arch& arch) {
  const double width = arch.stages.back().dim, classes = arch.num_classes, patch = arch.patch_size;
  double positions = 0;
  for (size_t s = 0; s < arch.stages.size(); ++s)
    positions += double(arch.position_sides[s]) * arch.position_sides[s] * arch.stages[s].dim;
  const double stem_and_head =
      patch * patch * arch.in_chans * arch.stages.front().dim + (classes + 3) * width + positions;
  return StagedMemory::halving(
      arch.stages, double(arch.native_height) / patch, 4, stem_and_head,
      [](const PvtStageArch& stage, const PvtBlockArch& block) {
        const double dim = stage.dim, reduction = block.sr_ratio > 1 ? block.sr_ratio : 0;
        const double hidden = block.mlp_hidden, heads = block.heads;
        double attention = double(block.encoding_tokens) * dim + double(block.dwc_kernel) * block.dwc_kernel * dim;
        if (block.native == NativeAttention::Agent)
          attention = 10 * dim + heads * block.agents * (2 * 49 + 4.0 * block.agent_side);
        else if (block.native == NativeAttention::InLine)
          attention = 10 * dim * dim / heads + 10 * dim;
        else if (block.native == NativeAttention::Pola)
          attention += dim * (dim + 3);
        return StagedMemory::Block{
            (4 + reduction * reduction) * dim * dim + (2 * dim + 2) * hidden + 10 * dim + attention, heads, hidden};
      });
}

InferredBackbone infer_pvt_v1(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "PVT (Agent, InLine, PolaFormer)");
  input.notes.push_back("PVT v1's layout (patch_embed{i}, pos_embed{i}, block{i}) as the successors' authors save it");
  return inferred_backbone<PvtV1Impl>(shapes, infer_pvt_v1_arch(shapes, input.meta, input.assumed), pvt_v1_memory);
}

}  // namespace

// The authors' factories (agent_pvt.py, inline_pvt.py, pola_pvt.py: patch 4, widths 64-128-320-512,
// MLP ratios 8-8-4-4, sr 8-4-2-1, LayerNorm eps 1e-6) with their cfgs' attention types and counts.
const std::vector<ReleasedArch>& pvt_v1_released() {
  static const std::vector<ReleasedArch> table = {
      {"agent_pvt_tiny",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[2,2,2,2],"num_heads":[1,2,5,8],"attn_type":"AAAA","agent_num":"9-16-49-49","img_size":224})"},
      {"inline_pvt_tiny",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[2,2,2,2],"num_heads":[2,4,10,16],"attn_type":"IIII","img_size":224})"},
      {"pola_pvt_tiny",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[2,2,2,2],"num_heads":[1,2,5,8],"attn_type":"LLLL","img_size":224})"},
      {"agent_pvt_small",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,6,3],"num_heads":[1,2,5,8],"attn_type":"AAAA","agent_num":"9-16-49-49","img_size":224})"},
      {"inline_pvt_small",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,6,3],"num_heads":[2,4,10,16],"attn_type":"IIII","img_size":224})"},
      {"pola_pvt_small",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,6,3],"num_heads":[1,2,5,8],"attn_type":"LLLL","img_size":224})"},
      {"agent_pvt_medium",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,18,3],"num_heads":[1,2,5,8],"attn_type":"AAAA","agent_num":"9-16-49-49","img_size":224})"},
      {"inline_pvt_medium",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,18,3],"num_heads":[2,4,10,16],"attn_type":"IIII","img_size":224})"},
      {"pola_pvt_medium",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,4,18,3],"num_heads":[1,2,5,8],"attn_type":"LLLL","img_size":224})"},
      {"agent_pvt_large",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,8,27,3],"num_heads":[1,2,5,8],"attn_type":"AAAA","agent_num":"9-16-49-49","img_size":224})"},
      {"inline_pvt_large",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,8,27,3],"num_heads":[2,4,10,16],"attn_type":"IIII","img_size":224})"},
      {"pola_pvt_large",
       R"({"embed_dims":[64,128,320,512],"mlp_ratios":[8,8,4,4],"sr_ratios":[8,4,2,1],"depths":[3,8,27,3],"num_heads":[1,2,5,8],"attn_type":"LLLL","img_size":224})"},
  };
  return table;
}

const BackboneFamily& pvt_v1_family() {
  static const BackboneFamily family{
      "pvt-v1",
      "Agent-PVT, InLine-PVT, PolaFormer-PVT (PVT v1's layout)",
      looks_like_pvt_v1,
      infer_pvt_v1,
      {},
      pvt_v1_released(),
      {{"attn_type", "attn_type", "", ArchKey::Text}, {"agents", "agent_num", "", ArchKey::Counts}},
      {{{"MODEL", "AGENT", "ATTN_TYPE"}, "attn_type"},
       {{"MODEL", "AGENT", "NUM"}, "agent_num"},
       {{"MODEL", "INLINE", "ATTN_TYPE"}, "attn_type"},
       {{"MODEL", "LA", "ATTN_TYPE"}, "attn_type"}}};
  return family;
}

}  // namespace attnscope
