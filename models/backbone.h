// The one interface every model family implements (ViT, Swin, PVT v2, TorchScript files, ...): a
// forward pass that fills a capture per attention layer (each with its own query and key grids),
// the input sizes it takes, and the named points where analyses read activations. Views and
// analyses read only this, so a new family touches its own files and the registry, nothing else.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

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

struct ForwardOptions {
  bool capture = true;
  std::function<bool()> cancelled;  // checked between blocks
  ForwardHook hook;                 // empty: no hook, no cost
};

struct ForwardOutput {
  torch::Tensor logits;                  // [B, classes] (or the embedding / pooled features)
  TokenLayout layout;                    // the token layout of the first attention layer
  std::vector<AttentionCapture> layers;  // one per attention layer, in the order they ran; empty unless captured
};

// The input sizes a model takes: its training size, and the multiple both sides must be.
struct InputGeometry {
  int native_height = 224, native_width = 224;
  int multiple = 16;   // ViT: the patch; Swin: patch x 2^merges; 1: any size
  bool fixed = false;  // only the native size (a traced TorchScript file)
};

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
  // "logits" (a classifier), "embedding" (CLIP's image embedding) or "features" (a headless model).
  virtual std::string output_kind() const = 0;
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

  // What the window option does on this family, in a few words; empty: it has no windows (the
  // UI says so instead of ignoring the slider).
  virtual std::string window_meaning() const {
    return "restricts patch queries to their w x w window (prefix tokens stay global)";
  }

  // Whether q, k and activations are available (variant swaps, f_p, Grad-CAM): false for models
  // that only report their attention probabilities (TorchScript files).
  virtual bool computes_attention() const { return true; }
  virtual int64_t parameter_count() const;
};

// An index into `count` modules given as text ("3", "-1" for the last); throws
// std::invalid_argument(`error`) when it is not a whole number in -count..count-1.
int resolve_module_index(const std::string& text, int count, const std::string& error);

}  // namespace attnscope
