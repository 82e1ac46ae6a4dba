// ViT checkpoints in the layouts researchers download, renamed to timm's keys the way timm's and
// transformers' own converters map them: Hugging Face transformers ViT/DeiT, CLIP's vision tower,
// DINOv3 and SigLIP (with config.json and preprocessor_config.json beside the weights), OpenAI CLIP's
// visual tower, DINOv2's hub files and Meta's DINOv3 files (models/checkpoint_layouts_2026.cpp). What such a layout
// fixes and shapes cannot tell (head count, LayerNorm eps, activation, position interpolation, normalisation, class
// names) comes back as LayoutFacts; what the keys show (patch bias, norm_pre, head bias) infer_arch reads from the
// keys.
#pragma once

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/image.h"
#include "models/arch_config.h"
#include "models/checkpoint_layout.h"
#include "models/vit.h"

namespace attnscope {

struct LayoutFacts {
  CheckpointLayout layout = CheckpointLayout::Timm;
  int heads = 0;                // 0: not fixed by the layout
  double layer_norm_eps = 0.0;  // 0: timm's 1e-6
  MlpActivation activation = MlpActivation::Gelu;
  bool pooler = false;
  int pos_embed_prefix_tokens = -2;  // -2: infer from pos_embed's length
  PositionInterpolation pos_interpolation;
  std::optional<OutputKind> output_kind;  // none: logits when there is a head, else features
  bool eva_layer_scale = false;           // timm's Eva keys gamma_1 / gamma_2, renamed to ls1.gamma / ls2.gamma
  std::optional<RotaryArch> rope;         // the layout's rotary positions (DINOv3's); none: the configs decide
  std::optional<GlobalPool> pool;         // the features the layout's model outputs; none: the keys decide
  // What the layout's files do not record and the layout takes from its released models (listed
  // as assumed unless a config or --arch gives the key).
  std::vector<ArchAssumption> assumed;

  // Preprocessing the checkpoint declares; `normalization_source` empty: ImageNet's (timm's default).
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  std::string normalization_source;
  // Resize, crop and filter the checkpoint declares (unset: it does not), and where they were read.
  std::optional<ResizeMode> resize;
  std::optional<double> crop_pct;
  std::optional<Interpolation> interpolation;
  std::string preprocessing_source;
  std::vector<std::string> class_names;  // Hugging Face id2label, in index order
  std::vector<std::string> notes;        // how the file was read, for `info` and summary.json

  void apply_to(VitArch& arch) const;
};

// Renames `checkpoint` in place to timm's keys when it is in one of the layouts above and returns
// what the layout says; a timm checkpoint is left as it is. `path` is the file or folder the user
// gave (Hugging Face configs are read from beside it). Throws CheckpointError with a message that
// names the layout and what is wrong.
LayoutFacts adopt_known_layout(Checkpoint& checkpoint, const std::string& path);

// The layouts of 2026 (models/checkpoint_layouts_2026.cpp): each recognises its keys and renames them.
bool is_hf_dinov3(const Checkpoint& checkpoint);
void convert_hf_dinov3(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts);
bool is_hf_siglip(const Checkpoint& checkpoint);
void convert_hf_siglip(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts);
bool is_meta_dinov3(const Checkpoint& checkpoint);
void convert_meta_dinov3(Checkpoint& checkpoint, LayoutFacts& facts);
// open_clip_config.json beside `path` (null when there is none); a folder of it with visual.* keys.
nlohmann::json read_open_clip_config(const std::string& path);
bool is_open_clip(const Checkpoint& checkpoint, const nlohmann::json& config);
void convert_open_clip(Checkpoint& checkpoint, const nlohmann::json& config, LayoutFacts& facts);
// OpenAI CLIP's visual tower renamed to timm's keys (models/checkpoint_layouts.cpp).
void convert_openai_clip(Checkpoint& checkpoint, LayoutFacts& facts);

// A JSON object file `name` in `folder` (a config beside the weights), or null when there is none;
// one that is broken or not an object throws CheckpointError ("... : fix or remove it").
nlohmann::json read_json_beside(const std::filesystem::path& folder, const std::string& name);

// The weights file of a Hugging Face model folder (model.safetensors, else pytorch_model.bin), or
// `path` itself when it is not a folder.
std::string resolve_weights_file(const std::string& path);

}  // namespace attnscope
