#include "models/clip_text_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <sstream>
#include <tuple>

#include "core/excerpt.h"
#include "models/checkpoint_keys.h"
#include "models/checkpoint_layouts.h"
#include "models/finite_checks.h"
#include "models/model_loader.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

bool has_prefix(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

bool any_text_key_with_prefix(const Checkpoint& checkpoint, const std::string& prefix) {
  auto it = checkpoint.tensors.lower_bound(prefix);
  return it != checkpoint.tensors.end() && has_prefix(it->first, prefix);
}

// Moves every tensor whose key `is_text` accepts from `from` to `to`.
void move_keys(Checkpoint& from, Checkpoint& to, const std::function<bool(const std::string&)>& is_text) {
  for (auto it = from.tensors.begin(); it != from.tensors.end();) {
    if (is_text(it->first)) {
      to.tensors[it->first] = it->second;
      it = from.tensors.erase(it);
    } else {
      ++it;
    }
  }
}

constexpr const char* kOpenAiToken = "token_embedding.weight";
constexpr const char* kHfPrefix = "text_model.";
constexpr const char* kHfToken = "text_model.embeddings.token_embedding.weight";

bool is_openai_text_key(const std::string& key) {
  return key == kOpenAiToken || key == "positional_embedding" || has_prefix(key, "transformer.") ||
         has_prefix(key, "ln_final.") || key == "text_projection" || key == "logit_scale" || key == "context_length" ||
         key == "vocab_size";
}

bool is_hf_text_key(const std::string& key) {
  return has_prefix(key, kHfPrefix) || key == "text_projection.weight" || key == "logit_scale" || key == "logit_bias";
}

// open_clip's CustomTextCLIP (SigLIP's towers): the text tower under `text.` in OpenAI's names, its
// projection a Linear (text.text_projection.weight / .bias).
constexpr const char* kOpenClipToken = "text.token_embedding.weight";
bool is_open_clip_text_key(const std::string& key) {
  return has_prefix(key, "text.") || key == "logit_scale" || key == "logit_bias";
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// ---- Hugging Face CLIPModel -> OpenAI's names (transformers' convert_clip_original_pytorch_to_hf.py, reversed).

// What config.json says of the text tower: CLIPConfig's text_config, where a legacy text_config_dict
// (with CLIPTextConfig's defaults for what it lacks) replaces it as CLIPConfig.__init__ does; null
// without a config.json.
nlohmann::json hf_text_config(const std::string& path, std::vector<std::string>& notes) {
  std::error_code error;
  const fs::path folder = fs::is_directory(path, error) ? fs::path(path) : fs::path(path).parent_path();
  const nlohmann::json config = read_json_beside(folder, "config.json");
  if (config.is_null()) return nullptr;
  nlohmann::json text = nlohmann::json::object();
  if (config.contains("text_config_dict") && config["text_config_dict"].is_object()) {
    text = config["text_config_dict"];
    notes.push_back("config.json: text_config_dict replaces text_config (as transformers' CLIPConfig reads it)");
  } else if (config.contains("text_config") && config["text_config"].is_object()) {
    text = config["text_config"];
  } else {
    notes.push_back("config.json has no text_config: transformers' CLIPTextConfig defaults apply");
  }
  // projection_dim lives beside the sub-configs in CLIPConfig.
  if (!text.contains("projection_dim") && config.contains("projection_dim"))
    text["projection_dim"] = config["projection_dim"];
  return text;
}

// A layer's block key "text_model.encoder.layers.N.<rest>" as (N, rest), or N = -1.
std::pair<int, std::string> hf_layer_key(const std::string& key) {
  const std::string prefix = "text_model.encoder.layers.";
  if (!has_prefix(key, prefix)) return {-1, ""};
  const auto dot = key.find('.', prefix.size());
  const std::string index =
      key.substr(prefix.size(), dot == std::string::npos ? std::string::npos : dot - prefix.size());
  if (dot == std::string::npos || index.empty() || index.size() > 6 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    return {-1, ""};
  return {std::stoi(index), key.substr(dot + 1)};
}

// Renames a Hugging Face text tower to OpenAI's keys in place: q, k and v projections stacked into
// in_proj (q, k, v: nn.MultiheadAttention's order), text_projection.weight transposed (a Linear
// without bias: x @ W.T). `file_keys` gets the file's name of each renamed key, for refusals.
void convert_hf_text(Checkpoint& checkpoint, std::map<std::string, std::string>& file_keys,
                     std::vector<std::string>& notes) {
  const std::vector<std::pair<std::string, std::string>> block_names{{"self_attn.out_proj.", "attn.out_proj."},
                                                                     {"layer_norm1.", "ln_1."},
                                                                     {"layer_norm2.", "ln_2."},
                                                                     {"mlp.fc1.", "mlp.c_fc."},
                                                                     {"mlp.fc2.", "mlp.c_proj."}};
  std::map<std::string, torch::Tensor> renamed;
  std::map<int, std::map<std::string, std::string>> projections;  // layer -> "q_proj.weight" -> file key
  auto put = [&](const std::string& name, const std::string& file_key, const torch::Tensor& tensor) {
    renamed[name] = tensor;
    if (name != file_key) file_keys[name] = file_key;
  };
  for (const auto& [key, tensor] : checkpoint.tensors) {
    if (key == "text_model.embeddings.position_ids") {
      notes.push_back("skipped text_model.embeddings.position_ids (an arange buffer older transformers saved)");
      continue;
    }
    if (key == kHfToken) {
      put(kOpenAiToken, key, tensor);
    } else if (key == "text_model.embeddings.position_embedding.weight") {
      put("positional_embedding", key, tensor);
    } else if (has_prefix(key, "text_model.final_layer_norm.")) {
      put("ln_final." + key.substr(28), key, tensor);
    } else if (key == "text_projection.weight" || key == "text_model.head.weight") {
      // CLIP's text_projection (no bias), SigLIP's head (with one): both Linear, x @ W.T.
      if (tensor.dim() != 2)
        throw CheckpointError("tensor '" + key + "' has shape " + shape_text(tensor.sizes()) +
                              ", expected [embedding, width]");
      put("text_projection", key, tensor.t());
    } else if (key == "text_model.head.bias") {
      put("text_projection_bias", key, tensor);
    } else if (const auto [layer, rest] = hf_layer_key(key); layer >= 0) {
      const std::string block = "transformer.resblocks." + std::to_string(layer) + ".";
      bool done = false;
      for (const char* projection : {"q_proj.", "k_proj.", "v_proj."})
        if (has_prefix(rest, std::string("self_attn.") + projection)) {
          projections[layer][std::string(projection) + rest.substr(10 + 7)] = key;
          done = true;
        }
      for (const auto& [from, to] : block_names)
        if (!done && has_prefix(rest, from)) {
          put(block + to + rest.substr(from.size()), key, tensor);
          done = true;
        }
      if (!done) put(key, key, tensor);  // not a CLIP text key: the weight copy reports it
    } else {
      put(key, key, tensor);
    }
  }
  for (const auto& [layer, keys] : projections) {
    const std::string layer_prefix = "text_model.encoder.layers." + std::to_string(layer) + ".self_attn.";
    for (const std::string kind : {"weight", "bias"}) {
      std::vector<torch::Tensor> parts;
      for (const std::string projection : {"q_proj.", "k_proj.", "v_proj."}) {
        auto it = keys.find(projection + kind);
        if (it == keys.end()) throw CheckpointError("missing tensor '" + layer_prefix + projection + kind + "'");
        parts.push_back(checkpoint.tensors.at(it->second));
      }
      const int64_t dims = kind == "weight" ? 2 : 1;
      for (size_t i = 0; i < 3; ++i)
        if (parts[i].dim() != dims || !parts[i].sizes().equals(parts[0].sizes()))
          throw CheckpointError("tensors '" + layer_prefix + "{q,k,v}_proj." + kind + "' have shapes " +
                                shape_text(parts[0].sizes()) + ", " + shape_text(parts[1].sizes()) + ", " +
                                shape_text(parts[2].sizes()) + ": expected three equal " +
                                (dims == 2 ? "[width, width]" : "[width]"));
      const std::string name = "transformer.resblocks." + std::to_string(layer) + ".attn.in_proj_" + kind;
      put(name, layer_prefix + "q_proj." + kind + " (with k_proj, v_proj)", torch::cat(parts, 0));
    }
  }
  checkpoint.tensors.swap(renamed);
}

// open_clip's text projection as a Linear (SigLIP's: text.text_projection.weight [E, W] and .bias) in
// OpenAI's [W, E] matrix and text_projection_bias.
void convert_open_clip_projection(Checkpoint& checkpoint, std::map<std::string, std::string>& file_keys) {
  auto& tensors = checkpoint.tensors;
  if (auto it = tensors.find("text_projection.weight"); it != tensors.end()) {
    if (it->second.dim() != 2)
      throw CheckpointError("tensor 'text.text_projection.weight' has shape " + shape_text(it->second.sizes()) +
                            ", expected [embedding, width]");
    tensors["text_projection"] = it->second.t();
    file_keys["text_projection"] = "text.text_projection.weight";
    tensors.erase(it);
  }
  if (auto it = tensors.find("text_projection.bias"); it != tensors.end()) {
    tensors["text_projection_bias"] = it->second;
    file_keys["text_projection_bias"] = "text.text_projection.bias";
    tensors.erase(it);
  }
  for (auto& [key, tensor] : tensors)
    if (!file_keys.count(key) && key != "logit_scale" && key != "logit_bias") file_keys[key] = "text." + key;
}

// ---- Reading the architecture.

// A 0-d integer the archives record beside the weights (context_length, vocab_size).
int64_t recorded_integer(const torch::Tensor& tensor, const std::string& key) {
  if (tensor.numel() != 1 || !at::isIntegralType(tensor.scalar_type(), false))
    throw CheckpointError("tensor '" + key + "' has shape " + shape_text(tensor.sizes()) +
                          ": OpenAI's files record it as one integer");
  return tensor.reshape({}).to(torch::kLong).item<int64_t>();
}

int config_integer(const nlohmann::json& config, const char* key) {
  const auto& value = config.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > (int64_t(1) << 30))
    throw CheckpointError(std::string("config.json text_config.") + key + " " + excerpt(value.dump(), 40) +
                          " is not a whole number from 0 to 2^30");
  return value.get<int>();
}

// A config's whole number in [1, 2^30] or `fallback` when absent.
int config_count_or(const nlohmann::json& config, const char* key, int fallback, const std::string& where) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return fallback;
  const auto& value = config[key];
  if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > (int64_t(1) << 30))
    throw CheckpointError(where + "." + key + " " + excerpt(value.dump(), 40) +
                          " is not a whole number from 1 to 2^30");
  return value.get<int>();
}

double config_eps_or(const nlohmann::json& config, const char* key, double fallback, const std::string& where) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return fallback;
  const auto& value = config[key];
  if (!value.is_number() || !(value.get<double>() > 0) || !(value.get<double>() < 1))
    throw CheckpointError(where + "." + key + " must be a number in (0, 1)");
  return value.get<double>();
}

// The sizes a transformers text_config declares (CLIPTextConfig's, SiglipTextConfig's), each against
// what the tensors show: a contradiction means the file's parts are of different models.
void check_declared_text_sizes(const nlohmann::json& config, const std::string& where, const char* projection_entry,
                               const ClipTextArch& arch, const ShapeReader& shapes) {
  const std::vector<std::tuple<const char*, std::string, int64_t, const char*>> declared{
      {"vocab_size", kOpenAiToken, arch.vocab_size, "token ids"},
      {"hidden_size", kOpenAiToken, arch.width, "channels"},
      {"max_position_embeddings", "positional_embedding", arch.context_length, "positions"},
      {"num_hidden_layers", "transformer.resblocks.0.ln_1.weight", arch.layers, "layers"},
      {"intermediate_size", "transformer.resblocks.0.mlp.c_fc.weight", arch.mlp_hidden, "MLP channels"},
      {projection_entry, "text_projection", arch.embed_dim, "embedding values"}};
  for (const auto& [entry, key, shown, what] : declared) {
    if (!config.is_object() || !config.contains(entry) || config[entry].is_null()) continue;
    const int64_t value = config_count_or(config, entry, 0, where);
    if (value != shown)
      throw CheckpointError(where + "." + entry + " is " + std::to_string(value) + " but '" + shapes.file_key(key) +
                            "' has " + std::to_string(shown) + " " + what +
                            ": the file's parts are of different models");
  }
}

// SigLIP's text tower: transformers' SiglipTextTransformer (config.json text_config, SiglipTextConfig's
// defaults for what it leaves out) or open_clip's TextTransformer as its SigLIP configs build it
// (open_clip_config.json model_cfg.text_cfg). Both: non-causal when the config says so (transformers:
// always), pooled at the last position, a projection with a bias, sigmoid scores with logit_bias, and
// a SentencePiece vocabulary.
void siglip_text_rules(ClipTextArch& arch, CheckpointLayout layout, const nlohmann::json& config, ShapeReader& shapes,
                       ClipTextLoad& load) {
  arch.tokenizer = TextTokenizerKind::SentencePiece;
  arch.projection_bias = shapes.has("text_projection_bias");
  arch.scores = shapes.has("logit_bias") ? TextScores::Sigmoid : TextScores::Softmax;
  std::string said;
  if (layout == CheckpointLayout::HfSiglip) {
    const std::string where = "config.json text_config";
    arch.heads = config_count_or(config, "num_attention_heads", 12, where);
    arch.layer_norm_eps = config_eps_or(config, "layer_norm_eps", 1e-6, where);
    const std::string act = config.is_object() && config.contains("hidden_act") && config["hidden_act"].is_string()
                                ? config["hidden_act"].get<std::string>()
                                : "gelu_pytorch_tanh";
    try {
      arch.activation = parse_mlp_activation(act);
    } catch (const std::invalid_argument& error) {
      throw CheckpointError(where + ".hidden_act: " + error.what());
    }
    arch.causal = false;  // SiglipTextTransformer passes no causal mask
    arch.pooling = TextPooling::LastToken;
    check_declared_text_sizes(config, where, "projection_size", arch, shapes);
    said = config.is_null() ? "no config.json text_config: SiglipTextConfig's defaults" : where;
    if (config.is_null())
      load.assumed.push_back({"text heads", arch.heads, "no config.json: SiglipTextConfig's default"});
  } else {
    // open_clip's model_cfg: TextTransformer's own defaults (causal, argmax pooling, eps 1e-5, GELU) where
    // text_cfg leaves a value out, as open_clip's _build_text_tower passes them.
    const nlohmann::json model =
        config.is_object() && config.contains("model_cfg") ? config["model_cfg"] : nlohmann::json();
    const nlohmann::json text = model.is_object() && model.contains("text_cfg") && model["text_cfg"].is_object()
                                    ? model["text_cfg"]
                                    : nlohmann::json::object();
    const std::string where = "open_clip_config.json model_cfg.text_cfg";
    arch.heads = config_count_or(text, "heads", 8, where);
    const nlohmann::json norm =
        text.contains("norm_kwargs") && text["norm_kwargs"].is_object() ? text["norm_kwargs"] : nlohmann::json();
    arch.layer_norm_eps = config_eps_or(norm, "eps", 1e-5, where + ".norm_kwargs");
    const bool quick_gelu = model.is_object() && model.value("quick_gelu", false);
    const nlohmann::json act =
        text.contains("act_kwargs") && text["act_kwargs"].is_object() ? text["act_kwargs"] : nlohmann::json();
    arch.activation = quick_gelu ? MlpActivation::QuickGelu
                      : act.is_object() && act.value("approximate", std::string("none")) == "tanh"
                          ? MlpActivation::GeluTanh
                          : MlpActivation::Gelu;
    arch.causal = !text.value("no_causal_mask", false);
    const std::string pool =
        text.contains("pool_type") && text["pool_type"].is_string() ? text["pool_type"].get<std::string>() : "argmax";
    if (pool == "last")
      arch.pooling = TextPooling::LastToken;
    else if (pool == "argmax")
      arch.pooling = TextPooling::ArgmaxOfIds;
    else
      throw CheckpointError(where + ".pool_type '" + excerpt(pool) +
                            "' is not read (attnscope reads open_clip's 'argmax' and 'last' text pooling)");
    if (arch.pooling == TextPooling::ArgmaxOfIds) {
      arch.tokenizer = TextTokenizerKind::ClipBpe;
      arch.end_of_text_id = arch.vocab_size - 1;
    }
    if (!arch.causal && arch.pooling != TextPooling::LastToken)
      throw CheckpointError(where + " has no_causal_mask with pool_type '" + pool +
                            "': attnscope reads open_clip's non-causal towers pooled at the last position (SigLIP's)");
    if (const int context = config_count_or(text, "context_length", arch.context_length, where);
        context != arch.context_length)
      throw CheckpointError(where + ".context_length is " + std::to_string(context) + " but '" +
                            shapes.file_key("positional_embedding") + "' has " + std::to_string(arch.context_length) +
                            " positions: the file's parts are of different models");
    said = config.is_null() ? "no open_clip_config.json: TextTransformer's defaults" : where;
    if (config.is_null())
      load.assumed.push_back({"text heads", arch.heads, "no open_clip_config.json: open_clip's default"});
  }
  if (arch.width % arch.heads != 0)
    throw CheckpointError(said + ": " + std::to_string(arch.heads) + " heads do not divide the text width " +
                          std::to_string(arch.width));
  load.notes.push_back("SigLIP-style text tower (" + said + "): " + std::to_string(arch.heads) + " heads, " +
                       to_string(arch.activation) + ", LayerNorm eps " + number_text(arch.layer_norm_eps) +
                       (arch.causal ? ", causal mask" : ", no causal mask") + ", " +
                       (arch.projection_bias ? "projection with bias, " : "") + to_string(arch.scores));
}

}  // namespace

ClipTextSource take_clip_text_tensors(Checkpoint& checkpoint) {
  ClipTextSource source;
  source.checkpoint.format = checkpoint.format;
  source.checkpoint.container_key = checkpoint.container_key;
  source.checkpoint.metadata = checkpoint.metadata;
  const auto& tensors = checkpoint.tensors;
  if (tensors.count(kOpenClipToken)) {
    // open_clip's CustomTextCLIP: the text tower's keys without `text.` are OpenAI's.
    source.layout = CheckpointLayout::OpenClip;
    Checkpoint moved;
    move_keys(checkpoint, moved, is_open_clip_text_key);
    for (auto& [key, tensor] : moved.tensors)
      source.checkpoint.tensors[has_prefix(key, "text.") ? key.substr(5) : key] = tensor;
  } else if (any_text_key_with_prefix(checkpoint, "visual.")) {
    source.layout = CheckpointLayout::OpenAiClip;
    move_keys(checkpoint, source.checkpoint, is_openai_text_key);
    if (source.checkpoint.tensors.empty())
      source.absent =
          std::string("this file has no text tower: '") + kOpenAiToken + "' missing (OpenAI CLIP's visual tower alone)";
  } else if (any_text_key_with_prefix(checkpoint, "vision_model.") || any_text_key_with_prefix(checkpoint, kHfPrefix)) {
    // SiglipModel's text tower ends in a head (a Linear with a bias), CLIPModel's in text_projection.
    source.layout = tensors.count("text_model.head.weight") ? CheckpointLayout::HfSiglip : CheckpointLayout::HfClip;
    move_keys(checkpoint, source.checkpoint, is_hf_text_key);
    if (source.checkpoint.tensors.empty())
      source.absent = std::string("this file has no text tower: '") + kHfToken +
                      "' missing (a Hugging Face CLIP vision model alone)";
  } else if (tensors.count("conv1.weight") && tensors.count("class_embedding")) {
    source.absent = std::string("this file has no text tower: '") + kOpenAiToken +
                    "' missing (OpenAI CLIP's visual tower alone; a full CLIP state_dict or OpenAI's released .pt "
                    "holds both towers)";
  } else {
    source.absent = std::string("this file has no text tower: '") + kOpenAiToken + "' (OpenAI) or '" + kHfToken +
                    "' (Hugging Face) missing: it is not a CLIP checkpoint";
  }
  return source;
}

ClipTextArch infer_clip_text_arch(const Checkpoint& checkpoint, CheckpointLayout layout,
                                  const nlohmann::json& text_config,
                                  const std::map<std::string, std::string>& file_keys, ClipTextLoad& load) {
  ShapeReader shapes(checkpoint, "CLIP text tower");
  for (const auto& [key, file_key] : file_keys) shapes.renamed(key, file_key);
  ClipTextArch arch;
  arch.source_layout = layout;
  arch.vocab_size = shapes.size(kOpenAiToken, 2, 0, "vocabulary size", kVocabRange);
  arch.width = shapes.size(kOpenAiToken, 2, 1, "width", kWidthRange);
  arch.context_length = shapes.size("positional_embedding", 2, 0, "context length", kContextRange);

  int layers = 0;
  while (shapes.has("transformer.resblocks." + std::to_string(layers) + ".ln_1.weight")) ++layers;
  // A block past the counted ones means a missing key, not a shorter tower.
  for (const auto& [key, tensor] : checkpoint.tensors) {
    if (!has_prefix(key, "transformer.resblocks.")) continue;
    const std::string index = key.substr(22, key.find('.', 22) - 22);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(index) >= layers)
      throw CheckpointError("missing tensor '" +
                            shapes.file_key("transformer.resblocks." + std::to_string(layers) + ".ln_1.weight") +
                            "' (the file has '" + excerpt(shapes.file_key(key)) + "'): the text tower is incomplete");
  }
  arch.layers = shapes.bounded("depth", shapes.file_key("transformer.resblocks.0.ln_1.weight"), layers, kDepthRange);
  arch.mlp_hidden = shapes.size("transformer.resblocks.0.mlp.c_fc.weight", 2, 0, "MLP hidden size", kHiddenRange);
  arch.embed_dim = shapes.size("text_projection", 2, 1, "embedding size", kWidthRange);

  const bool hugging_face = layout == CheckpointLayout::HfClip || layout == CheckpointLayout::HfSiglip;
  auto contradiction = [&](const std::string& said, int64_t value, const std::string& key, int64_t shown,
                           const std::string& what) {
    if (value != shown)
      throw CheckpointError(said + " is " + std::to_string(value) + " but '" + shapes.file_key(key) + "' has " +
                            std::to_string(shown) + " " + what + ": the file's parts are of different models");
  };
  if (layout == CheckpointLayout::HfSiglip || layout == CheckpointLayout::OpenClip) {
    siglip_text_rules(arch, layout, text_config, shapes, load);
  } else if (!hugging_face) {
    // OpenAI's clip/model.py build_model: heads = width // 64, LayerNorm eps 1e-5, QuickGELU, eot the largest id.
    if (arch.width % 64 != 0)
      throw shapes.error(kOpenAiToken, "gives the width " + std::to_string(arch.width) +
                                           ", not a multiple of 64: OpenAI's CLIP has heads = width / 64");
    arch.heads = arch.width / 64;
    arch.pooling = TextPooling::ArgmaxOfIds;
    arch.end_of_text_id = arch.vocab_size - 1;
    for (const char* recorded : {"context_length", "vocab_size"}) {
      auto it = checkpoint.tensors.find(recorded);
      if (it == checkpoint.tensors.end()) continue;
      const bool context = std::string(recorded) == "context_length";
      contradiction("the file's '" + std::string(recorded) + "'", recorded_integer(it->second, recorded),
                    context ? "positional_embedding" : kOpenAiToken, context ? arch.context_length : arch.vocab_size,
                    context ? "positions" : "token ids");
    }
    load.notes.push_back("CLIP text tower (OpenAI layout): heads = width / 64, QuickGELU, LayerNorm eps 1e-5");
  } else if (text_config.is_null()) {
    arch.heads = arch.width / 64;
    if (arch.heads == 0 || arch.width % 64 != 0)
      throw CheckpointError("no config.json beside the Hugging Face CLIP weights, and the text width " +
                            std::to_string(arch.width) + " is not a multiple of 64: the head count is unknown");
    arch.pooling = TextPooling::ArgmaxOfIds;
    arch.end_of_text_id = arch.vocab_size - 1;
    load.assumed.push_back({"text heads", arch.heads, "no config.json: width " + std::to_string(arch.width) + " / 64"});
    load.assumed.push_back({"text pooling", "argmax of the ids", "no config.json: OpenAI's rule"});
    load.notes.push_back(
        "no config.json beside the weights: text heads = width / 64, QuickGELU, LayerNorm eps 1e-5, "
        "pooled at the argmax of the ids (OpenAI's choices) assumed");
  } else {
    // transformers' CLIPTextConfig: its defaults for what the file's config leaves out.
    const auto has = [&](const char* key) { return text_config.contains(key) && !text_config[key].is_null(); };
    arch.heads = has("num_attention_heads") ? config_integer(text_config, "num_attention_heads") : 8;
    if (arch.heads < 1 || arch.width % arch.heads != 0)
      throw CheckpointError("config.json text_config.num_attention_heads " + std::to_string(arch.heads) +
                            " does not divide the width " + std::to_string(arch.width) + " of '" + kHfToken + "'");
    if (has("layer_norm_eps")) {
      if (!text_config["layer_norm_eps"].is_number() || !(text_config["layer_norm_eps"].get<double>() > 0) ||
          !(text_config["layer_norm_eps"].get<double>() < 1))
        throw CheckpointError("config.json text_config.layer_norm_eps must be a number in (0, 1)");
      arch.layer_norm_eps = text_config["layer_norm_eps"].get<double>();
    }
    const std::string act =
        has("hidden_act") ? (text_config["hidden_act"].is_string() ? text_config["hidden_act"].get<std::string>() : "?")
                          : "quick_gelu";
    if (act == "gelu")
      arch.activation = MlpActivation::Gelu;
    else if (act != "quick_gelu")
      throw CheckpointError("config.json text_config.hidden_act '" + excerpt(act) +
                            "' is not supported (CLIP text towers run quick_gelu or gelu)");
    const int64_t eos = has("eos_token_id") ? config_integer(text_config, "eos_token_id") : 49407;
    // transformers' CLIPTextTransformer.forward: eos_token_id 2 is the value configs carried before
    // PR #24773, and such models are pooled at the argmax of the ids (OpenAI's rule).
    if (eos == 2) {
      arch.pooling = TextPooling::ArgmaxOfIds;
      arch.end_of_text_id = arch.vocab_size - 1;
    } else {
      if (eos >= arch.vocab_size)
        throw CheckpointError("config.json text_config.eos_token_id " + std::to_string(eos) + " is outside the " +
                              std::to_string(arch.vocab_size) + " token ids of '" + kHfToken + "'");
      arch.pooling = TextPooling::FirstEndOfText;
      arch.end_of_text_id = eos;
    }
    check_declared_text_sizes(text_config, "config.json text_config", "projection_dim", arch, shapes);
    load.notes.push_back("CLIP text tower (Hugging Face layout, renamed to OpenAI's keys): config.json " +
                         std::to_string(arch.heads) + " heads, " + act + ", LayerNorm eps " +
                         number_text(arch.layer_norm_eps) + ", eos_token_id " + std::to_string(eos));
  }
  if (arch.heads < 1) throw shapes.error(kOpenAiToken, "gives a width too small for one 64-wide head");
  load.notes.push_back(
      "text tower: " + std::to_string(arch.layers) + " layers of width " + std::to_string(arch.width) + ", " +
      std::to_string(arch.heads) + " heads, context " + std::to_string(arch.context_length) + ", vocabulary " +
      std::to_string(arch.vocab_size) + ", embedding " + std::to_string(arch.embed_dim) +
      "; a prompt's embedding is read at the " + to_string(arch.pooling) +
      (arch.pooling == TextPooling::LastToken ? " (prompts padded to the context)"
                                              : " (end of text: id " + std::to_string(arch.end_of_text_id) + ")"));
  check_arch_limits(clip_text_arch_estimate(arch));
  return arch;
}

ClipTextLoad load_clip_text_tower(ClipTextSource source, const std::string& path, int64_t image_embed_dim) {
  ClipTextLoad load;
  Checkpoint& checkpoint = source.checkpoint;
  if (checkpoint.tensors.empty()) throw CheckpointError(source.absent);
  std::map<std::string, std::string> file_keys;
  nlohmann::json text_config;
  const bool hugging_face = source.layout == CheckpointLayout::HfClip || source.layout == CheckpointLayout::HfSiglip;
  if (hugging_face) {
    text_config = hf_text_config(path, load.notes);
    convert_hf_text(checkpoint, file_keys, load.notes);
  } else if (source.layout == CheckpointLayout::OpenClip) {
    text_config = read_open_clip_config(path);
    convert_open_clip_projection(checkpoint, file_keys);
  }
  bool float16 = false;
  for (const auto& [key, tensor] : checkpoint.tensors) float16 = float16 || tensor.scalar_type() == torch::kHalf;
  ClipTextArch arch = infer_clip_text_arch(checkpoint, source.layout, text_config, file_keys, load);
  if (const nlohmann::json open_clip =
          source.layout == CheckpointLayout::OpenAiClip ? read_open_clip_config(path) : nlohmann::json();
      open_clip.is_object() && open_clip.contains("model_cfg") && open_clip["model_cfg"].is_object()) {
    // open_clip's text towers: its model_cfg says the activation (LAION's are GELU) and the heads.
    const auto& model = open_clip["model_cfg"];
    arch.activation = model.value("quick_gelu", false) ? MlpActivation::QuickGelu : MlpActivation::Gelu;
    const nlohmann::json text =
        model.contains("text_cfg") && model["text_cfg"].is_object() ? model["text_cfg"] : nlohmann::json::object();
    const int heads = text.contains("heads") && text["heads"].is_number_integer() ? text["heads"].get<int>() : 8;
    if (heads < 1 || arch.width % heads != 0)
      throw CheckpointError("open_clip_config.json text_cfg.heads " + std::to_string(heads) +
                            " does not divide the text width " + std::to_string(arch.width));
    arch.heads = heads;
    load.notes.push_back("open_clip text tower: " + std::to_string(heads) + " heads, " +
                         (arch.activation == MlpActivation::QuickGelu ? "QuickGELU" : "GELU") +
                         " (open_clip_config.json)");
  }
  if (image_embed_dim > 0 && arch.embed_dim != image_embed_dim)
    throw CheckpointError(
        "'" + (hugging_face ? std::string("text_projection.weight") : std::string("text_projection")) +
        "' gives text embeddings of " + std::to_string(arch.embed_dim) + " values, the visual tower's '" +
        (hugging_face ? "visual_projection.weight" : "visual.proj") + "' image embeddings of " +
        std::to_string(image_embed_dim) + ": they cannot be compared");
  // SiglipModel and open_clip keep the similarity's scale and bias as [1]; the tower holds them 0-d.
  for (const char* scalar : {"logit_scale", "logit_bias"})
    if (auto it = checkpoint.tensors.find(scalar); it != checkpoint.tensors.end() && it->second.numel() == 1)
      it->second = it->second.reshape({});
  // The archives' recorded sizes were checked against the shapes; they are not weights.
  checkpoint.tensors.erase("context_length");
  checkpoint.tensors.erase("vocab_size");
  if (const auto names = non_finite_tensors(checkpoint.tensors); !names.empty())
    load.warnings.push_back("the text tower's " + describe_non_finite(names));
  // The sizes were judged above: nothing is allocated beyond the bounds.
  load.tower = ClipTextTower(arch);
  LoadReport report;
  copy_weights(*load.tower, checkpoint, report);
  if (!report.ok())
    throw CheckpointError("the text tower's weights do not fit the architecture its shapes give: " + report.describe() +
                          (hugging_face ? " (Hugging Face keys named as OpenAI's: text_model.encoder.layers.N.* are "
                                          "transformer.resblocks.N.*)"
                                        : ""));
  if (float16) load.notes.push_back("CLIP text tower: float16 weights on disk (as released), computed in float32");
  load.tower->eval();
  return load;
}

}  // namespace attnscope
