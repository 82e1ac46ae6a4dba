// The four SAE formats, each read by its own library's rules (saev's nn/modeling.py, ViT-Prisma's
// sae/sae.py and sae/config.py, SAELens' saes/*.py and loading/, dictionary_learning's
// dictionary.py), into one SparseAutoencoder. Every size is checked against the header before
// anything is read, and nothing pickled is ever run (core/checkpoint.h).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "core/image_header.h"
#include "core/json_checked.h"
#include "core/number_text.h"
#include "models/sparse_autoencoder.h"

namespace attnscope {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The longest header line saev writes (a config of a few dozen fields) is far below this.
constexpr size_t kMaxSaevHeaderBytes = size_t(1) << 20;

[[noreturn]] void refuse_sae(const std::string& source, const std::string& why) {
  throw std::invalid_argument(source + ": " + why);
}

// A whole number in [low, high] from a JSON field (refused when absent, of another type or outside).
int64_t sae_whole_field(const std::string& source, const json& object, const std::string& key, int64_t low,
                        int64_t high) {
  if (!object.is_object() || !object.contains(key)) refuse_sae(source, "its config has no '" + key + "'");
  const json& value = object.at(key);
  if (!value.is_number_integer()) refuse_sae(source, "its config's '" + key + "' is not a whole number");
  const int64_t number = value.get<int64_t>();
  if (number < low || number > high)
    refuse_sae(source, "its config's '" + key + "' is " + std::to_string(number) + ", outside " + std::to_string(low) +
                           ".." + std::to_string(high));
  return number;
}

std::string sae_text_field(const json& object, const std::string& key, const std::string& fallback = "") {
  if (!object.is_object() || !object.contains(key) || !object.at(key).is_string()) return fallback;
  return object.at(key).get<std::string>();
}

bool sae_bool_field(const json& object, const std::string& key, bool fallback) {
  if (!object.is_object() || !object.contains(key) || !object.at(key).is_boolean()) return fallback;
  return object.at(key).get<bool>();
}

// The sizes every format declares, checked before any weight is read.
void check_sae_sizes(const std::string& source, int64_t d_in, int64_t d_sae) {
  if (d_in < 1 || d_in > kMaxSaeInput)
    refuse_sae(source, "d_in " + std::to_string(d_in) + " is outside 1.." + std::to_string(kMaxSaeInput));
  if (d_sae < 1 || d_sae > kMaxSaeFeatures)
    refuse_sae(source, std::to_string(d_sae) + " features, outside 1.." + std::to_string(kMaxSaeFeatures));
  if (2.0 * double(d_in) * double(d_sae) * 4 > kMaxSaeBytes)
    refuse_sae(source, "its encoder and decoder would take " +
                           format_double(2.0 * double(d_in) * double(d_sae) * 4 / 1e9) +
                           " GB, more than attnscope opens");
}

void check_sae_file_size(const std::string& source, const fs::path& file) {
  std::error_code error;
  const auto size = fs::file_size(file, error);
  if (error) refuse_sae(source, "cannot read " + file.string());
  if (double(size) > kMaxSaeBytes * 1.5)
    refuse_sae(source, file.filename().string() + " is " + format_double(double(size) / 1e9) +
                           " GB, more than attnscope opens");
}

// A tensor of the checkpoint, of exactly `shape`, as contiguous float32; refused when absent, of
// another shape or not finite.
torch::Tensor sae_tensor(const std::string& source, const Checkpoint& checkpoint, const std::string& key,
                         const std::vector<int64_t>& shape) {
  const auto found = checkpoint.tensors.find(key);
  if (found == checkpoint.tensors.end()) {
    std::string keys;
    for (const auto& [name, tensor] : checkpoint.tensors) keys += (keys.empty() ? "" : ", ") + name;
    refuse_sae(source, "no '" + key + "' among its tensors (" + excerpt(keys, 300) + ")");
  }
  const torch::Tensor& tensor = found->second;
  if (tensor.sizes().vec() != shape)
    refuse_sae(source, "'" + key + "' is " + shape_text(tensor.sizes()) + ", not " + shape_text(shape) +
                           " as its config's sizes say");
  if (!tensor.is_floating_point() && shape.size() > 0)
    refuse_sae(source, "'" + key + "' is not a floating-point tensor");
  torch::Tensor value = tensor.to(torch::kFloat).contiguous();
  if (!torch::isfinite(value).all().item<bool>()) refuse_sae(source, "'" + key + "' holds NaN or infinite values");
  return value;
}

bool has_tensor(const Checkpoint& checkpoint, const std::string& key) { return checkpoint.tensors.count(key) > 0; }

// The checks every format shares once its tensors are in place.
void check_loaded_sae(SparseAutoencoder& sae) {
  if ((sae.activation == SaeActivation::TopK) && (sae.k < 1 || sae.k > sae.d_sae))
    refuse_sae(sae.source,
               "k = " + std::to_string(sae.k) + " is outside 1.." + std::to_string(sae.d_sae) + " (the SAE's width)");
  if (sae.activation == SaeActivation::BatchTopK && (!sae.threshold.defined() || sae.threshold.numel() != 1))
    refuse_sae(sae.source, "a BatchTopK SAE without its inference threshold");
}

// ---- saev: one JSON line, then torch.save's archive ------------------------------------------

SparseAutoencoder read_saev(const fs::path& file) {
  const std::string source = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) refuse_sae(source, "cannot open it");
  std::string line;
  char c = 0;
  while (line.size() <= kMaxSaevHeaderBytes && in.get(c) && c != '\n') line.push_back(c);
  if (c != '\n' || line.size() > kMaxSaevHeaderBytes)
    refuse_sae(source, "not saev's sae.pt: no JSON header line in its first megabyte");
  const uint64_t base = uint64_t(line.size()) + 1;
  const json header = parse_json_checked(line, source + " (saev's header line)");
  SparseAutoencoder sae;
  sae.format = "saev";
  sae.source = source;
  sae.subtract_b_dec = false;  // nn/modeling.py encode: x @ W_enc + b_enc
  sae.relu_after_top_k = false;
  json cfg = header;
  std::string activation = "Relu";
  int64_t top_k = 0;
  if (header.contains("schema")) {
    const int64_t schema = sae_whole_field(source, header, "schema", 1, 5);
    if (!header.contains("cfg") || !header.at("cfg").is_object()) refuse_sae(source, "saev's header has no cfg");
    cfg = header.at("cfg");
    const json* activation_json = nullptr;
    if (schema == 1 && header.contains("cls") && sae_text_field(header, "cls") != "SparseAutoencoderConfig") {
      activation = sae_text_field(header, "cls");
      if (cfg.contains("top_k")) top_k = sae_whole_field(source, cfg, "top_k", 1, kMaxSaeFeatures);
    } else if (cfg.contains("activation")) {
      activation_json = &cfg.at("activation");
    }
    if (activation_json) {
      activation = sae_text_field(*activation_json, "cls", "Relu");
      const json params = activation_json->is_object() && activation_json->contains("params")
                              ? activation_json->at("params")
                              : json::object();
      if (params.contains("top_k")) top_k = sae_whole_field(source, params, "top_k", 1, kMaxSaeFeatures);
    }
  } else {
    // The first saev files: the header is the flat config, d_vit for d_model, ReLU.
    sae.notes.push_back(
        "a saev file from before its header schema: encoded as saev's current code does (without subtracting b_dec), "
        "though such files were trained with x - b_dec");
  }
  const std::string width_key = cfg.contains("d_model") ? "d_model" : "d_vit";
  sae.d_in = sae_whole_field(source, cfg, width_key, 1, kMaxSaeInput);
  sae.d_sae = cfg.contains("d_sae") ? sae_whole_field(source, cfg, "d_sae", 1, kMaxSaeFeatures)
                                    : sae.d_in * sae_whole_field(source, cfg, "exp_factor", 1, 1 << 12);
  check_sae_sizes(source, sae.d_in, sae.d_sae);
  if (activation == "Relu") {
    sae.activation = SaeActivation::Relu;
  } else if (activation == "TopK") {
    sae.activation = SaeActivation::TopK;
  } else if (activation == "BatchTopK") {
    sae.activation = SaeActivation::BatchTopK;
  } else {
    refuse_sae(source,
               "saev activation '" + excerpt(activation) + "' is not one attnscope reads (Relu, TopK, BatchTopK)");
  }
  sae.kind = activation;
  sae.k = int(top_k);  // saev clamps a k above the width; attnscope refuses it (check_loaded_sae)
  if (sae.activation == SaeActivation::TopK && top_k < 1) refuse_sae(source, "a TopK SAE without top_k");
  check_sae_file_size(source, file);
  const Checkpoint weights = load_pytorch_zip(source, "", base);
  sae.W_enc = sae_tensor(source, weights, "W_enc", {sae.d_in, sae.d_sae});
  sae.b_enc = sae_tensor(source, weights, "b_enc", {sae.d_sae});
  sae.W_dec = sae_tensor(source, weights, "W_dec", {sae.d_sae, sae.d_in});
  sae.b_dec = sae_tensor(source, weights, "b_dec", {sae.d_in});
  if (sae.activation == SaeActivation::BatchTopK)
    sae.threshold = sae_tensor(source, weights, "activation.threshold", {});
  sae.notes.push_back("saev files do not say which layer they read (it is in the activation shards' metadata)");
  return sae;
}

// ---- ViT-Prisma: config.json beside weights.pt -----------------------------------------------

// A point of the stream from a hook name; unset (with the name kept) for one attnscope has not.
void set_sae_hook(SparseAutoencoder& sae, const std::string& name) {
  sae.hook_text = name;
  sae.hook_named = true;
  try {
    sae.hook = parse_stream_point(name);
  } catch (const std::invalid_argument&) {
    sae.hook.reset();
  }
}

SaeNormalisation normalisation_named(const std::string& source, const std::string& name) {
  if (name == "layer_norm") return SaeNormalisation::LayerNorm;
  if (name == "constant_norm_rescale") return SaeNormalisation::TokenNorm;
  if (name.empty() || name == "none") return SaeNormalisation::None;
  refuse_sae(source, "normalize_activations '" + excerpt(name) + "' is not one attnscope reads");
}

// The file of weights a folder holds: `given` when it names one, else the one of `names` present.
fs::path sae_weights_file(const fs::path& folder, const fs::path& given, const std::vector<std::string>& names,
                          const std::string& source) {
  if (!given.empty() && fs::is_regular_file(given) && given.filename() != "config.json" &&
      given.filename() != "cfg.json")
    return given;
  for (const std::string& name : names)
    if (fs::is_regular_file(folder / name)) return folder / name;
  std::vector<fs::path> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error))
    if (entry.is_regular_file() && entry.path().extension() == ".pt") found.push_back(entry.path());
  if (found.size() == 1) return found.front();
  refuse_sae(source, found.empty() ? "no weights file (.pt) beside its config.json"
                                   : "several .pt files beside its config.json: open the one you mean");
}

SparseAutoencoder read_prisma(const fs::path& folder, const json& config, const fs::path& given) {
  const std::string source = folder.string();
  SparseAutoencoder sae;
  sae.format = "ViT-Prisma";
  sae.source = source;
  if (sae_bool_field(config, "is_transcoder", false))
    refuse_sae(source, "a ViT-Prisma transcoder, not a sparse autoencoder (attnscope reads SAEs)");
  const std::string architecture = sae_text_field(config, "architecture", "standard");
  if (architecture != "standard" && architecture != "gated")
    refuse_sae(source,
               "ViT-Prisma architecture '" + excerpt(architecture) + "' is not one its loader reads (standard, gated)");
  sae.d_in = sae_whole_field(source, config, "d_in", 1, kMaxSaeInput);
  sae.d_sae = sae.d_in * sae_whole_field(source, config, "expansion_factor", 1, 1 << 12);
  check_sae_sizes(source, sae.d_in, sae.d_sae);
  const std::string activation = sae_text_field(config, "activation_fn_str", "relu");
  sae.kind = architecture + " " + activation;
  if (architecture == "gated") {
    sae.activation = SaeActivation::Gated;
  } else if (activation == "relu") {
    sae.activation = SaeActivation::Relu;
  } else if (activation == "tanh-relu") {
    sae.activation = SaeActivation::TanhRelu;
  } else if (activation == "topk") {
    sae.activation = SaeActivation::TopK;
    const json kwargs = config.contains("activation_fn_kwargs") ? config.at("activation_fn_kwargs") : json::object();
    sae.k =
        kwargs.is_object() && kwargs.contains("k") ? int(sae_whole_field(source, kwargs, "k", 1, kMaxSaeFeatures)) : 64;
  } else {
    refuse_sae(source, "ViT-Prisma activation '" + excerpt(activation) +
                           "' is not one attnscope reads (relu, topk, tanh-relu)");
  }
  // sae/config.py: layer_norm unless the config says otherwise; anything but the two names is none.
  const json& normalize =
      config.contains("normalize_activations") ? config.at("normalize_activations") : json("layer_norm");
  const std::string normalisation = normalize.is_string() ? normalize.get<std::string>() : "none";
  sae.normalisation = normalisation == "layer_norm"              ? SaeNormalisation::LayerNorm
                      : normalisation == "constant_norm_rescale" ? SaeNormalisation::TokenNorm
                                                                 : SaeNormalisation::None;
  sae.class_token_only = sae_bool_field(config, "cls_token_only", false);
  if (config.contains("hook_point_layer") && config.at("hook_point_layer").is_number_integer())
    set_sae_hook(sae, "blocks." + std::to_string(config.at("hook_point_layer").get<int64_t>()) + "." +
                          sae_text_field(config, "layer_subtype", "ln2.hook_normalized"));
  const fs::path weights_path = sae_weights_file(folder, given, {"weights.pt"}, source);
  check_sae_file_size(source, weights_path);
  const Checkpoint weights = load_pytorch_zip(weights_path.string());
  if (!weights.unread_objects.empty())
    sae.notes.push_back("its weights file also pickles " + weights.unread_objects.front() +
                        ", not run: config.json read instead");
  sae.W_enc = sae_tensor(source, weights, "W_enc", {sae.d_in, sae.d_sae});
  sae.W_dec = sae_tensor(source, weights, "W_dec", {sae.d_sae, sae.d_in});
  sae.b_dec = sae_tensor(source, weights, "b_dec", {sae.d_in});
  sae.b_enc =
      has_tensor(weights, "b_enc") ? sae_tensor(source, weights, "b_enc", {sae.d_sae}) : torch::zeros({sae.d_sae});
  if (sae.activation == SaeActivation::Gated) {
    sae.b_gate = sae_tensor(source, weights, "b_gate", {sae.d_sae});
    sae.r_mag = sae_tensor(source, weights, "r_mag", {sae.d_sae});
    sae.b_mag = sae_tensor(source, weights, "b_mag", {sae.d_sae});
  }
  return sae;
}

// ---- SAELens: cfg.json + sae_weights.safetensors ---------------------------------------------

SparseAutoencoder read_saelens(const fs::path& folder, const json& config) {
  const std::string source = folder.string();
  SparseAutoencoder sae;
  sae.format = "SAELens";
  sae.source = source;
  const json metadata =
      config.contains("metadata") && config.at("metadata").is_object() ? config.at("metadata") : json::object();
  std::string architecture = sae_text_field(config, "architecture", "standard");
  // Before 6.0 a TopK SAE could be "standard" with activation_fn_str topk (handle_pre_6_0_config).
  const std::string activation_fn =
      sae_text_field(config, "activation_fn_str", sae_text_field(config, "activation_fn"));
  const json kwargs = config.contains("activation_fn_kwargs") ? config.at("activation_fn_kwargs") : json::object();
  int64_t k = config.contains("k") ? sae_whole_field(source, config, "k", 1, kMaxSaeFeatures) : 0;
  if (activation_fn == "topk" && kwargs.is_object() && kwargs.contains("k")) {
    architecture = "topk";
    k = sae_whole_field(source, kwargs, "k", 1, kMaxSaeFeatures);
  }
  if (sae_text_field(config, "reshape_activations", "none") != "none")
    refuse_sae(source, "an SAE on reshaped activations (" + sae_text_field(config, "reshape_activations") +
                           "): attnscope reads SAEs on the residual stream's points");
  sae.d_in = sae_whole_field(source, config, "d_in", 1, kMaxSaeInput);
  sae.d_sae = sae_whole_field(source, config, "d_sae", 1, kMaxSaeFeatures);
  check_sae_sizes(source, sae.d_in, sae.d_sae);
  sae.kind = architecture;
  if (architecture == "standard") {
    sae.activation = activation_fn == "tanh-relu" ? SaeActivation::TanhRelu : SaeActivation::Relu;
  } else if (architecture == "topk") {
    sae.activation = SaeActivation::TopK;
    sae.k = int(k);
  } else if (architecture == "jumprelu") {
    sae.activation = SaeActivation::JumpRelu;
  } else if (architecture == "gated") {
    sae.activation = SaeActivation::Gated;
  } else {
    refuse_sae(source, "SAELens architecture '" + excerpt(architecture) +
                           "' is not one attnscope reads (standard, topk, jumprelu, gated)");
  }
  sae.subtract_b_dec = sae_bool_field(config, "apply_b_dec_to_input", true);
  const json& normalize = config.contains("normalize_activations") ? config.at("normalize_activations") : json("none");
  std::string normalisation = normalize.is_string() ? normalize.get<std::string>() : "none";
  if (normalize.is_boolean()) normalisation = normalize.get<bool>() ? "expected_average_only_in" : "none";
  if (normalisation == "expected_average_only_in") {
    // SAE.load_from_disk applies no factor: it lives outside the files (the release's yaml).
    sae.notes.push_back(
        "normalize_activations is expected_average_only_in: its scaling factor is not in the files, so the input is "
        "read unscaled, as SAELens' load_from_disk reads it");
    normalisation = "none";
  }
  sae.normalisation = normalisation_named(source, normalisation);
  const std::string hook =
      sae_text_field(metadata, "hook_name", sae_text_field(config, "hook_name", sae_text_field(config, "hook_point")));
  if (!hook.empty()) set_sae_hook(sae, hook);
  const fs::path weights_path = folder / "sae_weights.safetensors";
  const Checkpoint shapes = read_safetensors_shapes(weights_path.string());  // the header alone
  (void)shapes;
  check_sae_file_size(source, weights_path);
  const Checkpoint weights = load_safetensors(weights_path.string());
  sae.W_enc = sae_tensor(source, weights, "W_enc", {sae.d_in, sae.d_sae});
  sae.W_dec = sae_tensor(source, weights, "W_dec", {sae.d_sae, sae.d_in});
  sae.b_dec = sae_tensor(source, weights, "b_dec", {sae.d_in});
  if (sae.activation == SaeActivation::Gated) {
    sae.b_enc = torch::zeros({sae.d_sae});
    sae.b_gate = sae_tensor(source, weights, "b_gate", {sae.d_sae});
    sae.r_mag = sae_tensor(source, weights, "r_mag", {sae.d_sae});
    sae.b_mag = sae_tensor(source, weights, "b_mag", {sae.d_sae});
  } else {
    sae.b_enc = sae_tensor(source, weights, "b_enc", {sae.d_sae});
  }
  if (sae.activation == SaeActivation::JumpRelu) sae.threshold = sae_tensor(source, weights, "threshold", {sae.d_sae});
  if (sae.activation == SaeActivation::TopK && sae_bool_field(config, "rescale_acts_by_decoder_norm", false))
    sae.pre_scale = sae.W_dec.norm(2, 1);
  if (has_tensor(weights, "scaling_factor")) {
    const torch::Tensor factor = sae_tensor(source, weights, "scaling_factor", {sae.d_sae});
    if (!torch::equal(factor, torch::ones_like(factor)))
      refuse_sae(source,
                 "a fine-tuning scaling_factor other than ones (SAELens 5's finetuning_scaling_factor), which "
                 "SAELens 6 no longer reads either");
  }
  return sae;
}

// ---- dictionary_learning: config.json + ae.pt ------------------------------------------------

SparseAutoencoder read_dictionary_learning(const fs::path& folder, const json& config) {
  const std::string source = folder.string();
  if (!config.contains("trainer") || !config.at("trainer").is_object())
    refuse_sae(source, "dictionary_learning's config.json has no trainer block");
  const json& trainer = config.at("trainer");
  SparseAutoencoder sae;
  sae.format = "dictionary_learning";
  sae.source = source;
  const std::string dict_class = sae_text_field(trainer, "dict_class");
  sae.kind = dict_class;
  sae.d_in = sae_whole_field(source, trainer, "activation_dim", 1, kMaxSaeInput);
  sae.d_sae = sae_whole_field(source, trainer, "dict_size", 1, kMaxSaeFeatures);
  check_sae_sizes(source, sae.d_in, sae.d_sae);
  const fs::path weights_path = folder / "ae.pt";
  check_sae_file_size(source, weights_path);
  const Checkpoint weights = load_pytorch_zip(weights_path.string());
  const int64_t d_in = sae.d_in, d_sae = sae.d_sae;
  // nn.Linear stores [out, in]: the encoder's weight is W_enc transposed, the decoder's W_dec's.
  auto linear_encoder = [&]() {
    sae.W_enc = sae_tensor(source, weights, "encoder.weight", {d_sae, d_in}).t().contiguous();
  };
  auto linear_decoder = [&]() {
    sae.W_dec = sae_tensor(source, weights, "decoder.weight", {d_in, d_sae}).t().contiguous();
  };
  auto threshold_number = [&]() {
    sae.threshold = sae_tensor(source, weights, "threshold", {});
    sae.k = int(trainer.contains("k") ? sae_whole_field(source, trainer, "k", 1, d_sae) : 0);
  };
  if (dict_class == "AutoEncoder") {
    sae.activation = SaeActivation::Relu;
    linear_encoder();
    sae.b_enc = sae_tensor(source, weights, "encoder.bias", {d_sae});
    linear_decoder();
    sae.b_dec = sae_tensor(source, weights, "bias", {d_in});
    // from_pretrained(normalize_decoder=True), load_dictionary's default: unit decoder columns, the
    // norms folded into the encoder (features scaled), unless every norm is already 1.
    const torch::Tensor norms = sae.W_dec.norm(2, 1);
    if (!torch::allclose(norms, torch::ones_like(norms), 1e-5, 1e-8)) {
      sae.W_dec = sae.W_dec / norms.unsqueeze(1);
      sae.W_enc = sae.W_enc * norms.unsqueeze(0);
      sae.b_enc = sae.b_enc * norms;
      sae.notes.push_back(
          "decoder columns normalised at load, their norms folded into the encoder, as "
          "AutoEncoder.from_pretrained does");
    }
  } else if (dict_class == "AutoEncoderTopK" || dict_class == "BatchTopKSAE") {
    linear_encoder();
    sae.b_enc = sae_tensor(source, weights, "encoder.bias", {d_sae});
    linear_decoder();
    sae.b_dec = sae_tensor(source, weights, "b_dec", {d_in});
    if (dict_class == "AutoEncoderTopK") {
      sae.activation = SaeActivation::TopK;
      const auto k = weights.tensors.find("k");
      if (k == weights.tensors.end() || k->second.numel() != 1 || k->second.is_floating_point())
        refuse_sae(source, "AutoEncoderTopK without its whole-number k buffer");
      sae.k = int(std::clamp<int64_t>(k->second.item<int64_t>(), 0, d_sae + 1));
      if (k->second.item<int64_t>() > d_sae)
        refuse_sae(source, "k = " + std::to_string(k->second.item<int64_t>()) + " is larger than its " +
                               std::to_string(d_sae) + " features");
    } else {
      sae.activation = SaeActivation::BatchTopK;
      threshold_number();
    }
  } else if (dict_class == "MatryoshkaBatchTopKSAE") {
    sae.activation = SaeActivation::BatchTopK;
    sae.W_enc = sae_tensor(source, weights, "W_enc", {d_in, d_sae});
    sae.b_enc = sae_tensor(source, weights, "b_enc", {d_sae});
    sae.W_dec = sae_tensor(source, weights, "W_dec", {d_sae, d_in});
    sae.b_dec = sae_tensor(source, weights, "b_dec", {d_in});
    threshold_number();
    if (const auto groups = weights.tensors.find("group_sizes"); groups != weights.tensors.end()) {
      const torch::Tensor sizes = groups->second.to(torch::kLong).flatten();
      if (sizes.numel() > 4096 || sizes.sum().item<int64_t>() != d_sae || (sizes < 1).any().item<bool>())
        refuse_sae(source, "its group_sizes do not add up to its " + std::to_string(d_sae) + " features");
      int64_t end = 0;
      for (int64_t i = 0; i < sizes.numel(); ++i) sae.prefixes.push_back(end += sizes[i].item<int64_t>());
    }
  } else if (dict_class == "JumpReluAutoEncoder") {
    sae.activation = SaeActivation::JumpRelu;
    sae.subtract_b_dec = false;  // apply_b_dec_to_input is False unless set by SAELens' importer
    sae.W_enc = sae_tensor(source, weights, "W_enc", {d_in, d_sae});
    sae.b_enc = sae_tensor(source, weights, "b_enc", {d_sae});
    sae.W_dec = sae_tensor(source, weights, "W_dec", {d_sae, d_in});
    sae.b_dec = sae_tensor(source, weights, "b_dec", {d_in});
    sae.threshold = sae_tensor(source, weights, "threshold", {d_sae});
  } else if (dict_class == "GatedAutoEncoder") {
    sae.activation = SaeActivation::Gated;
    linear_encoder();
    linear_decoder();
    sae.b_enc = torch::zeros({d_sae});
    sae.b_dec = sae_tensor(source, weights, "decoder_bias", {d_in});
    sae.b_gate = sae_tensor(source, weights, "gate_bias", {d_sae});
    sae.r_mag = sae_tensor(source, weights, "r_mag", {d_sae});
    sae.b_mag = sae_tensor(source, weights, "mag_bias", {d_sae});
  } else {
    refuse_sae(source, "dictionary_learning class '" + excerpt(dict_class) +
                           "' is not one attnscope reads (AutoEncoder, AutoEncoderTopK, BatchTopKSAE, "
                           "MatryoshkaBatchTopKSAE, JumpReluAutoEncoder, GatedAutoEncoder)");
  }
  // `layer` is the block whose output was hooked; submodule_name is free text.
  const std::string submodule = sae_text_field(trainer, "submodule_name");
  if (trainer.contains("layer") && trainer.at("layer").is_number_integer()) {
    const std::string layer = std::to_string(trainer.at("layer").get<int64_t>());
    sae.hook_text = "layer " + layer + (submodule.empty() ? "" : " (" + submodule + ")");
    const std::string lower = submodule;
    if (lower.find("resid") != std::string::npos)
      sae.hook = parse_stream_point("blocks." + layer + ".hook_resid_post");
    else if (lower.find("mlp") != std::string::npos)
      sae.hook = parse_stream_point("blocks." + layer + ".hook_mlp_out");
    else if (lower.find("attn") != std::string::npos)
      sae.hook = parse_stream_point("blocks." + layer + ".hook_attn_out");
  }
  return sae;
}

// ---- Which format a path is ------------------------------------------------------------------

bool starts_with_brace_sae(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char c = 0;
  return in.get(c) && c == '{';
}

SparseAutoencoder read_sae_any(const std::string& path) {
  std::error_code error;
  const fs::path given(path);
  if (!fs::exists(given, error)) throw std::invalid_argument(path + ": no such SAE file or folder");
  if (fs::is_regular_file(given) && starts_with_brace_sae(given) && given.filename() != "config.json" &&
      given.filename() != "cfg.json")
    return read_saev(given);
  const fs::path folder = fs::is_directory(given)       ? given
                          : given.parent_path().empty() ? fs::path(".")
                                                        : given.parent_path();
  if (fs::is_directory(given) && fs::is_regular_file(folder / "sae.pt") && starts_with_brace_sae(folder / "sae.pt"))
    return read_saev(folder / "sae.pt");
  if (fs::is_regular_file(folder / "cfg.json") && fs::is_regular_file(folder / "sae_weights.safetensors"))
    return read_saelens(folder, read_json_file((folder / "cfg.json").string(), "SAELens cfg.json", 1 << 20));
  if (fs::is_regular_file(folder / "config.json")) {
    const json config = read_json_file((folder / "config.json").string(), "SAE config.json", 1 << 20);
    if (config.is_object() && config.contains("trainer")) return read_dictionary_learning(folder, config);
    if (config.is_object() && (config.contains("hook_point_layer") || config.contains("expansion_factor")))
      return read_prisma(folder, config, given);
    throw std::invalid_argument(folder.string() +
                                ": its config.json is neither ViT-Prisma's (hook_point_layer, expansion_factor) nor "
                                "dictionary_learning's (trainer)");
  }
  if (fs::is_regular_file(given)) {
    // What the file is, where it is plainly not a torch.save archive: said for what it is (the zip
    // reader's "no end of central directory record" told a model or an image to be re-saved).
    std::string head(16, '\0');
    {
      std::ifstream in(given, std::ios::binary);
      in.read(head.data(), std::streamsize(head.size()));
      head.resize(size_t(in.gcount()));
    }
    const std::string expected =
        "; expected saev's sae.pt, or a folder of ViT-Prisma (config.json + weights.pt), SAELens (cfg.json + "
        "sae_weights.safetensors) or dictionary_learning (config.json + ae.pt)";
    if (const std::string image = image_format_of(head); !image.empty())
      throw std::invalid_argument(given.string() + ": a " + image + " image, not an SAE attnscope reads" + expected);
    if (head.size() > 8 && head[8] == '{')
      throw std::invalid_argument(given.string() +
                                  ": a safetensors file, not an SAE attnscope reads (SAELens keeps its weights as "
                                  "sae_weights.safetensors beside cfg.json; a model's checkpoint goes to --model)" +
                                  expected);
    // A lone torch.save file: a trainer checkpoint whose config is a pickled Python object.
    Checkpoint checkpoint;
    try {
      checkpoint = load_pytorch_zip(given.string());
    } catch (const CheckpointError& e) {
      throw std::invalid_argument(given.string() + ": not an SAE attnscope reads (" + e.what() + ")" + expected);
    }
    if (!checkpoint.unread_objects.empty())
      throw std::invalid_argument(
          given.string() + ": its config is a pickled Python object (" + checkpoint.unread_objects.front() +
          "), which attnscope never runs; write the config as JSON beside the weights (ViT-Prisma: "
          "sae.cfg.save_config('config.json'), then torch.save(sae.state_dict(), 'weights.pt')) and open the folder");
    throw std::invalid_argument(given.string() +
                                ": a torch.save file without a config beside it; an SAE needs its config: saev's "
                                "header line, or config.json / cfg.json in its folder");
  }
  throw std::invalid_argument(path +
                              ": not an SAE attnscope reads: expected saev's sae.pt, or a folder of ViT-Prisma "
                              "(config.json + weights.pt), SAELens (cfg.json + sae_weights.safetensors) or "
                              "dictionary_learning (config.json + ae.pt)");
}

}  // namespace

SparseAutoencoder load_sparse_autoencoder(const std::string& path) {
  SparseAutoencoder sae;
  try {
    sae = read_sae_any(path);
  } catch (const CheckpointError& e) {
    throw std::invalid_argument(e.what());
  }
  check_loaded_sae(sae);
  return sae;
}

}  // namespace attnscope
