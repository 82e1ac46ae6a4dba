// The one interface every model family implements (ViT, Swin, PVT v2, TorchScript files, ...): a
// forward pass that fills a capture per attention layer (each with its own query and key grids),
// the input sizes it takes, and the named points where analyses read activations. Views and
// analyses read only this, so a new family touches its own files and the registry, nothing else.
// The native families are staged backbones (below): the scaffolding they share is written once.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "models/attention.h"

namespace attnscope {

// Thrown between blocks when a caller's cancel check says the run is no longer wanted.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "inference cancelled"; }
};

// A point of the forward pass whose activation an analysis can read (Grad-CAM's target layer):
// timm's module name, and how the tensor there maps to the image.
struct HookPoint {
  enum class Format {
    Tokens,         // [B, T, C]: prefix tokens, then the grid row-major
    ChannelsLast,   // [B, H, W, C]
    ChannelsFirst,  // [B, C, H, W]
  };
  std::string name;  // e.g. "blocks.3.norm1", "layers.2.blocks.1.norm1", "stages.3.norm"
  TokenLayout layout;
  Format format = Format::Tokens;
};

// Called at named points with the tensor there, like a PyTorch forward hook that may return a
// replacement: the hook may reassign `value` (Grad-CAM swaps in a leaf that requires grad).
using ForwardHook = std::function<void(const HookPoint& point, torch::Tensor& value)>;

// One attention layer whose probabilities an AttentionHook receives.
struct AttentionHookPoint {
  int layer = 0;     // among the attention layers, in the order they run
  std::string name;  // the module, e.g. "blocks.3.attn"
  TokenLayout layout, key_layout;
};

// Receives each attention layer's probabilities [B, h, Tq, Tk] as the forward pass uses them: the
// layer's output is then probabilities @ v (plus FLatten's DWC term, which is not part of the
// matrix), so with autograd on their gradient is dScore/dA, what attention relevance and
// gradient-weighted rollout read. Linear kernels form their equivalent matrix for it (O(T^2)
// instead of O(T d^2)). The hook may keep the tensor or replace it.
using AttentionHook = std::function<void(const AttentionHookPoint& point, torch::Tensor& probabilities)>;

struct ForwardOptions {
  bool capture = true;
  std::function<bool()> cancelled;  // checked between blocks
  ForwardHook hook;                 // empty: no hook, no cost
  AttentionHook attention_hook;     // empty: no explicit matrices, no cost
};

// One attention of a pooling head: a query of its own (a learned latent, CaiT's class token) over
// the tokens it reads.
struct PoolAttention {
  std::string name;             // its module: "attn_pool", "blocks_token_only.1.attn"
  torch::Tensor probabilities;  // [B, heads, N] over the N tokens it reads, the patch grid last
};

struct ForwardOutput {
  torch::Tensor logits;                  // [B, classes] (or the embedding / pooled features)
  TokenLayout layout;                    // the token layout of the first attention layer
  std::vector<AttentionCapture> layers;  // one per attention layer, in the order they ran; empty unless captured
  // Where a pooling head reads the features from, one entry per attention it runs, in order: an
  // attention-pool head's ("attn_pool": SigLIP's MAP, PE's) or CaiT's class-attention blocks'
  // ("blocks_token_only.0.attn", ...). Empty for other heads or without capture.
  std::vector<PoolAttention> pool_attention;
};

// The input sizes a model takes: its training size, and the multiple both sides must be.
struct InputGeometry {
  int native_height = 224, native_width = 224;
  int multiple = 16;   // ViT: the patch; Swin: patch x 2^merges; 1: any size
  bool fixed = false;  // only the native size (a traced TorchScript file)
};

// What a model's output is: class logits (a classifier), an embedding (CLIP's image embedding) or
// features (a headless model). Only logits have classes.
enum class OutputKind { Logits, Embedding, Features };
template <>
struct EnumTable<OutputKind> {
  static const std::vector<EnumEntry<OutputKind>>& entries();
};
inline std::string to_string(OutputKind kind) { return enum_name(kind); }

class Backbone : public torch::nn::Module {
 public:
  // images: [B, 3, H, W], sides multiples of input_geometry().multiple.
  virtual ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                                const ForwardOptions& options = {}) = 0;

  // "vit-cls", "deit-distilled", "swin", "pvt-v2", "torchscript", ... with the layout it came in.
  virtual std::string family() const = 0;
  // The architecture as `info --json` and summary.json print it, and as `info` prints it in lines
  // ("heads         3 x 32"), after the family, input and output that every model has.
  virtual nlohmann::json describe() const = 0;
  virtual std::vector<std::string> summary_lines() const = 0;
  virtual InputGeometry input_geometry() const = 0;
  virtual OutputKind output_kind() const = 0;
  virtual int num_classes() const = 0;  // 0 when the output has no classes
  virtual int attention_layers() const = 0;

  // A hook point spec (negative indices count from the end; empty: the default) resolved to its
  // canonical name; throws std::invalid_argument naming the valid points.
  virtual std::string resolve_hook_point(const std::string& spec) const = 0;
  // Grad-CAM's default point, as pytorch-grad-cam's tutorials pick it for the family.
  virtual std::string default_hook_point() const = 0;

  // Stages of different grids (Swin, PVT): `run` writes a layer's row as its key grid [h, w];
  // a ViT's as its token sequence, prefix tokens first.
  virtual bool hierarchical() const { return false; }

  // What the window option does on this family (the UI says so instead of ignoring the slider).
  virtual WindowSupport window_support() const { return kSwappedInWindows; }

  // Whether q, k and activations are available (variant swaps, f_p, Grad-CAM): false for models
  // that only report their attention probabilities (TorchScript files).
  virtual bool computes_attention() const { return true; }
  virtual int64_t parameter_count() const;
};

// An index into `count` modules given as text ("3", "-1" for the last); throws
// std::invalid_argument(`error`) when it is not a whole number in -count..count-1.
int resolve_module_index(const std::string& text, int count, const std::string& error);

// ---------------------------------------------------------------------------------------------
// Staged backbones: a stem, stages of blocks, a head (ViT is one stage). A family declares its
// stages and naming once (StagedDesign, as timm's feature_info does) and supplies its modules'
// steps; StagedBackbone runs the forward pass (input checks, threads, cancellation, captures and
// their placement), resolves hook points, and implements describe and the common overrides.

// One stage as timm's feature_info lists it.
struct StageInfo {
  int channels = 0;
  int reduction = 1;  // image pixels per grid cell: the patch size of the stage's token layout
  int blocks = 0;     // its blocks, each an attention layer
};

// How a family's blocks are named, as its checkpoint keys name them (loading is a name walk).
struct BlockNaming {
  std::string stage_prefix;  // "layers.", "stages.", "stage"; empty: one stage whose blocks are named alone
  std::string block_infix;   // after the stage's number: ".blocks.", "."; with one stage the blocks' prefix
  int first_stage = 0;       // the number stage 0 has in names (CSwin counts from 1)
  // "layers.1.blocks.0", "stage2.0", "blocks.3".
  std::string block(int stage, int block) const;
};

// A hook point of each stage outside its blocks, PREFIX + S + SUFFIX: "stages.2.norm" (PVT's stage
// norm), "merge1" (CSwin's merges, from stage 1), "stages.2" (CARE: its last block's output).
struct StagePoint {
  std::string prefix, suffix;
  int first_stage = 0;      // stages before it have none
  bool last_block = false;  // the name of the stage's last block, not a module of its own
};

// What a staged family declares once.
struct StagedDesign {
  // The design of a hierarchical `arch` (in_chans, num_classes, native_height, native_width and
  // stages of `dim` and `blocks`) named and holding its tokens as given, whose grids halve from the
  // stem's reduction on (timm's feature_info); the input's sides multiples of `multiple`.
  template <typename Arch>
  static StagedDesign hierarchical(const Arch& arch, BlockNaming naming, HookPoint::Format format, int stem_reduction,
                                   int multiple = 1) {
    StagedDesign design;
    for (const auto& stage : arch.stages)
      design.stages.push_back({stage.dim, stem_reduction << design.stages.size(), int(stage.blocks.size())});
    design.naming = std::move(naming);
    design.format = format;
    design.in_chans = arch.in_chans;
    design.num_classes = arch.num_classes;
    design.input = {arch.native_height, arch.native_width, multiple};
    return design;
  }

  std::vector<StageInfo> stages;
  BlockNaming naming;
  std::vector<std::string> block_points{"norm1"};  // hook points inside a block besides its output
  // Grad-CAM's default inside the last block (pytorch-grad-cam's choice for transformers); empty:
  // the block's output.
  std::string default_point = "norm1";
  // Hook points outside the blocks that take no index: the name a user gives -> the module's name.
  std::map<std::string, std::string> named_points;
  std::vector<StagePoint> stage_points;
  HookPoint::Format format = HookPoint::Format::Tokens;  // how the family's tensors hold their tokens
  int in_chans = 3;
  int num_classes = 0;
  InputGeometry input;  // the native size, and the multiple both sides must be
  int min_side = 1;     // the smallest side the stem and the merges take
  // The refusal of an input `width` x `height` with a side under min_side, in the family's words;
  // empty: the refusal of a side that is not a multiple.
  std::function<std::string(int64_t width, int64_t height)> too_small;
  WindowSupport window{WindowSupport::Kind::None, "this model has no windows"};
};

// A stage's tokens between a family's modules: the tensor in the family's format and its grid.
struct StageTokens {
  torch::Tensor x;
  TokenLayout layout;
};

// One forward pass as a family's modules see it.
struct StagedPass {
  const torch::Tensor& images;
  const AttentionSettings& settings;
  const ForwardOptions& options;
  HookPoint::Format format;
  std::vector<PoolAttention>* pool_attention = nullptr;  // the output's, when the pass captures
  // CPU inference without a hook: a family may run its blocks by row chunks, one core each.
  bool row_chunked() const;
  // Calls the pass's hook (if any) at `name` with a tensor on `layout`'s grid.
  void hook(const std::string& name, const TokenLayout& layout, torch::Tensor& value) const;
};

// Where a block runs.
struct BlockSite {
  int stage = 0, block = 0;
  int layer = 0;       // counted across stages
  std::string name;    // its module: "layers.1.blocks.0"
  TokenLayout layout;  // the stage's grid
  // Its capture with the placement and layouts set (the family adds what else it knows); null when
  // the pass captures nothing.
  AttentionCapture* capture = nullptr;
};

class StagedBackbone : public Backbone {
 public:
  explicit StagedBackbone(StagedDesign design) : design_(std::move(design)) {}

  // Refuses settings.ablation: the ViT overrides it to run ablated heads through its residual stream.
  ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                        const ForwardOptions& options = {}) override;
  // The family's own fields (describe_architecture) with the family, input, output and layers.
  nlohmann::json describe() const final;
  InputGeometry input_geometry() const override { return design_.input; }
  OutputKind output_kind() const override {
    return design_.num_classes > 0 ? OutputKind::Logits : OutputKind::Features;
  }
  int num_classes() const override { return design_.num_classes; }
  int attention_layers() const override;
  // Hook points: the design's named points and stage points, a block's points by stage
  // and block ("layers.S.blocks.B.norm1"), or across stages ("blocks.N.norm1").
  std::string resolve_hook_point(const std::string& spec) const final;
  std::string default_hook_point() const final;
  bool hierarchical() const override { return true; }
  WindowSupport window_support() const override { return design_.window; }
  const StagedDesign& design() const { return design_; }

 protected:
  virtual nlohmann::json describe_architecture() const = 0;
  // The stage's tokens before its blocks: the stem on pass.images for the first stage, a
  // downsampling (or nothing) of the previous stage's tokens for the others.
  virtual StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) = 0;
  virtual torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) = 0;
  // What runs after a stage's blocks (PVT's stage norm).
  virtual torch::Tensor leave_stage(int stage, const StageTokens& tokens, const StagedPass& pass);
  // The last stage's tokens -> the output (logits, or pooled features).
  virtual torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) = 0;
  // The layout of a `grid_h` x `grid_w` grid at `stage` (its reduction is the patch size).
  TokenLayout stage_layout(int stage, int grid_h, int grid_w) const;
  // Throws std::invalid_argument for images the design does not take (channels, sides).
  void check_input(const torch::Tensor& images) const;

 private:
  // "<index>[.<point>]" of a block among `count`, with the point checked against the design.
  std::pair<int, std::string> block_and_point(const std::string& text, int count, const std::string& bad) const;
  // One of the design's stage points, resolved, or empty when `spec` has none of their forms.
  std::string resolve_stage_point(const std::string& spec, const std::string& bad) const;
  std::string hook_point_choices() const;

  StagedDesign design_;
};

}  // namespace attnscope
