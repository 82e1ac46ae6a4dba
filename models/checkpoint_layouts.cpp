#include "models/checkpoint_layouts.h"

#include "models/checkpoint_layout_tools.h"

#include "core/excerpt.h"
#include "core/json_checked.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnscope {

namespace fs = std::filesystem;

namespace layouts {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

bool any_key_starts_with(const Checkpoint& checkpoint, const std::string& prefix) {
  auto it = checkpoint.tensors.lower_bound(prefix);
  return it != checkpoint.tensors.end() && starts_with(it->first, prefix);
}

fs::path folder_of(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error) ? fs::path(path) : fs::path(path).parent_path();
}

std::array<float, 3> three_floats(const nlohmann::json& value, const std::string& what) {
  if (!value.is_array() || value.size() != 3)
    throw CheckpointError(what + " must be a list of 3 numbers, one per RGB channel");
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!value[i].is_number()) throw CheckpointError(what + " must be a list of 3 numbers");
    out[i] = value[i].get<float>();
  }
  return out;
}

// Moves every tensor whose key starts with `from` to `to` + the rest of the key.
void rename_prefix(Checkpoint& checkpoint, const std::string& from, const std::string& to) {
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors)
    renamed[starts_with(key, from) ? to + key.substr(from.size()) : key] = tensor;
  checkpoint.tensors.swap(renamed);
}

// Renames by a table of (source suffix -> timm suffix) under per-block prefixes.
void rename_keys(Checkpoint& checkpoint, const std::vector<std::pair<std::string, std::string>>& table) {
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors) {
    std::string name = key;
    for (const auto& [from, to] : table)
      if (starts_with(name, from)) {
        name = to + name.substr(from.size());
        break;
      }
    renamed[name] = tensor;
  }
  checkpoint.tensors.swap(renamed);
}

using NameTable = std::vector<std::pair<std::string, std::string>>;

// "<blocks>N.<rest>" as timm's "blocks.N.<rest renamed by the first matching prefix pair>", or
// empty when `key` is not under `blocks` or no pair matches.
std::string block_key(const std::string& key, const std::string& blocks, const NameTable& table) {
  if (!starts_with(key, blocks)) return {};
  const auto dot = key.find('.', blocks.size());
  if (dot == std::string::npos) return {};
  const std::string index = key.substr(blocks.size(), dot - blocks.size()), rest = key.substr(dot + 1);
  for (const auto& [from, to] : table)
    if (starts_with(rest, from)) return "blocks." + index + "." + to + rest.substr(from.size());
  return {};
}

void rename_blocks(Checkpoint& checkpoint, const std::string& blocks, const NameTable& table) {
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors) {
    const std::string block = block_key(key, blocks, table);
    renamed[block.empty() ? key : block] = tensor;
  }
  checkpoint.tensors.swap(renamed);
}

void replace_in_keys(Checkpoint& checkpoint, const NameTable& table) {
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : checkpoint.tensors) {
    std::string name = key;
    for (const auto& [from, to] : table)
      if (const auto at = name.find(from); at != std::string::npos) name.replace(at, from.size(), to);
    renamed[name] = tensor;
  }
  checkpoint.tensors.swap(renamed);
}

}  // namespace layouts

namespace {

using namespace layouts;

// ---- Hugging Face transformers ViT / DeiT (transformers' convert_vit_timm_to_pytorch.py, reversed).

void read_hf_configs(const fs::path& folder, const std::string& model_type, LayoutFacts& facts) {
  const auto config = read_json_beside(folder, "config.json");
  if (config.is_null()) {
    facts.notes.push_back("no config.json beside the weights: heads, LayerNorm eps (1e-12) and labels assumed");
    facts.layer_norm_eps = 1e-12;
    return;
  }
  auto number = [&](const char* key, double fallback) {
    return config.contains(key) && config[key].is_number() ? config[key].get<double>() : fallback;
  };
  if (config.contains("model_type") && config["model_type"].is_string() &&
      config["model_type"].get<std::string>() != model_type)
    facts.notes.push_back("config.json says model_type '" + excerpt(config["model_type"].get<std::string>()) +
                          "'; the keys are " + model_type + "'s");
  facts.heads = int(number("num_attention_heads", 0));
  facts.layer_norm_eps = number("layer_norm_eps", 1e-12);
  if (config.contains("hidden_act")) {
    const std::string act = config["hidden_act"].is_string() ? config["hidden_act"].get<std::string>() : "?";
    if (act == "quick_gelu")
      facts.activation = MlpActivation::QuickGelu;
    else if (act != "gelu")
      throw CheckpointError("config.json: hidden_act '" + excerpt(act) +
                            "' is not supported (attnscope runs gelu and quick_gelu ViTs)");
  }
  if (config.contains("id2label") && config["id2label"].is_object()) {
    std::map<int, std::string> labels;
    for (const auto& [index, label] : config["id2label"].items()) {
      char* end = nullptr;
      const long i = std::strtol(index.c_str(), &end, 10);
      if (end && *end == '\0' && i >= 0 && i < 1000000 && label.is_string())
        labels[int(i)] = excerpt(label.get<std::string>());
    }
    // Only a complete 0..N-1 list names the outputs; transformers' default LABEL_0.. means none.
    bool complete = !labels.empty() && labels.rbegin()->first == int(labels.size()) - 1;
    if (complete && labels.begin()->second != "LABEL_0")
      for (const auto& [i, label] : labels) facts.class_names.push_back(label);
  }
  facts.notes.push_back("config.json: " + std::to_string(facts.heads) + " heads, LayerNorm eps " + [&] {
    std::ostringstream eps;
    eps << facts.layer_norm_eps;
    return eps.str();
  }());
  read_hf_preprocessor(folder, facts);
}

}  // namespace

// A Hugging Face image processor's preprocessor_config.json: mean, std, resize, crop and filter.
void layouts::read_hf_preprocessor(const fs::path& folder, LayoutFacts& facts) {
  const auto preprocessor = read_json_beside(folder, "preprocessor_config.json");
  if (preprocessor.is_null()) return;
  if (preprocessor.contains("image_mean")) facts.mean = three_floats(preprocessor["image_mean"], "image_mean");
  if (preprocessor.contains("image_std")) facts.std = three_floats(preprocessor["image_std"], "image_std");
  if (preprocessor.contains("image_mean") || preprocessor.contains("image_std"))
    facts.normalization_source = "preprocessor_config.json";
  // Its resize, crop and filter in attnscope's terms: resize then centre crop is timm's transform
  // with crop = crop_size / size; a resize without a crop squashes (fit).
  const bool crop = preprocessor.value("do_center_crop", false) && preprocessor.contains("crop_size");
  const int resample = preprocessor.contains("resample") && preprocessor["resample"].is_number_integer()
                           ? preprocessor["resample"].get<int>()
                           : -1;
  if (resample == 2) facts.interpolation = Interpolation::Bilinear;
  if (resample == 3) facts.interpolation = Interpolation::Bicubic;
  auto side = [](const nlohmann::json& value) -> double {
    if (value.is_number()) return value.get<double>();
    for (const char* key : {"height", "shortest_edge"})
      if (value.is_object() && value.contains(key) && value[key].is_number()) return value[key].get<double>();
    return 0.0;
  };
  facts.resize = crop ? ResizeMode::Timm : ResizeMode::Fit;
  if (crop && preprocessor.contains("size")) {
    const double size = side(preprocessor["size"]), cropped = side(preprocessor["crop_size"]);
    if (size > 0 && cropped > 0 && cropped <= size) facts.crop_pct = cropped / size;
  }
  facts.preprocessing_source = "preprocessor_config.json";
  const char* filter = resample == 2 ? "bilinear" : resample == 3 ? "bicubic" : "PIL filter";
  facts.notes.push_back(std::string("preprocessor_config.json: ") +
                        (crop ? "resize then centre crop (--resize timm)"
                              : "resize the whole image to the input size, no crop (--resize fit)") +
                        ", " + filter);
}

namespace {

// timm's pretrained_cfg (mean, std, crop_pct, interpolation, crop_mode), from the safetensors
// metadata key "pretrained_cfg" (a JSON string) or a timm hub config.json beside the weights.
void read_timm_pretrained_cfg(const Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts) {
  nlohmann::json cfg;
  std::string source;
  auto found = checkpoint.metadata.find("pretrained_cfg");
  if (found != checkpoint.metadata.end()) {
    try {
      cfg = parse_json_checked(found->second, "metadata pretrained_cfg");
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(std::string(e.what()) + ": the file's pretrained_cfg metadata is not valid JSON");
    }
    source = "pretrained_cfg (file metadata)";
  } else {
    const nlohmann::json config = read_json_beside(folder_of(path), "config.json");
    if (config.is_object() && config.contains("pretrained_cfg")) {
      cfg = config["pretrained_cfg"];
      source = "pretrained_cfg (config.json)";
    }
  }
  if (!cfg.is_object()) return;
  if (cfg.contains("mean")) facts.mean = three_floats(cfg["mean"], "pretrained_cfg mean");
  if (cfg.contains("std")) facts.std = three_floats(cfg["std"], "pretrained_cfg std");
  if (cfg.contains("mean") || cfg.contains("std")) facts.normalization_source = source;
  if (cfg.contains("crop_pct") && cfg["crop_pct"].is_number()) {
    const double crop = cfg["crop_pct"].get<double>();
    if (!(crop > 0 && crop <= 1)) throw CheckpointError(source + ": crop_pct must be in (0, 1]");
    facts.crop_pct = crop;
  }
  if (cfg.contains("interpolation") && cfg["interpolation"].is_string()) {
    const std::string name = cfg["interpolation"].get<std::string>();
    if (name == "bicubic" || name == "bilinear")
      facts.interpolation = parse_interpolation(name);
    else
      facts.notes.push_back(source + ": interpolation '" + name.substr(0, 40) + "' is not supported, using bicubic");
  }
  if (cfg.contains("crop_mode") && cfg["crop_mode"].is_string())
    facts.resize = cfg["crop_mode"].get<std::string>() == "squash" ? ResizeMode::Fit : ResizeMode::Timm;
  facts.preprocessing_source = source;
  facts.notes.push_back("preprocessing from " + source);
}

void convert_hugging_face(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts) {
  const bool deit = any_key_starts_with(checkpoint, "deit.");
  const std::string base = deit ? "deit." : (any_key_starts_with(checkpoint, "vit.") ? "vit." : "");
  facts.layout = deit ? CheckpointLayout::HfDeit : CheckpointLayout::HfVit;
  facts.pos_interpolation = {/*antialias=*/false, /*offset=*/0.0};
  read_hf_configs(folder_of(path), deit ? "deit" : "vit", facts);

  auto& tensors = checkpoint.tensors;
  // Split query / key / value become timm's stacked qkv.
  for (int layer = 0;; ++layer) {
    const std::string attention = base + "encoder.layer." + std::to_string(layer) + ".attention.attention.";
    if (!tensors.count(attention + "query.weight")) break;
    for (const std::string kind : {"weight", "bias"}) {
      std::vector<torch::Tensor> parts;
      for (const std::string projection : {"query.", "key.", "value."}) {
        auto it = tensors.find(attention + projection + kind);
        if (it == tensors.end()) continue;
        parts.push_back(it->second);
        tensors.erase(it);
      }
      if (parts.empty()) continue;
      if (parts.size() != 3)
        throw CheckpointError("Hugging Face layer " + std::to_string(layer) + ": query, key and value " + kind +
                              " must all be present");
      tensors["blocks." + std::to_string(layer) + ".attn.qkv." + kind] = torch::cat(parts, 0);
    }
  }
  for (auto it = tensors.begin(); it != tensors.end();) {
    if (it->first.size() >= 10 && it->first.compare(it->first.size() - 10, 10, "mask_token") == 0) {
      facts.notes.push_back("skipped " + it->first + " (used only for masked-image training)");
      it = tensors.erase(it);
    } else {
      ++it;
    }
  }
  // Block keys: encoder.layer.N.<hf> -> blocks.N.<timm>.
  const NameTable block_names{{"layernorm_before.", "norm1."},
                              {"attention.output.dense.", "attn.proj."},
                              {"layernorm_after.", "norm2."},
                              {"intermediate.dense.", "mlp.fc1."},
                              {"output.dense.", "mlp.fc2."}};
  rename_blocks(checkpoint, base + "encoder.layer.", block_names);
  rename_keys(checkpoint, {{base + "embeddings.cls_token", "cls_token"},
                           {base + "embeddings.distillation_token", "dist_token"},
                           {base + "embeddings.position_embeddings", "pos_embed"},
                           {base + "embeddings.patch_embeddings.projection.", "patch_embed.proj."},
                           {base + "layernorm.", "norm."},
                           {"cls_classifier.", "head."},
                           {"distillation_classifier.", "head_dist."},
                           {"classifier.", "head."},
                           {base + "pooler.", "pooler."}});
  rename_prefix(checkpoint, "pooler.dense.", "pooler.0.");
  facts.pooler = tensors.count("pooler.0.weight") > 0;
  if (facts.pooler && tensors.count("head.weight"))
    throw CheckpointError(
        "a Hugging Face file with both a pooler and a classifier is not a layout transformers writes");
  if (facts.pooler) facts.output_kind = OutputKind::Features;
  facts.notes.push_back(std::string("Hugging Face ") + (deit ? "DeiT" : "ViT") + " layout renamed to timm's keys" +
                        (facts.pooler ? "; output: the pooler's tanh(dense(class token))" : ""));
}

// ---- OpenAI CLIP's visual tower (openai/CLIP model.py VisionTransformer; timm's _convert_openai_clip).

}  // namespace

void convert_openai_clip(Checkpoint& checkpoint, LayoutFacts& facts) {
  auto& tensors = checkpoint.tensors;
  if (tensors.count("visual.conv1.weight") || any_key_starts_with(checkpoint, "visual.")) {
    size_t other = 0;
    std::map<std::string, torch::Tensor> visual;
    for (auto& [key, tensor] : tensors)
      if (starts_with(key, "visual."))
        visual[key.substr(7)] = tensor;
      else if (key != "input_resolution")  // OpenAI's archives record the input size beside the weights
        ++other;
    tensors.swap(visual);
    if (other)
      facts.notes.push_back("full CLIP state_dict: the visual tower's keys taken, " + std::to_string(other) +
                            " text-tower tensors left aside");
  }
  if (tensors.count("attnpool.c_proj.weight") || tensors.count("layer1.0.conv1.weight"))
    throw CheckpointError(
        "an OpenAI CLIP ResNet visual tower (RN50, RN101, ...): it is a CNN with attention pooling, not a ViT; "
        "attnscope opens CLIP's ViT towers (ViT-B/32, ViT-B/16, ViT-L/14)");
  for (const char* needed : {"conv1.weight", "class_embedding", "positional_embedding", "proj"})
    if (!tensors.count(needed)) throw CheckpointError(std::string("OpenAI CLIP visual tower without '") + needed + "'");
  facts.layout = CheckpointLayout::OpenAiClip;
  const auto& conv = tensors.at("conv1.weight");
  if (conv.dim() != 4) throw CheckpointError("CLIP conv1.weight must be [width, 3, P, P]");
  const int64_t width = conv.size(0);
  if (width % 64)
    throw CheckpointError("CLIP width " + std::to_string(width) + " is not a multiple of 64 (heads = width / 64)");
  facts.heads = int(width / 64);
  facts.layer_norm_eps = 1e-5;
  facts.activation = MlpActivation::QuickGelu;
  facts.output_kind = OutputKind::Embedding;
  facts.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  facts.std = {0.26862954f, 0.26130258f, 0.27577711f};
  facts.normalization_source = "OpenAI CLIP";
  // clip.py's _transform: Resize(n_px, BICUBIC) of the short side, CenterCrop(n_px): timm's
  // transform with crop_pct 1 (not timm's default 0.875).
  facts.resize = ResizeMode::Timm;
  facts.crop_pct = 1.0;
  facts.interpolation = Interpolation::Bicubic;
  facts.preprocessing_source = "OpenAI CLIP (clip.py _transform)";

  const NameTable block_names{{"ln_1.", "norm1."},
                              {"attn.in_proj_weight", "attn.qkv.weight"},
                              {"attn.in_proj_bias", "attn.qkv.bias"},
                              {"attn.out_proj.", "attn.proj."},
                              {"ln_2.", "norm2."},
                              {"mlp.c_fc.", "mlp.fc1."},
                              {"mlp.c_proj.", "mlp.fc2."},
                              {"ls_1.gamma", "ls1.gamma"},  // open_clip's layer scale
                              {"ls_2.gamma", "ls2.gamma"}};
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : tensors) {
    std::string name = block_key(key, "transformer.resblocks.", block_names);
    if (!name.empty()) {
      renamed[name] = tensor;
      continue;
    }
    name = key;
    if (key == "conv1.weight") {
      name = "patch_embed.proj.weight";
    } else if (key == "class_embedding") {
      renamed["cls_token"] = tensor.reshape({1, 1, -1});
      continue;
    } else if (key == "positional_embedding") {
      renamed["pos_embed"] = tensor.unsqueeze(0);
      continue;
    } else if (key == "proj") {
      if (tensor.dim() != 2) throw CheckpointError("CLIP proj must be [width, embedding]");
      renamed["head.weight"] = tensor.t().contiguous();  // x @ proj == Linear without bias
      continue;
    } else if (starts_with(key, "ln_pre.")) {
      name = "norm_pre." + key.substr(7);
    } else if (starts_with(key, "ln_post.")) {
      name = "norm." + key.substr(8);
    }
    renamed[name] = tensor;
  }
  tensors.swap(renamed);
  facts.notes.push_back("OpenAI CLIP visual tower: " + std::to_string(facts.heads) +
                        " heads (width / 64), QuickGELU, output: the image embedding (ln_post(class) @ proj)");
}

namespace {

// ---- Hugging Face transformers CLIP's vision tower (modeling_clip.py CLIPVisionTransformer; timm's
// CLIP converter's names): CLIPModel, CLIPVisionModelWithProjection or CLIPVisionModel.

// CLIPConfig's vision_config (a legacy vision_config_dict replaces it, as CLIPConfig.__init__ does),
// with transformers' CLIPVisionConfig defaults for what it lacks, and the image processor's file.
void read_hf_clip_configs(const fs::path& folder, LayoutFacts& facts) {
  facts.layer_norm_eps = 1e-5;
  facts.activation = MlpActivation::QuickGelu;
  // CLIPImageProcessor's defaults (OPENAI_CLIP_MEAN / STD) unless preprocessor_config.json says otherwise.
  facts.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  facts.std = {0.26862954f, 0.26130258f, 0.27577711f};
  facts.normalization_source = "OpenAI CLIP (CLIPImageProcessor's default)";
  const auto config = read_json_beside(folder, "config.json");
  if (config.is_null()) {
    facts.notes.push_back(
        "no config.json beside the Hugging Face CLIP weights: vision heads (width / 64), QuickGELU and LayerNorm eps "
        "1e-5 assumed");
    read_hf_preprocessor(folder, facts);
    return;
  }
  nlohmann::json vision = nlohmann::json::object();
  if (config.contains("vision_config_dict") && config["vision_config_dict"].is_object())
    vision = config["vision_config_dict"];
  else if (config.contains("vision_config") && config["vision_config"].is_object())
    vision = config["vision_config"];
  else if (config.contains("model_type") && config["model_type"] == "clip_vision_model")
    vision = config;  // CLIPVisionModel(WithProjection) saves its CLIPVisionConfig at the top level
  auto given = [&](const char* key) { return vision.contains(key) && !vision[key].is_null(); };
  facts.heads = 12;  // CLIPVisionConfig's default
  if (given("num_attention_heads")) {
    if (!vision["num_attention_heads"].is_number_integer() || vision["num_attention_heads"].get<int64_t>() < 1 ||
        vision["num_attention_heads"].get<int64_t>() > 4096)
      throw CheckpointError("config.json vision_config.num_attention_heads must be a whole number from 1 to 4096");
    facts.heads = vision["num_attention_heads"].get<int>();
  }
  if (given("layer_norm_eps")) {
    const auto& eps = vision["layer_norm_eps"];
    if (!eps.is_number() || !(eps.get<double>() > 0) || !(eps.get<double>() < 1))
      throw CheckpointError("config.json vision_config.layer_norm_eps must be a number in (0, 1)");
    facts.layer_norm_eps = eps.get<double>();
  }
  const std::string act = given("hidden_act") && vision["hidden_act"].is_string()
                              ? vision["hidden_act"].get<std::string>()
                              : (given("hidden_act") ? "?" : "quick_gelu");
  if (act == "gelu")
    facts.activation = MlpActivation::Gelu;
  else if (act != "quick_gelu")
    throw CheckpointError("config.json vision_config.hidden_act '" + excerpt(act) +
                          "' is not supported (attnscope runs gelu and quick_gelu ViTs)");
  std::ostringstream eps;
  eps << facts.layer_norm_eps;
  facts.notes.push_back("config.json vision_config: " + std::to_string(facts.heads) + " heads, " + act +
                        ", LayerNorm eps " + eps.str());
  read_hf_preprocessor(folder, facts);
}

void convert_hugging_face_clip(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts) {
  auto& tensors = checkpoint.tensors;
  if (tensors.count("classifier.weight"))
    throw CheckpointError(
        "a Hugging Face CLIPForImageClassification (a classifier on the mean of the patch tokens) is not supported; "
        "CLIPModel and CLIPVisionModel(WithProjection) are");
  facts.layout = CheckpointLayout::HfClip;
  facts.pos_interpolation = {/*antialias=*/false, /*offset=*/0.0};  // interpolate_pos_encoding
  read_hf_clip_configs(folder_of(path), facts);
  const std::string base = "vision_model.";
  // Split q, k, v projections become timm's stacked qkv.
  for (int layer = 0;; ++layer) {
    const std::string attention = base + "encoder.layers." + std::to_string(layer) + ".self_attn.";
    if (!tensors.count(attention + "q_proj.weight") && !tensors.count(attention + "k_proj.weight")) break;
    for (const std::string kind : {"weight", "bias"}) {
      std::vector<torch::Tensor> parts;
      for (const std::string projection : {"q_proj.", "k_proj.", "v_proj."}) {
        auto it = tensors.find(attention + projection + kind);
        if (it == tensors.end())
          throw CheckpointError("missing tensor '" + attention + projection + kind +
                                "' (q, k and v projections come together)");
        parts.push_back(it->second);
        tensors.erase(it);
      }
      for (const auto& part : parts)
        if (part.dim() != parts[0].dim() || !part.sizes().equals(parts[0].sizes()))
          throw CheckpointError("tensors '" + attention + "{q,k,v}_proj." + kind + "' differ in shape");
      tensors["blocks." + std::to_string(layer) + ".attn.qkv." + kind] = torch::cat(parts, 0);
    }
  }
  if (tensors.erase(base + "embeddings.position_ids"))
    facts.notes.push_back("skipped vision_model.embeddings.position_ids (an arange buffer older transformers saved)");
  const NameTable block_names{{"layer_norm1.", "norm1."},
                              {"self_attn.out_proj.", "attn.proj."},
                              {"layer_norm2.", "norm2."},
                              {"mlp.fc1.", "mlp.fc1."},
                              {"mlp.fc2.", "mlp.fc2."}};
  std::map<std::string, torch::Tensor> renamed;
  for (auto& [key, tensor] : tensors) {
    const std::string block = block_key(key, base + "encoder.layers.", block_names);
    if (!block.empty()) {
      renamed[block] = tensor;
    } else if (key == base + "embeddings.class_embedding") {
      if (tensor.dim() != 1) throw CheckpointError("tensor '" + key + "' must be [width]");
      renamed["cls_token"] = tensor.reshape({1, 1, -1});
    } else if (key == base + "embeddings.position_embedding.weight") {
      if (tensor.dim() != 2) throw CheckpointError("tensor '" + key + "' must be [positions, width]");
      renamed["pos_embed"] = tensor.unsqueeze(0);
    } else if (key == base + "embeddings.patch_embedding.weight") {
      renamed["patch_embed.proj.weight"] = tensor;
    } else if (starts_with(key, base + "pre_layrnorm.")) {
      renamed["norm_pre." + key.substr(base.size() + 13)] = tensor;
    } else if (starts_with(key, base + "post_layernorm.")) {
      renamed["norm." + key.substr(base.size() + 15)] = tensor;
    } else if (key == "visual_projection.weight") {
      renamed["head.weight"] = tensor;  // a Linear without bias, already [embedding, width]
    } else {
      renamed[key] = tensor;
    }
  }
  tensors.swap(renamed);
  const bool projection = tensors.count("head.weight") > 0;
  facts.output_kind = projection ? OutputKind::Embedding : OutputKind::Features;
  facts.notes.push_back(std::string("Hugging Face CLIP vision tower renamed to timm's keys; output: ") +
                        (projection ? "the image embedding (visual_projection(post_layernorm(class)))"
                                    : "post_layernorm(class), no projection (a CLIPVisionModel)"));
}

// ---- DINOv2 hub files (facebookresearch/dinov2 DinoVisionTransformer).

void convert_dinov2(Checkpoint& checkpoint, LayoutFacts& facts) {
  auto& tensors = checkpoint.tensors;
  facts.layout = CheckpointLayout::Dinov2;
  if (tensors.count("mask_token")) {
    tensors.erase("mask_token");
    facts.notes.push_back("skipped mask_token (used only for masked-image training)");
  }
  const bool registers = tensors.count("register_tokens") > 0;
  if (registers) {
    tensors["reg_token"] = tensors.at("register_tokens");
    tensors.erase("register_tokens");
  }
  if (any_key_starts_with(checkpoint, "blocks.0.mlp.w12")) {
    // ViT-g/14's SwiGLUFFNFused: w12 holds the gate and the value (silu(x1) * x2), as timm's packed fc1.
    replace_in_keys(checkpoint, {{".mlp.w12.", ".mlp.fc1."}, {".mlp.w3.", ".mlp.fc2."}});
    facts.notes.push_back("DINOv2's SwiGLU MLP (mlp.w12, mlp.w3) read as timm's packed SwiGLU (mlp.fc1, mlp.fc2)");
  }
  // block_chunks > 0 stores blocks as blocks.<chunk>.<index>: indices are global, drop the chunk.
  if (any_key_starts_with(checkpoint, "blocks.0.0.")) {
    std::map<std::string, torch::Tensor> renamed;
    for (auto& [key, tensor] : tensors) {
      std::string name = key;
      if (starts_with(key, "blocks.")) {
        const auto dot = key.find('.', 7);
        if (dot != std::string::npos) name = "blocks." + key.substr(dot + 1);
      }
      renamed[name] = tensor;
    }
    tensors.swap(renamed);
  }
  facts.pos_embed_prefix_tokens = 1;  // the class token; registers are inserted after positions
  // The hub's settings: register models resize positions by size with antialias, the others by
  // the scale (grid + 0.1) / trained grid without (dinov2/hub/backbones.py).
  facts.pos_interpolation = registers ? PositionInterpolation{true, 0.0} : PositionInterpolation{false, 0.1};
  facts.notes.push_back(std::string("DINOv2 layout") + (registers ? " with register tokens" : "") +
                        (tensors.count("head.weight") ? "" : ": output is the normed class token"));
}

}  // namespace

nlohmann::json read_json_beside(const fs::path& folder, const std::string& name) {
  const fs::path file = folder / name;
  std::error_code error;
  if (!fs::exists(file, error)) return nullptr;
  try {
    auto parsed = read_json_file(file.string(), file.string(), size_t(16) << 20);
    if (!parsed.is_object()) throw std::invalid_argument(file.string() + " is not a JSON object");
    return parsed;
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string(e.what()) + ": fix or remove it");
  }
}

void LayoutFacts::apply_to(VitArch& arch) const {
  arch.source_layout = layout;
  if (layer_norm_eps > 0) arch.layer_norm_eps = layer_norm_eps;
  arch.pooler = pooler;
  arch.pos_interpolation = pos_interpolation;
  for (auto& block : arch.blocks)
    if (block.gate == MlpGate::None) block.activation = activation;  // a gated MLP's is its own (SiLU)
  arch.output_kind = output_kind ? *output_kind : arch.num_classes > 0 ? OutputKind::Logits : OutputKind::Features;
}

std::string resolve_weights_file(const std::string& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return path;
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "open_clip_model.safetensors",
                           "pytorch_model.bin", "open_clip_pytorch_model.bin"})
    if (fs::is_regular_file(fs::path(path) / name, error)) return (fs::path(path) / name).string();
  throw CheckpointError(path +
                        " is a folder without model.safetensors, model.safetensors.index.json (shards) or "
                        "pytorch_model.bin (a Hugging Face model folder holds one of them beside config.json)");
}

namespace {

// timm's Eva and CaiT keep their layer scale as parameters of the block (gamma_1, gamma_2), its ViT
// in a module (ls1.gamma, ls2.gamma): the same values under the ViT's names.
void rename_eva_layer_scale(Checkpoint& checkpoint, LayoutFacts& facts) {
  std::vector<std::pair<std::string, std::string>> renames;
  bool class_attention = false;  // CaiT names its layer scale so too, in both kinds of block
  for (const auto& [key, tensor] : checkpoint.tensors) {
    class_attention = class_attention || starts_with(key, "blocks_token_only.");
    if (!starts_with(key, "blocks.") && !starts_with(key, "blocks_token_only.")) continue;
    for (const auto& [eva, vit] :
         {std::pair<std::string, std::string>{".gamma_1", ".ls1.gamma"}, {".gamma_2", ".ls2.gamma"}})
      if (key.size() > eva.size() && key.compare(key.size() - eva.size(), eva.size(), eva) == 0)
        renames.emplace_back(key, key.substr(0, key.size() - eva.size()) + vit);
  }
  if (renames.empty()) return;
  for (const auto& [from, to] : renames) {
    checkpoint.tensors[to] = checkpoint.tensors[from];
    checkpoint.tensors.erase(from);
  }
  facts.eva_layer_scale = !class_attention;
  facts.notes.push_back(std::string("timm's ") + (class_attention ? "CaiT" : "EVA") +
                        " layer scale (gamma_1, gamma_2) read as ls1.gamma, ls2.gamma");
}

}  // namespace

LayoutFacts adopt_known_layout(Checkpoint& checkpoint, const std::string& path) {
  LayoutFacts facts;
  const auto& tensors = checkpoint.tensors;
  if (const nlohmann::json open_clip = read_open_clip_config(path); is_open_clip(checkpoint, open_clip))
    convert_open_clip(checkpoint, open_clip, facts);
  else if (is_hf_dinov3(checkpoint))
    convert_hf_dinov3(checkpoint, path, facts);
  else if (is_hf_siglip(checkpoint))
    convert_hf_siglip(checkpoint, path, facts);
  else if (is_meta_dinov3(checkpoint))
    convert_meta_dinov3(checkpoint, facts);
  else if (any_key_starts_with(checkpoint, "vit.embeddings.") || any_key_starts_with(checkpoint, "deit.embeddings.") ||
           tensors.count("embeddings.patch_embeddings.projection.weight"))
    convert_hugging_face(checkpoint, path, facts);
  else if (any_key_starts_with(checkpoint, "vision_model.embeddings."))
    convert_hugging_face_clip(checkpoint, path, facts);
  else if (tensors.count("visual.conv1.weight") || tensors.count("visual.class_embedding") ||
           (tensors.count("conv1.weight") && tensors.count("class_embedding")) ||
           tensors.count("visual.attnpool.c_proj.weight"))
    convert_openai_clip(checkpoint, facts);
  else if (tensors.count("register_tokens") || tensors.count("mask_token"))
    convert_dinov2(checkpoint, facts);
  else
    read_timm_pretrained_cfg(checkpoint, path, facts);
  rename_eva_layer_scale(checkpoint, facts);
  // BEiT's (and Microsoft's) files may store the index of their relative position bias: it is rebuilt.
  size_t indices = 0;
  for (auto it = checkpoint.tensors.begin(); it != checkpoint.tensors.end();)
    if (starts_with(it->first, "blocks.") && it->first.size() > 29 &&
        it->first.compare(it->first.size() - 29, 29, ".attn.relative_position_index") == 0) {
      it = checkpoint.tensors.erase(it);
      ++indices;
    } else {
      ++it;
    }
  if (indices > 0)
    facts.notes.push_back("the file's relative_position_index (" + std::to_string(indices) +
                          " blocks) skipped: rebuilt as timm builds it");
  return facts;
}

}  // namespace attnscope
