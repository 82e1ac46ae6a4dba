#include "models/sparse_autoencoder.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "core/excerpt.h"
#include "core/number_text.h"
#include "models/checkpoint_keys.h"

namespace attnscope {

const std::vector<EnumEntry<SaeActivation>>& EnumTable<SaeActivation>::entries() {
  static const std::vector<EnumEntry<SaeActivation>> table = {
      {SaeActivation::Relu, "relu", nullptr, "relu(pre)"},
      {SaeActivation::TanhRelu, "tanh-relu", nullptr, "tanh(relu(pre))"},
      {SaeActivation::TopK, "topk", nullptr, "the k largest pre-activations per token"},
      {SaeActivation::BatchTopK, "batchtopk", nullptr, "BatchTopK at inference: pre above its threshold"},
      {SaeActivation::JumpRelu, "jumprelu", nullptr, "pre where pre > the feature's threshold"},
      {SaeActivation::Gated, "gated", nullptr, "a gate's sign times a magnitude path"},
  };
  return table;
}

const std::vector<EnumEntry<SaeNormalisation>>& EnumTable<SaeNormalisation>::entries() {
  static const std::vector<EnumEntry<SaeNormalisation>> table = {
      {SaeNormalisation::None, "none"},
      {SaeNormalisation::TokenNorm, "constant_norm_rescale", nullptr, "each token to norm sqrt(d_in)"},
      {SaeNormalisation::LayerNorm, "layer_norm", nullptr, "each token centred and divided by its std + 1e-5"},
  };
  return table;
}

namespace {

// The normalised input and what undoes it on the reconstruction: x_hat * scale + shift, per token.
struct Normalised {
  torch::Tensor x, scale, shift;  // scale, shift: [N, 1] (shift undefined: none)
};

Normalised normalise(const SparseAutoencoder& sae, const torch::Tensor& x) {
  Normalised out;
  switch (sae.normalisation) {
    case SaeNormalisation::None:
      out.x = x;
      out.scale = torch::ones({x.size(0), 1}, x.options());
      break;
    case SaeNormalisation::TokenNorm: {
      const torch::Tensor coefficient = std::sqrt(double(sae.d_in)) / x.norm(2, -1, /*keepdim=*/true);
      out.x = x * coefficient;
      out.scale = 1.0 / coefficient;
      break;
    }
    case SaeNormalisation::LayerNorm: {
      // The eps goes on the way in only, as the libraries compute it.
      out.shift = x.mean(-1, /*keepdim=*/true);
      const torch::Tensor centred = x - out.shift;
      const torch::Tensor std = centred.std(-1, /*unbiased=*/true, /*keepdim=*/true);
      out.x = centred / (std + sae.norm_eps);
      out.scale = std;
      break;
    }
  }
  return out;
}

torch::Tensor top_k_per_token(const torch::Tensor& pre, int k, bool relu) {
  const auto [values, indices] = pre.topk(std::min<int64_t>(k, pre.size(-1)), -1);
  return torch::zeros_like(pre).scatter(-1, indices, relu ? torch::relu(values) : values);
}

// b + f W for features f [N, F] with few nonzeros (a TopK SAE's k of 65,536): the rows of W they
// pick, gathered and added up per token, instead of the dense product (the encoder's cost again).
torch::Tensor sparse_product(const torch::Tensor& f, const torch::Tensor& W, const torch::Tensor& b) {
  const int64_t rows = f.size(0), width = W.size(1);
  const torch::Tensor nonzero = f.nonzero();  // [nnz, 2]
  if (nonzero.size(0) * 8 >= f.numel()) return torch::addmm(b, f, W);
  const torch::Tensor token = nonzero.select(1, 0), feature = nonzero.select(1, 1);
  const torch::Tensor values = f.index({token, feature});
  return b.expand({rows, width}).clone().index_add_(0, token, W.index_select(0, feature) * values.unsqueeze(1));
}

void check_input(const SparseAutoencoder& sae, const torch::Tensor& x) {
  if (x.dim() != 2 || x.size(1) != sae.d_in)
    throw std::invalid_argument("the SAE reads [tokens, " + std::to_string(sae.d_in) + "] activations, not " +
                                shape_text(x.sizes()));
}

}  // namespace

torch::Tensor SparseAutoencoder::encode(const torch::Tensor& x) const {
  check_input(*this, x);
  const Normalised normalised = normalise(*this, x.to(torch::kFloat));
  const torch::Tensor sae_in = subtract_b_dec ? normalised.x - b_dec : normalised.x;
  if (activation == SaeActivation::Gated) {
    const torch::Tensor gate = torch::addmm(b_gate, sae_in, W_enc) > 0;
    return gate * torch::relu(torch::addmm(b_mag, sae_in, W_enc * torch::exp(r_mag)));
  }
  torch::Tensor pre = torch::addmm(b_enc, sae_in, W_enc);
  if (pre_scale.defined()) pre = pre * pre_scale;
  switch (activation) {
    case SaeActivation::Relu:
      return torch::relu(pre);
    case SaeActivation::TanhRelu:
      return torch::tanh(torch::relu(pre));
    case SaeActivation::TopK:
      return top_k_per_token(pre, k, relu_after_top_k);
    case SaeActivation::BatchTopK:
      return torch::relu(pre) * (pre > threshold);
    case SaeActivation::JumpRelu:
      return torch::relu(pre) * (pre > threshold);
    case SaeActivation::Gated:
      break;
  }
  throw std::logic_error("an SAE activation without a formula");
}

torch::Tensor SparseAutoencoder::encode_feature(const torch::Tensor& x, int64_t feature) const {
  check_input(*this, x);
  if (feature < 0 || feature >= d_sae)
    throw std::invalid_argument("feature " + std::to_string(feature) + " is outside the SAE's 0.." +
                                std::to_string(d_sae - 1));
  if (activation == SaeActivation::TopK) return encode(x).select(1, feature);
  const Normalised normalised = normalise(*this, x.to(torch::kFloat));
  const torch::Tensor sae_in = subtract_b_dec ? normalised.x - b_dec : normalised.x;
  const torch::Tensor column = W_enc.select(1, feature);
  if (activation == SaeActivation::Gated) {
    const torch::Tensor gate = torch::mv(sae_in, column) + b_gate[feature] > 0;
    return gate * torch::relu(torch::mv(sae_in, column * torch::exp(r_mag[feature])) + b_mag[feature]);
  }
  torch::Tensor pre = torch::mv(sae_in, column) + b_enc[feature];
  if (pre_scale.defined()) pre = pre * pre_scale[feature];
  switch (activation) {
    case SaeActivation::Relu:
      return torch::relu(pre);
    case SaeActivation::TanhRelu:
      return torch::tanh(torch::relu(pre));
    case SaeActivation::BatchTopK:
      return torch::relu(pre) * (pre > threshold);
    case SaeActivation::JumpRelu:
      return torch::relu(pre) * (pre > threshold[feature]);
    default:
      break;
  }
  throw std::logic_error("an SAE activation without a formula");
}

torch::Tensor SparseAutoencoder::stream_scale(const torch::Tensor& x) const {
  check_input(*this, x);
  return normalise(*this, x.to(torch::kFloat)).scale;
}

torch::Tensor SparseAutoencoder::decode(const torch::Tensor& features, const torch::Tensor& x) const {
  check_input(*this, x);
  const torch::Tensor read = pre_scale.defined() ? features / pre_scale : features;
  const torch::Tensor reconstruction = sparse_product(read, W_dec, b_dec);
  const Normalised normalised = normalise(*this, x.to(torch::kFloat));
  const torch::Tensor scaled = reconstruction * normalised.scale;
  return normalised.shift.defined() ? scaled + normalised.shift : scaled;
}

torch::Tensor SparseAutoencoder::edit_delta(const torch::Tensor& x, const torch::Tensor& features,
                                            const std::vector<int>& off, const std::vector<SaeFeatureAdd>& add) const {
  if (off.empty() && add.empty()) return torch::zeros({x.size(0), d_in}, x.options().dtype(torch::kFloat));
  std::vector<int64_t> listed;
  std::vector<torch::Tensor> change;
  for (int feature : off) {
    listed.push_back(feature);
    change.push_back(-features.select(1, feature));
  }
  for (const SaeFeatureAdd& edit : add) {
    listed.push_back(edit.feature);
    change.push_back(torch::full({x.size(0)}, edit.scale, features.options()));
  }
  for (int64_t feature : listed)
    if (feature < 0 || feature >= d_sae)
      throw std::invalid_argument("feature " + std::to_string(feature) + " is outside the SAE's 0.." +
                                  std::to_string(d_sae - 1));
  const torch::Tensor index = torch::tensor(listed, torch::TensorOptions().dtype(torch::kLong)).to(W_dec.device());
  torch::Tensor changes = torch::stack(change, 1);  // [N, listed]
  if (pre_scale.defined()) changes = changes / pre_scale.index_select(0, index);
  return torch::mm(changes, W_dec.index_select(0, index)) * stream_scale(x);
}

std::string SparseAutoencoder::describe() const {
  std::ostringstream out;
  out << format << " " << kind;
  if ((activation == SaeActivation::TopK || activation == SaeActivation::BatchTopK) && k > 0) out << " (k=" << k << ")";
  out << ", " << d_in << " -> " << d_sae << " features";
  if (hook) out << ", " << stream_point_name(*hook);
  if (normalisation != SaeNormalisation::None) out << ", input " << enum_name(normalisation);
  if (class_token_only) out << ", class token only";
  return out.str();
}

double SparseAutoencoder::bytes() const {
  double total = 0;
  for (const torch::Tensor* t : {&W_enc, &b_enc, &W_dec, &b_dec, &threshold, &b_gate, &r_mag, &b_mag})
    if (t->defined()) total += double(t->numel()) * double(t->element_size());
  return total;
}

std::shared_ptr<const SparseAutoencoder> open_sparse_autoencoder(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const SparseAutoencoder>> opened;
  std::error_code error;
  const auto time = std::filesystem::last_write_time(path, error);
  const auto size = std::filesystem::is_regular_file(path, error) ? std::filesystem::file_size(path, error) : 0;
  const std::string key =
      path + "|" + std::to_string(size) + "|" + std::to_string(error ? 0 : time.time_since_epoch().count());
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = opened.find(key); found != opened.end()) return found->second;
  auto sae = std::make_shared<const SparseAutoencoder>(load_sparse_autoencoder(path));
  if (opened.size() >= 4) opened.clear();  // a few SAEs of a session; each may be gigabytes
  opened.emplace(key, sae);
  return sae;
}

StreamPoint sae_stream_point(const SparseAutoencoder& sae, const std::string& given, int depth, int64_t width) {
  std::optional<StreamPoint> point = sae.hook;
  if (!point && sae.hook_named)
    throw std::invalid_argument("the SAE reads " + excerpt(sae.hook_text) +
                                ", a point attnscope's residual stream does not have (it reads each block's input and "
                                "output, its attention and MLP outputs, and the stream between them)");
  if (!given.empty()) {
    const StreamPoint asked = parse_stream_point(given);
    if (point && *point != asked)
      throw std::invalid_argument("--sae-hook " + stream_point_name(asked) + ": the SAE file says it reads " +
                                  sae.hook_text + " (" + stream_point_name(*point) +
                                  "); leave --sae-hook out or give that point");
    point = asked;
  }
  if (!point)
    throw std::invalid_argument(
        "the SAE file does not say which point of the residual stream it reads" +
        (sae.hook_text.empty() ? std::string() : " in words attnscope maps ('" + excerpt(sae.hook_text) + "')") +
        ": give --sae-hook (e.g. blocks.6.hook_resid_post for block 6's output)");
  if (point->layer < 0 || point->layer >= depth)
    throw std::invalid_argument("the SAE reads " + stream_point_name(*point) + ", but the model has blocks 0.." +
                                std::to_string(depth - 1));
  if (sae.d_in != width)
    throw std::invalid_argument("the SAE reads " + std::to_string(sae.d_in) + " channels, but this model's stream is " +
                                std::to_string(width) + " wide: it was trained on another model");
  return *point;
}

StreamTransform sae_intervention(const SaeSetting& setting, int depth, int64_t width) {
  if (setting.file.empty())
    throw std::invalid_argument("--sae-off/--sae-add name features of an SAE: give --sae FILE, the SAE they belong to");
  const std::shared_ptr<const SparseAutoencoder> sae = open_sparse_autoencoder(setting.file);
  StreamTransform transform;
  transform.point = sae_stream_point(*sae, setting.hook, depth, width);
  for (int feature : setting.off)
    if (feature >= sae->d_sae)
      throw std::invalid_argument("--sae-off " + std::to_string(feature) + ": the SAE has features 0.." +
                                  std::to_string(sae->d_sae - 1));
  for (const SaeFeatureAdd& add : setting.add)
    if (add.feature >= sae->d_sae)
      throw std::invalid_argument("--sae-add " + std::to_string(add.feature) + ": the SAE has features 0.." +
                                  std::to_string(sae->d_sae - 1));
  transform.apply = [sae, off = setting.off, add = setting.add](const torch::Tensor& activation) {
    const auto sizes = activation.sizes().vec();  // [B, T, C]
    const int64_t tokens = sizes[1];
    // A class-token SAE edits the class token alone, as it was trained.
    const torch::Tensor read = sae->class_token_only ? activation.narrow(1, 0, 1) : activation;
    const torch::Tensor rows = read.reshape({-1, sae->d_in});
    const torch::Tensor on_device = rows.to(sae->W_enc.device());
    const torch::Tensor delta =
        sae->edit_delta(on_device, sae->encode(on_device), off, add).to(activation.device(), activation.dtype());
    if (!sae->class_token_only || tokens == 1) return activation + delta.view(read.sizes());
    torch::Tensor edited = activation.clone();
    edited.narrow(1, 0, 1).add_(delta.view(read.sizes()));
    return edited;
  };
  return transform;
}

}  // namespace attnscope
