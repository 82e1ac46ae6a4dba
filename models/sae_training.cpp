#include "models/sae_training.h"

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint.h"
#include "core/json_checked.h"

namespace attnscope {

SparseAutoencoder train_top_k_sae(int64_t d_in, const SaeTrainOptions& options,
                                  const std::function<torch::Tensor(int step)>& batch,
                                  const std::function<void(const SaeTrainProgress&)>& progress) {
  if (options.k < 1 || options.k > options.features)
    throw std::invalid_argument("--k must be from 1 to the SAE's features (" + std::to_string(options.features) + ")");
  torch::manual_seed(options.seed);
  const int64_t features = options.features;
  torch::Tensor W_dec = torch::randn({features, d_in});
  W_dec = (W_dec / W_dec.norm(2, 1, true)).requires_grad_(true);
  torch::Tensor W_enc = W_dec.detach().t().clone().requires_grad_(true);
  torch::Tensor b_enc = torch::zeros({features}, torch::requires_grad());
  torch::Tensor b_dec;
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<torch::optim::Adam> optimiser;
  torch::Tensor since_fired = torch::zeros({features}, torch::kLong);
  for (int step = 0; step < options.steps; ++step) {
    const torch::Tensor x = batch(step).to(torch::kFloat).detach();
    if (x.dim() != 2 || x.size(1) != d_in)
      throw std::logic_error("an SAE training batch that is not [N, " + std::to_string(d_in) + "]");
    if (step == 0) {
      b_dec = x.mean(0).clone().requires_grad_(true);
      parameters = {W_enc, b_enc, W_dec, b_dec};
      optimiser = std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(options.learning_rate));
    }
    const torch::Tensor pre = torch::addmm(b_enc, x - b_dec, W_enc);
    const auto [values, indices] = pre.topk(options.k, 1);
    const torch::Tensor f = torch::zeros_like(pre).scatter(1, indices, torch::relu(values));
    const torch::Tensor x_hat = torch::addmm(b_dec, f, W_dec);
    const torch::Tensor error = x - x_hat;
    const torch::Tensor variance = (x - x.mean(0, true)).pow(2).sum(1).mean().detach();
    torch::Tensor loss = error.pow(2).sum(1).mean() / variance;
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor fired = (f > 0).any(0);
      since_fired = torch::where(fired, torch::zeros_like(since_fired), since_fired + x.size(0));
    }
    const torch::Tensor dead = since_fired >= options.dead_after;
    const int64_t dead_count = dead.sum().item<int64_t>();
    if (dead_count > 0) {
      // AuxK: the dead features' strongest pre-activations reconstruct what the live ones miss.
      const int aux = int(std::min<int64_t>(options.aux_k, dead_count));
      const torch::Tensor dead_pre = pre.masked_fill(~dead.unsqueeze(0), -std::numeric_limits<float>::infinity());
      const auto [aux_values, aux_indices] = dead_pre.topk(aux, 1);
      const torch::Tensor aux_f = torch::zeros_like(pre).scatter(1, aux_indices, torch::relu(aux_values));
      const torch::Tensor aux_hat = torch::mm(aux_f, W_dec);
      loss = loss + (error.detach() - aux_hat).pow(2).sum(1).mean() / variance / 32.0;
    }
    optimiser->zero_grad();
    loss.backward();
    optimiser->step();
    {
      torch::NoGradGuard no_grad;
      W_dec.div_(W_dec.norm(2, 1, true));
    }
    if (progress)
      progress({step + 1, options.steps, (error.pow(2).sum(1).mean() / variance).item<double>(),
                double(dead_count) / double(features)});
  }
  SparseAutoencoder sae;
  sae.format = "SAELens";
  sae.kind = "topk";
  sae.activation = SaeActivation::TopK;
  sae.d_in = d_in;
  sae.d_sae = features;
  sae.k = options.k;
  sae.W_enc = W_enc.detach().contiguous();
  sae.b_enc = b_enc.detach().contiguous();
  sae.W_dec = W_dec.detach().contiguous();
  sae.b_dec = b_dec.detach().contiguous();
  return sae;
}

void save_saelens_folder(const SparseAutoencoder& sae, const std::string& folder, const nlohmann::json& metadata) {
  if (sae.normalisation != SaeNormalisation::None || sae.pre_scale.defined() ||
      (sae.activation != SaeActivation::TopK && sae.activation != SaeActivation::Relu))
    throw std::invalid_argument("save_saelens_folder writes TopK and ReLU SAEs without input normalisation");
  std::filesystem::create_directories(folder);
  nlohmann::json config = {{"d_in", sae.d_in},
                           {"d_sae", sae.d_sae},
                           {"dtype", "float32"},
                           {"device", "cpu"},
                           {"apply_b_dec_to_input", sae.subtract_b_dec},
                           {"normalize_activations", "none"},
                           {"reshape_activations", "none"},
                           {"metadata", metadata},
                           {"architecture", sae.activation == SaeActivation::TopK ? "topk" : "standard"}};
  if (sae.activation == SaeActivation::TopK) {
    config["k"] = sae.k;
    config["rescale_acts_by_decoder_norm"] = false;
  }
  save_safetensors(folder + "/sae_weights.safetensors",
                   {{"W_enc", sae.W_enc}, {"b_enc", sae.b_enc}, {"W_dec", sae.W_dec}, {"b_dec", sae.b_dec}});
  write_file_atomically(folder + "/cfg.json", [&](std::ostream& out) { out << json_text(config) << "\n"; });
}

}  // namespace attnscope
