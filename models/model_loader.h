// From a checkpoint file to a ready model: the architecture inferred from key names and shapes,
// weights copied by a walk over the modules' registered names, and a report of what did not fit.
#pragma once

#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/image.h"
#include "models/arch_config.h"
#include "models/backbone.h"
#include "models/clip_text.h"
#include "models/cpu_threads.h"
#include "models/model_source.h"
#include "models/scripted_model.h"
#include "models/vit.h"
#include "models/vit_checkpoint.h"

namespace attnscope {

struct LoadReport {
  std::vector<std::string> missing;     // the model needs them, the file lacks them
  std::vector<std::string> unexpected;  // in the file, not part of any supported computation
  std::vector<std::string> misshaped;   // "name: file [a,b] vs model [c,d]"
  std::vector<std::string> notes;       // how the architecture was inferred
  std::vector<std::string> warnings;    // what loads but is suspect (weights holding NaN or Inf)
  std::vector<ArchAssumption> assumed;  // what no file or option gave and the family took
  bool ok() const { return missing.empty() && unexpected.empty() && misshaped.empty(); }
  std::string describe() const;
};

// Copies weights into the model by registered name; fills `report`; casts to float32.
void copy_weights(torch::nn::Module& model, const Checkpoint& checkpoint, LoadReport& report);

struct LoadedModel {
  std::shared_ptr<Backbone> backbone;  // the model, whichever family it is
  LoadReport report;
  std::string path;
  std::string format;
  std::string container_key;
  std::string architecture;  // the registered name a config gave (config.json, yaml); empty: none
  ModelSource source;        // what --model named and what it resolved to (hf-hub: repo, revision, commit, files)
  std::map<std::string, std::string> metadata;  // safetensors __metadata__ (e.g. class_names)
  std::vector<std::string> class_names;         // empty when unknown
  // What the checkpoint declares about its input, and the normalisation in use (the declared one
  // unless --mean/--std override it: see configure_input in models/inference.h).
  DeclaredPreprocessing declared;
  Normalization normalization;
  std::string normalization_source;
  InputSettings input;  // the input settings configure_input was given (mean ablation prepares its images so)
  torch::Device device{torch::kCPU};
  int64_t parameter_count = 0;  // the image model's
  // CLIP's text tower when the file holds one (a full OpenAI CLIP state_dict or released archive, a
  // Hugging Face CLIPModel), on `device` in eval mode; null otherwise, and `text_tower_absent` says
  // why ("this file has no text tower: 'token_embedding.weight' missing", or what made it unusable).
  ClipTextTower text_tower{nullptr};
  std::string text_tower_absent;

  // The forward pass of whichever model this is. A TorchScript model ignores `settings` (it reports
  // its own attention) and `options.hook`.
  ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                        const ForwardOptions& options = {}) {
    return backbone->forward(images, settings, options);
  }
  // The model, for what needs q, k and activations (variant swaps, f_p, Grad-CAM); throws
  // std::invalid_argument naming `what` for a model that only reports its probabilities.
  Backbone& native(const std::string& what);
  bool is_scripted() const { return !backbone->computes_attention(); }
  // The text tower, for `what` (a text target, zero-shot); throws std::invalid_argument naming
  // `what` and why the file has none.
  ClipTextTowerImpl& text(const std::string& what) const;
  std::string family() const { return backbone->family(); }
  OutputKind output_kind() const { return backbone->output_kind(); }
  int num_classes() const { return backbone->num_classes(); }

  // The ViT family's model and architecture (ViT/DeiT, Hugging Face, CLIP, DINOv2 checkpoints; a
  // TorchScript file's token layout); throws std::invalid_argument for other families.
  VisionTransformerImpl& vit() const;
  const VitArch& vit_arch() const;
};

// Loads, validates strictly (a report with problems throws CheckpointError listing them), moves the
// model to `device` and puts it in eval mode. `path` may name a cache entry (models/model_source.h:
// hf-hub:ORG/NAME[@REV], local-dir:PATH, a bare ORG/NAME or NAME.pth of the caches).
LoadedModel load_model(const std::string& path, const ArchOverrides& overrides, torch::Device device);

// Class names for the model's outputs: a JSON list in the metadata key "class_names", else the
// ImageNet-1k names for 1000-class heads, else empty. Names the file gives but that cannot be used
// (not a list, or a count other than the classes') are said in `unused`.
std::vector<std::string> class_names_for(const LoadedModel& model, std::string* unused = nullptr);

// What output `index` of the model is called: its class name ("class N" when unnamed), "embedding
// dim N" / "features dim N" for models without classes, and for -1 the output's norm (Grad-CAM's
// default target on such models).
std::string output_name(const LoadedModel& model, int index);

// "auto" (CUDA when this LibTorch has it and a GPU is visible), "cpu" or "cuda[:N]".
torch::Device resolve_device(const std::string& name);

}  // namespace attnscope
