#include "models/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>

#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "core/number_text.h"
#include "datasets/glyph_task.h"
#include "models/demo_models.h"
#include "models/model_loader.h"

namespace attnscope {

namespace {

double learning_rate_at(const TrainOptions& options, int step) {
  if (step < options.warmup_steps) return options.learning_rate * (step + 1) / options.warmup_steps;
  const double progress = double(step - options.warmup_steps) / std::max(1, options.steps - options.warmup_steps);
  return options.learning_rate * 0.5 * (1.0 + std::cos(M_PI * std::min(progress, 1.0)));
}

// Training images of step `step`: disjoint per (seed, step), far below the held-out range.
uint64_t first_training_seed(const TrainOptions& options, int step) {
  return options.seed * 100'000'000ULL + uint64_t(step) * uint64_t(options.batch);
}

void save_training_state(const std::string& path, Backbone& model, torch::optim::AdamW& optimizer,
                         const TrainOptions& options, int step, double seconds) {
  auto metadata = demo_metadata(demo_recipe(options.recipe), glyph_class_names());
  metadata["train_recipe"] = options.recipe;
  metadata["train_step"] = std::to_string(step);
  metadata["train_steps"] = std::to_string(options.steps);
  metadata["train_seed"] = std::to_string(options.seed);
  metadata["train_seconds"] = std::to_string(seconds);
  save_safetensors(path, state_dict(model), metadata);
  // The optimiser's moments go beside the model, written then renamed like every other output.
  const std::string optimiser_path = path + ".optim";
  torch::save(optimizer, optimiser_path + ".tmp");
  std::filesystem::rename(optimiser_path + ".tmp", optimiser_path);
}

}  // namespace

double held_out_accuracy(Backbone& model, torch::Device device, int samples, int batch) {
  c10::InferenceMode inference_mode;
  const bool was_training = model.is_training();
  model.eval();
  int64_t correct = 0;
  for (int first = 0; first < samples; first += batch) {
    const int count = std::min(batch, samples - first);
    GlyphBatch data = make_glyph_batch(kHeldOutSeedBase + uint64_t(first), count);
    ForwardOptions options;
    options.capture = false;
    auto logits = model.forward(data.images.to(device), AttentionSettings{}, options).logits;
    correct += (logits.argmax(1).to(torch::kCPU) == data.labels).sum().item<int64_t>();
  }
  model.train(was_training);
  return double(correct) / std::max(1, samples);
}

TrainResult train_demo_model(const TrainOptions& options,
                             const std::function<void(const TrainProgress&)>& on_progress) {
  if (options.out.empty()) throw std::invalid_argument("--out is required");
  if (options.steps <= 0 || options.batch <= 0) throw std::invalid_argument("--steps and --batch must be positive");
  if (!(options.learning_rate > 0) || options.learning_rate > 10)
    throw std::invalid_argument("--lr must be a learning rate above 0 (at most 10), got " +
                                format_double(options.learning_rate));
  const DemoRecipe& recipe = demo_recipe(options.recipe);
  const torch::Device device = resolve_device(options.device);
  torch::manual_seed(options.seed);
  std::shared_ptr<Backbone> model = build_demo_model(recipe);
  model->to(device);

  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(options.learning_rate).weight_decay(options.weight_decay));
  int start_step = 0;
  double resumed_seconds = 0.0;
  if (!options.resume.empty()) {
    Checkpoint checkpoint = load_checkpoint(options.resume);
    LoadReport report;
    copy_weights(*model, checkpoint, report);
    if (!report.ok())
      throw CheckpointError(options.resume + " is not a '" + recipe.name + "' demo model: " + report.describe());
    // A run continues as it was: its recipe, and only forward (a finished run has nothing to do).
    const std::string trained_as = checkpoint.metadata["train_recipe"];
    if (!trained_as.empty() && trained_as != recipe.name)
      throw std::invalid_argument("--resume " + excerpt(options.resume) + " was trained with --variant " +
                                  excerpt(trained_as, 40) + ", not " + recipe.name + ": give --variant " +
                                  excerpt(trained_as, 40) + " to continue it");
    start_step = std::atoi(checkpoint.metadata["train_step"].c_str());
    if (start_step >= options.steps)
      throw std::invalid_argument("--resume " + excerpt(options.resume) + " has already run " +
                                  std::to_string(start_step) + " steps, --steps " + std::to_string(options.steps) +
                                  " leaves nothing to train: give --steps above " + std::to_string(start_step));
    resumed_seconds = std::atof(checkpoint.metadata["train_seconds"].c_str());
    if (std::filesystem::exists(options.resume + ".optim")) torch::load(optimizer, options.resume + ".optim");
  }

  model->train();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto next_batch = std::async(std::launch::async, make_glyph_batch, first_training_seed(options, start_step),
                               options.batch, GlyphTaskOptions{});
  ForwardOptions forward_options;
  forward_options.capture = false;
  double running_loss = 0.0, running_accuracy = 0.0;
  GlyphBatch first_batch;
  TrainResult result;
  result.resumed_from = start_step;
  result.steps = start_step;
  for (int step = start_step; step < options.steps; ++step) {
    GlyphBatch data = options.repeat_first_batch && step > start_step ? first_batch : next_batch.get();
    if (options.repeat_first_batch && step == start_step) first_batch = data;
    if (step + 1 < options.steps && !options.repeat_first_batch)
      next_batch = std::async(std::launch::async, make_glyph_batch, first_training_seed(options, step + 1),
                              options.batch, GlyphTaskOptions{});
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(learning_rate_at(options, step));
    auto images = data.images.to(device);
    auto labels = data.labels.to(device);
    auto logits = model->forward(images, AttentionSettings{}, forward_options).logits;
    auto loss = torch::nn::functional::cross_entropy(logits, labels);
    optimizer.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();

    const double momentum = step == start_step ? 0.0 : 0.95;
    result.last_loss = loss.item<double>();
    if (step == start_step) result.first_loss = result.last_loss;
    running_loss = momentum * running_loss + (1 - momentum) * result.last_loss;
    const double accuracy = (logits.argmax(1) == labels).to(torch::kFloat).mean().item<double>();
    running_accuracy = momentum * running_accuracy + (1 - momentum) * accuracy;
    const int done = step + 1;
    if (on_progress && (done % 10 == 0 || done == options.steps)) {
      const double seconds = std::max(elapsed(), 1e-9);
      TrainProgress progress{done,
                             options.steps,
                             running_loss,
                             running_accuracy,
                             double(done - start_step) * options.batch / seconds,
                             seconds,
                             seconds / (done - start_step) * (options.steps - done)};
      on_progress(progress);
    }
    if (done % options.checkpoint_every == 0 || done == options.steps)
      save_training_state(options.out, *model, optimizer, options, done, resumed_seconds + elapsed());
    result.steps = done;
  }
  result.final_loss = running_loss;
  result.train_seconds = resumed_seconds + elapsed();
  if (options.eval_samples > 0) result.held_out_accuracy = held_out_accuracy(*model, device, options.eval_samples);
  return result;
}

}  // namespace attnscope
