// FLatten-CSwin checkpoints (the authors' keys, no other layout): the architecture from key names
// and shapes, what the keys cannot show (heads of softmax blocks, stripe widths, the training size)
// from the file's attnscope_arch metadata or .arch.json sidecar, and the family's registry entry.
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/checkpoint_keys.h"
#include "models/cswin.h"
#include "models/model_families.h"

namespace attnscope {

namespace {

// The head width of every released FLatten-CSwin (64/2, 96/3 per stage): the guess for softmax
// blocks when the file says nothing about heads.
constexpr int kReleasedHeadDim = 32;

std::string cswin_block_prefix(int stage, int block) {
  return "stage" + std::to_string(stage + 1) + "." + std::to_string(block) + ".";
}

// The authors' attn_type per block: one letter per stage, the successor's (FLatten's L, Agent's A,
// InLine's I) or softmax's (S; Agent's B); an M stage has its first int(attn_type[stages:]) blocks
// the successor's and the rest softmax. True marks a successor block.
std::vector<std::vector<bool>> parse_attn_type(const std::string& attn_type, const std::vector<int>& depths) {
  const size_t stages = depths.size();
  if (attn_type.size() < stages)
    throw CheckpointError("arch metadata attn_type '" + attn_type.substr(0, 40) + "' has fewer letters than the " +
                          std::to_string(stages) + " stages");
  std::vector<std::vector<bool>> focused(stages);
  for (size_t s = 0; s < stages; ++s) {
    const char letter = attn_type[s];
    int first_focused = 0;
    if (letter == 'L' || letter == 'A' || letter == 'I') {
      first_focused = depths[s];
    } else if (letter == 'M') {
      const std::string count = attn_type.substr(stages);
      if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos || count.size() > 4)
        throw CheckpointError("arch metadata attn_type '" + attn_type.substr(0, 40) +
                              "': an M stage needs the count of its focused blocks after the letters");
      first_focused = std::stoi(count);
    } else if (letter != 'S' && letter != 'B') {
      throw CheckpointError("arch metadata attn_type '" + attn_type.substr(0, 40) + "': stage " + std::to_string(s) +
                            " is '" + std::string(1, letter) + "', not L, A, I (the successor's), S, B or M");
    }
    for (int b = 0; b < depths[s]; ++b) focused[s].push_back(b < first_focused);
  }
  return focused;
}

int cswin_square_side(const ShapeReader& shapes, const std::string& key, int64_t count) {
  const auto side = int64_t(std::llround(std::sqrt(double(count))));
  if (side <= 0 || side * side != count)
    throw shapes.error(key, "has " + std::to_string(count) + " tokens, not a square grid");
  return int(side);
}

// Each of a metadata list's sizes, bounded as `what`.
std::vector<int> bounded_list(ShapeReader& shapes, std::vector<int> values, const char* key, const std::string& what,
                              SizeRange range) {
  for (int value : values) shapes.bounded(what, std::string("arch metadata ") + key, value, range);
  return values;
}

bool looks_like_cswin(const Checkpoint& checkpoint) { return checkpoint.tensors.count("stage1_conv_embed.0.weight"); }

// The architecture from the keys; `meta` is the arch metadata (or null): heads, split_size,
// la_split_size, attn_type, focusing_factor, img_size. Throws CheckpointError naming the key that
// is missing, misshapen or beyond the bounds, or the metadata entry that contradicts the keys.
CSwinArch infer_cswin_arch(ShapeReader& shapes, const nlohmann::json& meta, std::vector<std::string>& notes,
                           std::vector<ArchAssumption>& assumed) {
  if (meta.is_object() && meta.contains("family") && meta["family"] != "flatten_cswin")
    throw CheckpointError("the keys are FLatten-CSwin's (stage1_conv_embed.*) but the arch metadata says family " +
                          meta["family"].dump().substr(0, 40));
  CSwinArch arch;
  const std::string stem_key = "stage1_conv_embed.0.weight";
  const auto& stem = shapes.tensor(stem_key, 4);
  if (stem.size(2) != 7 || stem.size(3) != 7)
    throw shapes.error(stem_key, "is not a 7x7 conv: not FLatten-CSwin's stem");
  arch.embed_dim = shapes.size(stem_key, 4, 0, "width", kWidthRange);
  arch.in_chans = shapes.size(stem_key, 4, 1, "input channel count", kRgbRange);
  if (shapes.has("head.weight")) arch.num_classes = shapes.size("head.weight", 2, 0, "class count", kClassRange);

  // Stages and blocks as the keys show them: width from qkv, branches from attns.1, kind from scale.
  std::vector<int> depths;
  int in_dim = arch.embed_dim, depth = 0;
  for (int s = 0; shapes.has(cswin_block_prefix(s, 0) + "norm1.weight"); ++s) {
    shapes.bounded("stage count", "stageS", s + 1, kStageRange);
    CSwinStageArch stage;
    stage.dim = shapes.size(cswin_block_prefix(s, 0) + "qkv.weight", 2, 1, "width", kWidthRange);
    if (s == 0 && stage.dim != arch.embed_dim)
      throw CheckpointError("tensor 'stage1.0.qkv.weight' reads width " + std::to_string(stage.dim) +
                            ", the stem gives " + std::to_string(arch.embed_dim));
    if (s > 0) {
      const std::string merge = "merge" + std::to_string(s) + ".conv.weight";
      const auto& conv = shapes.tensor(merge, 4);
      if (conv.size(0) != stage.dim || conv.size(1) != in_dim || conv.size(2) != 3 || conv.size(3) != 3)
        throw shapes.error(merge, "does not map width " + std::to_string(in_dim) + " to " + std::to_string(stage.dim) +
                                      " with a 3x3 conv");
    }
    for (int b = 0; shapes.has(cswin_block_prefix(s, b) + "norm1.weight"); ++b) {
      shapes.bounded("depth", "stageS.B", ++depth, kDepthRange);
      const std::string prefix = cswin_block_prefix(s, b);
      CSwinBlockArch block;
      const auto& qkv = shapes.tensor(prefix + "qkv.weight", 2);
      if (qkv.size(0) != 3 * stage.dim || qkv.size(1) != stage.dim)
        throw shapes.error(prefix + "qkv.weight", "is not [3C, C] for the stage width " + std::to_string(stage.dim));
      block.qkv_bias = shapes.has(prefix + "qkv.bias");
      block.mlp_hidden = shapes.size(prefix + "mlp.fc1.weight", 2, 0, "MLP hidden size", kHiddenRange);
      shapes.tensor(prefix + "attns.0.get_v.weight", 4);
      block.branches = shapes.has(prefix + "attns.1.get_v.weight") ? 2 : 1;
      if (shapes.has(prefix + "attns.0.an_bias") || shapes.has(prefix + "attns.0.residual.0.weight")) {
        // Agent-CSwin's and InLine-CSwin's blocks: one branch over the grid in every released model
        // (la_split_size is the grid); with two, inline_cswin.py's residual reshape fails.
        const bool agent = shapes.has(prefix + "attns.0.an_bias");
        if (block.branches == 2)
          throw CheckpointError("block '" + prefix + "' is " + (agent ? "an Agent" : "an InLine") +
                                " block with two stripe branches (la_split_size below the stage grid): no released "
                                "model has one, and inline_cswin.py cannot run it");
        if (agent) {
          const AgentShapes shapes_of_agent =
              read_agent_attention(shapes, prefix + "attns.0.", stage.dim, /*depthwise_conv=*/false);
          block.native = NativeAttention::Agent;
          block.heads = shapes_of_agent.heads;
          block.agents = shapes_of_agent.agents;
          block.agent_side = shapes_of_agent.side;
        } else {
          block.native = NativeAttention::InLine;
          block.heads = read_inline_residual(shapes, prefix + "attns.0.", stage.dim);
        }
      } else if (shapes.has(prefix + "attns.0.scale")) {
        block.native = NativeAttention::Focused;
        if (block.branches == 2)
          throw CheckpointError("block '" + prefix +
                                "' is focused with two stripe branches (la_split_size below the stage grid): the "
                                "authors' code cannot run it either (its DWC reshape fails)");
        const FocusedShapes focused = read_focused_attention(shapes, prefix + "attns.0.", stage.dim);
        block.dwc_kernel = focused.dwc_kernel;
        block.heads = focused.heads;
        block.encoding_side =
            cswin_square_side(shapes, prefix + "attns.0.positional_encoding", focused.encoding_tokens);
      }
      stage.blocks.push_back(block);
    }
    depths.push_back(int(stage.blocks.size()));
    in_dim = stage.dim;
    arch.stages.push_back(stage);
  }
  if (arch.stages.empty()) throw CheckpointError("no FLatten-CSwin stage found (missing 'stage1.0.norm1.weight')");
  const size_t stages = arch.stages.size();
  if (shapes.has("merge" + std::to_string(stages) + ".conv.weight"))
    throw CheckpointError("tensor 'merge" + std::to_string(stages) + ".conv.weight' merges into a stage " +
                          std::to_string(stages + 1) + " that has no blocks (missing 'stage" +
                          std::to_string(stages + 1) + ".0.norm1.weight')");

  // Heads: the metadata's, checked against what focused blocks' DWC shows; else the DWC's, else
  // the released models' head width.
  const std::vector<int> heads =
      bounded_list(shapes, stage_counts(meta, "heads", stages), "heads", "head count", kHeadRange);
  bool heads_assumed = false;  // a softmax block took the released head width
  for (size_t s = 0; s < stages; ++s)
    for (size_t b = 0; b < arch.stages[s].blocks.size(); ++b) {
      CSwinBlockArch& block = arch.stages[s].blocks[b];
      const int dim = arch.stages[s].dim;
      if (!heads.empty()) {
        if (block.native != NativeAttention::Softmax && block.heads != heads[s])
          throw CheckpointError("tensor '" + cswin_block_prefix(int(s), int(b)) + "attns.0." +
                                (block.native == NativeAttention::Focused ? "dwc.weight"
                                 : block.native == NativeAttention::Agent ? "an_bias"
                                                                          : "residual.0.weight") +
                                "' implies " + std::to_string(block.heads) + " heads, the arch metadata says " +
                                std::to_string(heads[s]));
        block.heads = heads[s];
      } else if (block.native == NativeAttention::Softmax) {
        block.heads = std::max(1, dim / kReleasedHeadDim);
        heads_assumed = true;
        if (dim % block.heads != 0 || (block.branches == 2 && block.heads % 2 != 0))
          throw unfit_default_error(
              "the weights do not show the heads of FLatten-CSwin's softmax blocks, and the released head width " +
                  std::to_string(kReleasedHeadDim) + " gives '" + cswin_block_prefix(int(s), int(b)) + "' (width " +
                  std::to_string(dim) + ") " + std::to_string(block.heads) + (block.heads == 1 ? " head" : " heads") +
                  (dim % block.heads != 0 ? ", which do not divide its width"
                                          : ", which cannot be shared between its 2 stripe branches"),
              "heads");
      }
      if (block.heads <= 0 || dim % block.heads != 0 || (block.branches == 2 && block.heads % 2 != 0))
        throw CheckpointError(std::to_string(block.heads) + " heads do not split the width " + std::to_string(dim) +
                              " of '" + cswin_block_prefix(int(s), int(b)) + "' into " +
                              std::to_string(block.branches) + " branch(es) of whole heads");
      const auto& get_v = shapes.tensor(cswin_block_prefix(int(s), int(b)) + "attns.0.get_v.weight", 4);
      if (get_v.size(0) != dim / block.branches)
        throw CheckpointError("tensor '" + cswin_block_prefix(int(s), int(b)) + "attns.0.get_v.weight' has " +
                              std::to_string(get_v.size(0)) + " channels, a branch of " +
                              std::to_string(block.branches) + " has " + std::to_string(dim / block.branches));
    }

  if (heads_assumed) {
    std::vector<int> per_stage;
    for (const auto& stage : arch.stages) per_stage.push_back(stage.blocks.back().heads);
    assumed.push_back({"heads", per_stage, "width / 32, the released models' head width, for softmax blocks"});
  }

  // The training input: the metadata's, else the grid a focused block's encoding was trained on.
  int native = 0;
  if (meta.contains("img_size")) {
    native =
        bounded_list(shapes, stage_counts(meta, "img_size", 1), "img_size", "native input size", kInputRange).front();
  }
  for (size_t s = 0; native <= 0 && s < stages; ++s)
    for (const auto& block : arch.stages[s].blocks)
      if ((block.native == NativeAttention::Focused || block.native == NativeAttention::Agent) && native <= 0) {
        const bool agent = block.native == NativeAttention::Agent;
        native =
            shapes.bounded("native input size",
                           cswin_block_prefix(int(s), 0) + (agent ? "attns.0.ah_bias" : "attns.0.positional_encoding"),
                           int64_t(agent ? block.agent_side : block.encoding_side) * 4 << s, kInputRange);
        notes.push_back("native input " + std::to_string(native) + " from stage " + std::to_string(s) + "'s " +
                        (agent ? "agent biases" : "positional encoding") + " (no img_size metadata)");
      }
  if (native <= 0) {
    native = 224;
    assumed.push_back({"img_size", native, "the released training input; no focused block shows it"});
  }
  arch.native_height = arch.native_width = native;

  // Stripe widths: only two-branch blocks use them (single-branch blocks cover the whole grid).
  arch.split_size =
      bounded_list(shapes, stage_counts(meta, "split_size", stages), "split_size", "stripe width", kGridRange);
  if (arch.split_size.empty()) {
    arch.split_size = {1, 2};
    while (arch.split_size.size() < stages) arch.split_size.push_back(std::max(1, native / 32));
    arch.split_size.resize(stages);
    assumed.push_back({"split_size", arch.split_size, "the released models' stripe widths 1, 2, img_size / 32"});
  }
  arch.la_split_size =
      bounded_list(shapes, stage_counts(meta, "la_split_size", stages), "la_split_size", "stripe width", kGridRange);
  for (size_t s = 0; s < stages; ++s)
    for (auto& block : arch.stages[s].blocks)
      block.split = block.native != NativeAttention::Softmax && !arch.la_split_size.empty() ? arch.la_split_size[s]
                                                                                            : arch.split_size[s];

  // attn_type: the keys decide; the metadata's must agree with them.
  std::vector<std::vector<bool>> focused(stages);
  for (size_t s = 0; s < stages; ++s)
    for (const auto& block : arch.stages[s].blocks) focused[s].push_back(block.native != NativeAttention::Softmax);
  if (meta.is_object() && meta.contains("attn_type") && meta["attn_type"].is_string()) {
    arch.attn_type = meta["attn_type"].get<std::string>();
    const auto expected = parse_attn_type(arch.attn_type, depths);
    for (size_t s = 0; s < stages; ++s)
      for (size_t b = 0; b < focused[s].size(); ++b)
        if (expected[s][b] != focused[s][b])
          throw CheckpointError("arch metadata attn_type '" + arch.attn_type.substr(0, 40) + "' makes block '" +
                                cswin_block_prefix(int(s), int(b)) + "' " + (expected[s][b] ? "focused" : "softmax") +
                                " but its keys are " +
                                (focused[s][b] ? to_string(arch.stages[s].blocks[b].native) : "softmax"));
  } else {
    // The authors' letters: FLatten's L/S, Agent's A/B, InLine's I/S.
    NativeAttention successor = NativeAttention::Focused;
    for (const auto& stage : arch.stages)
      for (const auto& block : stage.blocks)
        if (block.native == NativeAttention::Agent || block.native == NativeAttention::InLine) successor = block.native;
    const char* successor_letters = attn_type_letters(successor);
    std::string letters, count;
    for (size_t s = 0; s < stages; ++s) {
      size_t leading = 0;
      while (leading < focused[s].size() && focused[s][leading]) ++leading;
      for (size_t b = leading; b < focused[s].size(); ++b)
        if (focused[s][b])
          throw CheckpointError(
              "block '" + cswin_block_prefix(int(s), int(b)) +
              "' is the successor's kind after a softmax block of its stage: no attn_type has that order");
      if (leading == focused[s].size()) {
        letters += successor_letters[0];
      } else if (leading == 0) {
        letters += successor_letters[1];
      } else {
        letters += 'M';
        count = std::to_string(leading);
      }
    }
    arch.attn_type = letters + count;
  }
  arch.focusing_factor = read_trained_focusing_factor(meta, notes);
  return arch;
}

// Parameters and one forward pass at the native input, counted from the architecture: a 7x7
// stem with stride 4 and padding 2, 3x3 merges.
StagedMemory cswin_memory(const CSwinArch& arch) {
  const double width = arch.stages.back().dim, classes = arch.num_classes;
  const double stem_and_head = double(arch.embed_dim) * (49.0 * arch.in_chans + 3) + (classes + 3) * width;
  return StagedMemory::halving(arch.stages, std::floor((arch.native_height - 3) / 4.0) + 1, 9, stem_and_head,
                               [](const CSwinStageArch& stage, const CSwinBlockArch& block) {
                                 const double dim = stage.dim;
                                 const double encoding = double(block.encoding_side) * block.encoding_side;
                                 return StagedMemory::Block{
                                     4 * dim * dim + 2 * dim * block.mlp_hidden +
                                         (encoding + 21 + double(block.dwc_kernel) * block.dwc_kernel) * dim,
                                     double(block.heads), double(block.mlp_hidden)};
                               });
}

InferredBackbone infer_cswin(FamilyInput& input) {
  ShapeReader shapes(input.checkpoint, "FLatten-CSwin");
  return inferred_backbone<CSwinTransformerImpl>(
      shapes, infer_cswin_arch(shapes, input.meta, input.notes, input.assumed), cswin_memory);
}

}  // namespace

// FLatten-CSwin's sizes (LeapLabTHU/FLatten-Transformer models/flatten_cswin.py, built by name from
// models/build.py's MODEL.TYPE).
const std::vector<ReleasedArch>& cswin_released() {
  static const std::vector<ReleasedArch> table = {
      {"FLatten_CSWin_64_24181_tiny_224",
       R"({"patch_size":4,"embed_dim":64,"depth":[2,4,18,1],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224})"},
      {"FLatten_CSWin_64_24322_small_224",
       R"({"patch_size":4,"embed_dim":64,"depth":[2,4,32,2],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224})"},
      {"FLatten_CSWin_96_36292_base_224",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,7,7],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":224})"},
      {"FLatten_CSWin_96_36292_base_384",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,12,12],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":384})"},
      // Agent-CSwin and InLine-CSwin (LeapLabTHU/Agent-Attention agent_cswin.py and cfgs/agent_cswin_*.yaml,
      // LeapLabTHU/InLine inline_cswin.py and cfgs/inline_cswin_*.yaml).
      {"Agent_CSWin_64_24181_tiny_224",
       R"({"patch_size":4,"embed_dim":64,"depth":[2,4,18,1],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224,"attn_type":"AABB","la_split_size":"56-28-14-7","agent_num":"9-16-49-49"})"},
      {"Agent_CSWin_64_36292_small_224",
       R"({"patch_size":4,"embed_dim":64,"depth":[3,6,29,2],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224,"attn_type":"AABB","la_split_size":"56-28-14-7","agent_num":"9-16-49-49"})"},
      {"Agent_CSWin_96_36292_base_224",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,7,7],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":224,"attn_type":"AABB","la_split_size":"56-28-14-7","agent_num":"9-16-49-49"})"},
      {"Agent_CSWin_96_36292_base_384",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,12,12],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":384,"attn_type":"AABB","la_split_size":"96-48-24-12","agent_num":"9-16-49-49"})"},
      {"inline_cswin_tiny",
       R"({"patch_size":4,"embed_dim":64,"depth":[2,4,18,1],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224,"attn_type":"IISS","la_split_size":"56-28-14-7"})"},
      {"inline_cswin_small",
       R"({"patch_size":4,"embed_dim":64,"depth":[3,6,29,2],"split_size":[1,2,7,7],"num_heads":[2,4,8,16],"mlp_ratio":4.0,"img_size":224,"attn_type":"IISS","la_split_size":"56-28-14-7"})"},
      {"inline_cswin_base",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,7,7],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":224,"attn_type":"IISS","la_split_size":"56-28-14-7"})"},
      {"inline_cswin_base_384",
       R"({"patch_size":4,"embed_dim":96,"depth":[3,6,29,2],"split_size":[1,2,12,12],"num_heads":[4,8,16,32],"mlp_ratio":4.0,"img_size":384,"attn_type":"IISS","la_split_size":"96-48-24-12"})"},
  };
  return table;
}

const BackboneFamily& cswin_family() {
  static const BackboneFamily family{
      "flatten-cswin",
      "FLatten-CSwin, Agent-CSwin, InLine-CSwin",
      looks_like_cswin,
      infer_cswin,
      {},
      cswin_released(),
      {{"split_size", "split_size", "CSwin's stripe width per stage", ArchKey::Counts},
       {"la_split_size", "la_split_size",
        "CSwin's stripe width of the successor's blocks per stage (FLatten's focused, Agent's, InLine's)",
        ArchKey::Counts}},
      {{{"MODEL", "LA", "CSWIN_LA_SPLIT_SIZE"}, "la_split_size"},
       {{"MODEL", "AGENT", "CSWIN_LA_SPLIT_SIZE"}, "la_split_size"},
       {{"MODEL", "INLINE", "CSWIN_LA_SPLIT_SIZE"}, "la_split_size"}}};
  return family;
}

}  // namespace attnscope
