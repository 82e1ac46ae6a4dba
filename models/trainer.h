// Training a demo model on the generated glyph task with the same model code and LibTorch
// autograd: AdamW, warm-up plus cosine schedule, checkpoints that can be resumed.
#pragma once

#include <functional>
#include <string>

#include "models/backbone.h"

namespace attnscope {

struct TrainOptions {
  std::string recipe = "softmax";  // a demo recipe name (models/demo_models.h)
  int steps = 3000;
  int batch = 64;
  double learning_rate = 1e-3;
  double weight_decay = 0.05;
  int warmup_steps = 150;
  uint64_t seed = 0;   // weights and training data; held-out data never depends on it
  std::string out;     // the model file (.safetensors); OUT.optim holds the optimiser
  std::string resume;  // a file written by an earlier run: continue from its step
  int checkpoint_every = 250;
  int eval_samples = 1000;
  std::string device = "auto";
  bool repeat_first_batch = false;  // overfit one batch: a quick check of the whole training path
};

struct TrainProgress {
  int step = 0;
  int total_steps = 0;
  double loss = 0.0;      // running mean over recent steps
  double accuracy = 0.0;  // running training accuracy
  double images_per_second = 0.0;
  double elapsed_seconds = 0.0;
  double eta_seconds = 0.0;
};

struct TrainResult {
  int resumed_from = 0;  // the step a resumed run started at
  int steps = 0;
  double first_loss = 0.0;  // of this run's first step
  double last_loss = 0.0;   // of its last step
  double final_loss = 0.0;  // running mean at the end
  double held_out_accuracy = 0.0;
  double train_seconds = 0.0;  // this run's time, plus the resumed run's
};

TrainResult train_demo_model(const TrainOptions& options, const std::function<void(const TrainProgress&)>& on_progress);

// Accuracy on `samples` held-out glyph images (seeds from kHeldOutSeedBase), native attention.
double held_out_accuracy(Backbone& model, torch::Device device, int samples, int batch = 100);

}  // namespace attnscope
