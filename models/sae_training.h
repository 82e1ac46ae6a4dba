// Training a sparse autoencoder on a model's residual stream, and writing it as SAELens 6 writes its
// own (cfg.json + sae_weights.safetensors), so that SAELens, and attnscope's reader, open it as is:
// the bundled demo SAE (attnscope train-sae) is made here.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "models/sparse_autoencoder.h"

namespace attnscope {

// A TopK SAE as SAELens's topk architecture computes it (b_dec subtracted from the input, the k
// largest pre-activations relu'd), trained on the MSE of its reconstruction with Adam, its decoder
// rows kept at unit norm, b_dec started at the first batch's mean. Features that have not fired for
// `dead_after` tokens learn from the top `aux_k` of their pre-activations on the reconstruction's
// error (OpenAI's AuxK, weight 1/32), as saev's and dictionary_learning's TopK trainers do.
struct SaeTrainOptions {
  int64_t features = 384;
  int k = 8;
  int steps = 2000;
  double learning_rate = 1e-3;
  uint64_t seed = 0;
  int64_t dead_after = 200000;
  int aux_k = 64;
};

struct SaeTrainProgress {
  int step = 0, steps = 0;
  double normalised_mse = 0;  // of the step's batch
  double dead_fraction = 0;   // features silent for `dead_after` tokens
};

// `batch(step)`: the activations [N, d_in] float32 the step learns from.
SparseAutoencoder train_top_k_sae(int64_t d_in, const SaeTrainOptions& options,
                                  const std::function<torch::Tensor(int step)>& batch,
                                  const std::function<void(const SaeTrainProgress&)>& progress = {});

// Writes `sae` (a TopK or ReLU SAE with no input normalisation) into `folder` as SAELens 6 does:
// cfg.json (its fields, `metadata` with the hook and `extra` merged in) and sae_weights.safetensors.
void save_saelens_folder(const SparseAutoencoder& sae, const std::string& folder, const nlohmann::json& metadata);

}  // namespace attnscope
