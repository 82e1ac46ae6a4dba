// The layouts DINOv3 and SigLIP come in besides timm's, renamed to timm's keys as timm's own
// converters map them (timm/models/eva.py checkpoint_filter_fn for Meta's DINOv3 files,
// vision_transformer.py _convert_... for SigLIP), with what each layout fixes that the keys cannot show.
#include "core/excerpt.h"
#include "core/number_text.h"
#include "models/checkpoint_keys.h"
#include "models/checkpoint_layout_tools.h"
#include "models/checkpoint_layouts.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>

namespace attnscope {

using namespace layouts;

namespace {

// A whole number from 1 to 4096 in a Hugging Face config, or `fallback` when it is absent.
int config_count(const nlohmann::json& config, const char* key, int fallback, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  const auto& value = config[key];
  if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 4096)
    throw CheckpointError(where + " " + key + " must be a whole number from 1 to 4096");
  return value.get<int>();
}

double config_eps(const nlohmann::json& config, double fallback, const std::string& where) {
  if (!config.contains("layer_norm_eps") || config["layer_norm_eps"].is_null()) return fallback;
  const auto& eps = config["layer_norm_eps"];
  if (!eps.is_number() || !(eps.get<double>() > 0) || !(eps.get<double>() < 1))
    throw CheckpointError(where + " layer_norm_eps must be a number in (0, 1)");
  return eps.get<double>();
}

MlpActivation config_activation(const nlohmann::json& config, MlpActivation fallback, const std::string& where) {
  if (!config.contains("hidden_act") || config["hidden_act"].is_null()) return fallback;
  const std::string name = config["hidden_act"].is_string() ? config["hidden_act"].get<std::string>() : "?";
  try {
    return parse_mlp_activation(name);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(where + " hidden_act: " + e.what());
  }
}

// q, k and v projections under `attention` stacked into timm's qkv (a missing bias, as DINOv3's
// key, counts as zero where the others have one).
void stack_qkv(std::map<std::string, torch::Tensor>& tensors, const std::string& attention, const std::string& q,
               const std::string& k, const std::string& v, const std::string& to) {
  for (const std::string kind : {"weight", "bias"}) {
    std::vector<torch::Tensor> parts;
    int present = 0;
    for (const std::string& name : {q, k, v}) {
      auto it = tensors.find(attention + name + "." + kind);
      parts.push_back(it == tensors.end() ? torch::Tensor() : it->second);
      if (it != tensors.end()) {
        ++present;
        tensors.erase(it);
      }
    }
    if (present == 0) continue;
    if (kind == "weight" && present != 3)
      throw CheckpointError("missing a query, key or value weight under '" + excerpt(attention) +
                            "': the checkpoint is incomplete or damaged");
    for (auto& part : parts)
      if (!part.defined()) {
        const auto& other = parts[0].defined() ? parts[0] : parts[2];
        part = torch::zeros_like(other);
      }
    tensors[to + kind] = torch::cat(parts, 0);
  }
}

void drop(Checkpoint& checkpoint, const std::string& key, LayoutFacts& facts, const std::string& why) {
  if (checkpoint.tensors.erase(key)) facts.notes.push_back("skipped " + key + " (" + why + ")");
}

RotaryArch dinov3_rope(double base) {
  RotaryArch rope;
  rope.kind = RotaryKind::DinoV3;
  rope.temperature = base;
  rope.rotate_half = true;
  return rope;
}

}  // namespace

// ---- transformers' DINOv3ViTModel (models/dinov3_vit/modeling_dinov3_vit.py).

bool is_hf_dinov3(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("embeddings.register_tokens") ||
         checkpoint.tensors.count("dinov3_vit.embeddings.register_tokens") ||
         checkpoint.tensors.count("layer.0.layer_scale1.lambda1");
}

void convert_hf_dinov3(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts) {
  facts.layout = CheckpointLayout::HfDinov3;
  if (any_key_starts_with(checkpoint, "dinov3_vit.")) rename_prefix(checkpoint, "dinov3_vit.", "");
  const auto config = read_json_beside(folder_of(path), "config.json");
  const std::string where = "config.json";
  double base = 100.0;
  if (config.is_null()) {
    facts.notes.push_back(
        "no config.json beside the Hugging Face DINOv3 weights: heads (width / 64), LayerNorm "
        "eps 1e-5 and rope_theta 100 assumed, as the released models have them");
    facts.layer_norm_eps = 1e-5;
  } else {
    if (config.contains("model_type") && config["model_type"] != "dinov3_vit")
      throw CheckpointError("config.json says model_type " + excerpt(config["model_type"].dump()) +
                            "; these keys are transformers' DINOv3 (dinov3_vit)");
    facts.heads = config_count(config, "num_attention_heads", 0, where);
    facts.layer_norm_eps = config_eps(config, 1e-6, where);
    facts.activation = config_activation(config, MlpActivation::Gelu, where);
    if (config.contains("rope_theta") && config["rope_theta"].is_number()) base = config["rope_theta"].get<double>();
    facts.notes.push_back("config.json: " + std::to_string(facts.heads) + " heads, LayerNorm eps " +
                          format_double(facts.layer_norm_eps) + ", rope_theta " + format_double(base));
  }
  facts.rope = dinov3_rope(base);
  facts.pool = GlobalPool::Token;  // pooler_output: the normed class token
  facts.output_kind = OutputKind::Features;
  auto& tensors = checkpoint.tensors;
  drop(checkpoint, "embeddings.mask_token", facts, "used only for masked-image training");
  for (int layer = 0; tensors.count("layer." + std::to_string(layer) + ".norm1.weight"); ++layer) {
    const std::string prefix = "layer." + std::to_string(layer) + ".";
    stack_qkv(tensors, prefix + "attention.", "q_proj", "k_proj", "v_proj",
              "blocks." + std::to_string(layer) + ".attn.qkv.");
  }
  const bool gated = any_key_starts_with(checkpoint, "layer.0.mlp.gate_proj.");
  const NameTable block_names{{"norm1.", "norm1."},
                              {"norm2.", "norm2."},
                              {"attention.o_proj.", "attn.proj."},
                              {"layer_scale1.lambda1", "ls1.gamma"},
                              {"layer_scale2.lambda1", "ls2.gamma"},
                              {"mlp.gate_proj.", "mlp.fc1_g."},
                              {"mlp.up_proj.", gated ? "mlp.fc1_x." : "mlp.fc1."},
                              {"mlp.down_proj.", "mlp.fc2."}};
  rename_blocks(checkpoint, "layer.", block_names);
  rename_keys(checkpoint, {{"embeddings.cls_token", "cls_token"},
                           {"embeddings.register_tokens", "reg_token"},
                           {"embeddings.patch_embeddings.", "patch_embed.proj."}});
  read_hf_preprocessor(folder_of(path), facts);
  facts.notes.push_back(
      "Hugging Face DINOv3 layout renamed to timm's keys; output: the normed class token "
      "(pooler_output)");
}

// ---- transformers' SiglipModel / SiglipVisionModel (models/siglip/modeling_siglip.py): the vision
// tower; the attention-pool head's nn.MultiheadAttention is timm's AttentionPoolLatent.

bool is_hf_siglip(const Checkpoint& checkpoint) {
  return any_key_starts_with(checkpoint, "vision_model.head.") ||
         (checkpoint.tensors.count("vision_model.embeddings.position_embedding.weight") &&
          !checkpoint.tensors.count("vision_model.embeddings.class_embedding"));
}

void convert_hf_siglip(Checkpoint& checkpoint, const std::string& path, LayoutFacts& facts) {
  facts.layout = CheckpointLayout::HfSiglip;
  auto& tensors = checkpoint.tensors;
  const auto config = read_json_beside(folder_of(path), "config.json");
  nlohmann::json vision = nlohmann::json::object();
  if (config.is_object() && config.contains("model_type")) {
    const auto type = config["model_type"];
    if (type == "siglip2")
      throw CheckpointError(
          "config.json says model_type siglip2: SigLIP 2's NaFlex models (patches as a linear layer over flattened "
          "pixels, positions resized per image) are not read; the fixed-resolution SigLIP 2 files "
          "(model_type siglip) and timm's vit_*_siglip_* are");
    if (type != "siglip" && type != "siglip_vision_model")
      throw CheckpointError("config.json says model_type " + excerpt(type.dump()) +
                            "; these keys are transformers' SigLIP (siglip, siglip_vision_model)");
    vision = type == "siglip" && config.contains("vision_config") && config["vision_config"].is_object()
                 ? config["vision_config"]
                 : config;
  }
  const std::string where = "config.json vision_config";
  // SiglipVisionConfig's defaults where the config leaves a value out.
  facts.heads = config_count(vision, "num_attention_heads", 12, where);
  facts.layer_norm_eps = config_eps(vision, 1e-6, where);
  facts.activation = config_activation(vision, MlpActivation::GeluTanh, where);
  facts.notes.push_back(std::string(config.is_null() ? "no config.json beside the SigLIP weights: SiglipVisionConfig's "
                                                       "defaults, "
                                                     : "config.json vision_config: ") +
                        std::to_string(facts.heads) + " heads, " + to_string(facts.activation) + ", LayerNorm eps " +
                        format_double(facts.layer_norm_eps));
  if (!any_key_starts_with(checkpoint, "vision_model.head."))
    throw CheckpointError(
        "a SigLIP vision tower without its attention-pool head (vision_use_head false) has no pooled output; "
        "attnscope reads the towers that have one");
  // The text tower was taken out before (models/clip_text_checkpoint.h); anything else beside the
  // vision tower is said, not silently dropped.
  size_t text = 0;
  for (auto it = tensors.begin(); it != tensors.end();)
    if (!starts_with(it->first, "vision_model.")) {
      ++text;
      it = tensors.erase(it);
    } else {
      ++it;
    }
  if (text > 0)
    facts.notes.push_back(std::to_string(text) + " tensor(s) beside the vision tower and the text tower are not read");
  rename_prefix(checkpoint, "vision_model.", "");
  for (int layer = 0; tensors.count("encoder.layers." + std::to_string(layer) + ".layer_norm1.weight"); ++layer) {
    const std::string prefix = "encoder.layers." + std::to_string(layer) + ".self_attn.";
    stack_qkv(tensors, prefix, "q_proj", "k_proj", "v_proj", "blocks." + std::to_string(layer) + ".attn.qkv.");
  }
  const NameTable block_names{{"layer_norm1.", "norm1."},
                              {"layer_norm2.", "norm2."},
                              {"self_attn.out_proj.", "attn.proj."},
                              {"mlp.fc1.", "mlp.fc1."},
                              {"mlp.fc2.", "mlp.fc2."}};
  rename_blocks(checkpoint, "encoder.layers.", block_names);
  // nn.MultiheadAttention's in_proj rows are [q; k; v]: the latent's query, then the tokens' kv.
  for (const std::string kind : {"weight", "bias"}) {
    auto it = tensors.find("head.attention.in_proj_" + kind);
    if (it == tensors.end()) continue;
    const torch::Tensor in_proj = it->second;
    tensors.erase(it);
    if (in_proj.dim() < 1 || in_proj.size(0) % 3 != 0)
      throw CheckpointError("head.attention.in_proj_" + kind + " has shape " + shape_text(in_proj.sizes()) +
                            ": not three stacked projections");
    const int64_t width = in_proj.size(0) / 3;
    tensors["attn_pool.q." + kind] = in_proj.narrow(0, 0, width);
    tensors["attn_pool.kv." + kind] = in_proj.narrow(0, width, 2 * width);
  }
  rename_keys(checkpoint, {{"embeddings.patch_embedding.", "patch_embed.proj."},
                           {"post_layernorm.", "norm."},
                           {"head.probe", "attn_pool.latent"},
                           {"head.attention.out_proj.", "attn_pool.proj."},
                           {"head.layernorm.", "attn_pool.norm."},
                           {"head.mlp.", "attn_pool.mlp."}});
  if (auto it = tensors.find("embeddings.position_embedding.weight"); it != tensors.end()) {
    tensors["pos_embed"] = it->second.unsqueeze(0);  // nn.Embedding [N, C]: the patches' positions, no class slot
    tensors.erase("embeddings.position_embedding.weight");
  }
  facts.pos_embed_prefix_tokens = 0;
  facts.pos_interpolation = {/*antialias=*/false, /*offset=*/0.0};  // interpolate_pos_encoding: bicubic, size=
  facts.pool = GlobalPool::AttentionPool;
  facts.output_kind = OutputKind::Embedding;  // pooler_output: the image embedding
  // SiglipImageProcessor's defaults: mean and std 0.5, a squashing resize.
  facts.mean = {0.5f, 0.5f, 0.5f};
  facts.std = {0.5f, 0.5f, 0.5f};
  facts.normalization_source = "SigLIP (SiglipImageProcessor's default)";
  read_hf_preprocessor(folder_of(path), facts);
  facts.notes.push_back(
      "Hugging Face SigLIP layout renamed to timm's keys; output: the attention-pool head's "
      "image embedding (pooler_output)");
}

// ---- Meta's DINOv3 files (facebookresearch/dinov3 models/vision_transformer.py, hub/backbones.py).

bool is_meta_dinov3(const Checkpoint& checkpoint) {
  return checkpoint.tensors.count("storage_tokens") || checkpoint.tensors.count("rope_embed.periods");
}

void convert_meta_dinov3(Checkpoint& checkpoint, LayoutFacts& facts) {
  facts.layout = CheckpointLayout::Dinov3;
  auto& tensors = checkpoint.tensors;
  if (any_key_starts_with(checkpoint, "cls_norm."))
    throw CheckpointError(
        "this DINOv3 file has separate norms for the class and patch tokens (cls_norm: ViT-7B's "
        "untie_cls_and_patch_norms), which attnscope does not run");
  drop(checkpoint, "mask_token", facts, "used only for masked-image training");
  for (auto it = tensors.begin(); it != tensors.end();)
    it = starts_with(it->first, "local_cls_norm.") ? tensors.erase(it) : std::next(it);
  RotaryArch rope = dinov3_rope(100.0);
  if (auto it = tensors.find("rope_embed.periods"); it != tensors.end()) {
    const torch::Tensor periods = it->second.to(torch::kFloat32).flatten().contiguous();
    rope.periods.assign(periods.data_ptr<float>(), periods.data_ptr<float>() + periods.numel());
    for (float period : rope.periods)
      if (!(period > 0) || !std::isfinite(period))
        throw CheckpointError("rope_embed.periods holds " + std::to_string(period) +
                              ": a rotary period must be a positive number");
    // One period per quarter of a head: the file shows the head width, and so the head count.
    const auto patch = tensors.find("patch_embed.proj.weight");
    const int64_t head_width = 4 * int64_t(rope.periods.size());
    if (patch != tensors.end() && patch->second.dim() == 4 && head_width > 0 &&
        patch->second.size(0) % head_width == 0) {
      facts.heads = int(patch->second.size(0) / head_width);
      facts.notes.push_back(std::to_string(facts.heads) + " heads: rope_embed.periods has " +
                            std::to_string(rope.periods.size()) + " periods, a quarter of the head width " +
                            std::to_string(head_width));
    }
    tensors.erase(it);
  }
  if (auto it = tensors.find("storage_tokens"); it != tensors.end()) {
    tensors["reg_token"] = it->second;
    tensors.erase(it);
  }
  // LinearKMaskedBias: the qkv bias times its mask (the key's part is 0).
  std::vector<std::string> masks;
  for (const auto& [key, tensor] : tensors)
    if (key.size() > 14 && key.compare(key.size() - 14, 14, ".qkv.bias_mask") == 0) masks.push_back(key);
  for (const std::string& mask : masks) {
    const std::string bias = mask.substr(0, mask.size() - 5);  // ".qkv.bias"
    auto it = tensors.find(bias);
    if (it != tensors.end()) {
      const torch::Tensor& factor = tensors.at(mask);
      if (!factor.sizes().equals(it->second.sizes()))
        throw CheckpointError(mask + " has shape " + shape_text(factor.sizes()) + ", its bias " +
                              shape_text(it->second.sizes()));
      it->second = it->second.to(torch::kFloat32) * factor.to(torch::kFloat32);
    }
    tensors.erase(mask);
  }
  // SwiGLUFFN: w1 gates, w2 is the value, w3 projects back (timm's fc1_g, fc1_x, fc2).
  replace_in_keys(checkpoint, {{".mlp.w1.", ".mlp.fc1_g."}, {".mlp.w2.", ".mlp.fc1_x."}, {".mlp.w3.", ".mlp.fc2."}});
  facts.rope = rope;
  facts.pool = GlobalPool::Token;  // forward(): head(x_norm_clstoken), the head an Identity
  facts.output_kind = OutputKind::Features;
  facts.layer_norm_eps = 1e-5;  // hub/backbones.py: every released ViT is "layernormbf16"
  facts.assumed.push_back({"eps", 1e-5, "Meta's DINOv3 files do not record it: the released models' layernormbf16"});
  facts.notes.push_back(std::string("Meta's DINOv3 layout: storage tokens as registers, the k-masked qkv bias, ") +
                        (rope.periods.empty() ? "rotary base 100" : "the file's rotary periods") +
                        ", LayerNorm eps 1e-5 (the released models' layernormbf16); output: the normed class token");
}

// ---- open_clip folders (open_clip_config.json beside open_clip_model.safetensors / _pytorch_model.bin):
// its ViT towers in OpenAI CLIP's keys, or a timm trunk (visual.trunk.*) with a projection head.

nlohmann::json read_open_clip_config(const std::string& path) {
  return read_json_beside(folder_of(path), "open_clip_config.json");
}

namespace {

// The model_cfg's vision_cfg, or an empty object.
nlohmann::json open_clip_vision(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("model_cfg") || !config["model_cfg"].is_object()) return {};
  const auto& model = config["model_cfg"];
  return model.contains("vision_cfg") && model["vision_cfg"].is_object() ? model["vision_cfg"] : nlohmann::json();
}

void read_open_clip_preprocess(const nlohmann::json& config, LayoutFacts& facts) {
  if (!config.contains("preprocess_cfg") || !config["preprocess_cfg"].is_object()) return;
  const auto& cfg = config["preprocess_cfg"];
  auto three = [&](const char* key, std::array<float, 3>& out) {
    if (!cfg.contains(key)) return false;
    if (!cfg[key].is_array() || cfg[key].size() != 3)
      throw CheckpointError(std::string("open_clip_config.json preprocess_cfg.") + key + " must be 3 numbers");
    for (size_t i = 0; i < 3; ++i) {
      if (!cfg[key][i].is_number())
        throw CheckpointError(std::string("open_clip_config.json preprocess_cfg.") + key + " must be 3 numbers");
      out[i] = cfg[key][i].get<float>();
    }
    return true;
  };
  if (three("mean", facts.mean) | three("std", facts.std))
    facts.normalization_source = "open_clip_config.json preprocess_cfg";
}

}  // namespace

bool is_open_clip(const Checkpoint& checkpoint, const nlohmann::json& config) {
  return config.is_object() && config.contains("model_cfg") && any_key_starts_with(checkpoint, "visual.");
}

void convert_open_clip(Checkpoint& checkpoint, const nlohmann::json& config, LayoutFacts& facts) {
  const nlohmann::json vision = open_clip_vision(config);
  auto& tensors = checkpoint.tensors;
  if (any_key_starts_with(checkpoint, "visual.trunk.")) {
    // A timm model: its keys under visual.trunk., its registered name in timm_model_name (read by
    // gather_arch_config as the architecture), then open_clip's head: proj (a Linear) or none.
    if (any_key_starts_with(checkpoint, "visual.head.mlp."))
      throw CheckpointError(
          "open_clip's MLP projection head (timm_proj mlp) is not read; the linear and no "
          "projection are");
    std::map<std::string, torch::Tensor> visual;
    size_t other = 0;
    for (auto& [key, tensor] : tensors) {
      if (starts_with(key, "visual.trunk."))
        visual[key.substr(13)] = tensor;
      else if (starts_with(key, "visual.head.proj."))
        visual["head." + key.substr(17)] = tensor;
      else
        ++other;
    }
    tensors.swap(visual);
    // The trunk's pooled features are the image embedding when open_clip adds no projection
    // (timm_proj 'none', SigLIP's towers: the attention-pool head's output is the embedding).
    const bool no_projection = vision.is_object() && vision.value("timm_proj", std::string()) == "none";
    if (tensors.count("head.weight") || no_projection) facts.output_kind = OutputKind::Embedding;
    facts.layout = CheckpointLayout::OpenClip;
    read_open_clip_preprocess(config, facts);
    facts.notes.push_back("open_clip with a timm trunk (" +
                          (vision.contains("timm_model_name") ? excerpt(vision["timm_model_name"].dump()) : "unnamed") +
                          "): visual.trunk.* read as timm's keys" +
                          (tensors.count("head.weight") ? ", visual.head.proj as the projection" : "") +
                          (other ? "; " + std::to_string(other) + " text-tower tensors left aside" : ""));
    return;
  }
  // open_clip's own VisionTransformer has OpenAI CLIP's keys (and ls_1 / ls_2 layer scale).
  convert_openai_clip(checkpoint, facts);
  facts.layout = CheckpointLayout::OpenClip;
  const bool quick_gelu = config["model_cfg"].value("quick_gelu", false);
  facts.activation = quick_gelu ? MlpActivation::QuickGelu : MlpActivation::Gelu;
  const int head_width = config_count(vision, "head_width", 64, "open_clip_config.json vision_cfg");
  const int width = int(tensors.at("patch_embed.proj.weight").size(0));
  if (width % head_width != 0)
    throw CheckpointError("open_clip_config.json vision_cfg.head_width " + std::to_string(head_width) +
                          " does not divide the width " + std::to_string(width));
  facts.heads = width / head_width;
  read_open_clip_preprocess(config, facts);
  facts.notes.push_back("open_clip ViT: " + std::to_string(facts.heads) + " heads (width / head_width " +
                        std::to_string(head_width) + "), " + (quick_gelu ? "QuickGELU" : "GELU") +
                        " (model_cfg.quick_gelu " + (quick_gelu ? "true" : "false") + ")");
}

}  // namespace attnscope
