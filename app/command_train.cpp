// `attnscope train`: trains one demo model on the generated glyph task and writes its model card.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/atomic_file.h"
#include "models/demo_models.h"
#include "models/model_loader.h"
#include "models/trainer.h"

namespace attnscope {

namespace {

std::string duration_text(double seconds) {
  std::ostringstream out;
  out << int(seconds) / 60 << "m" << std::setw(2) << std::setfill('0') << int(seconds) % 60 << "s";
  return out.str();
}

void draw_progress_bar(const TrainProgress& p) {
  const int width = 30;
  const int filled = int(double(width) * p.step / std::max(1, p.total_steps));
  std::cerr << "\r[" << std::string(size_t(filled), '#') << std::string(size_t(width - filled), '.') << "] " << p.step
            << "/" << p.total_steps << "  loss " << std::fixed << std::setprecision(3) << p.loss << "  acc "
            << std::setprecision(3) << p.accuracy << "  " << std::setprecision(1) << p.images_per_second << " img/s  "
            << duration_text(p.elapsed_seconds) << " (eta " << duration_text(p.eta_seconds) << ")   " << std::flush;
}

}  // namespace

CommandSyntax train_syntax() {
  const std::vector<std::string> state_options = {"device"};
  std::string recipes;
  for (const DemoRecipe& recipe : demo_recipes()) recipes += (recipes.empty() ? "" : ", ") + recipe.name;
  const std::vector<CommandFlag> flags = {
      {"variant", "NAME", "demo recipe: " + recipes, "softmax"},
      {"steps", "N", "optimiser steps", "3000"},
      {"batch", "N", "images per step", "64"},
      {"lr", "X", "peak learning rate (AdamW, warm-up then cosine)", "0.001"},
      {"seed", "N", "seed of the weights and of the training images", "0"},
      {"out", "FILE", "model file to write (.safetensors); a model card FILE.md goes beside it", ""},
      {"resume", "FILE", "continue a run from a file it wrote", ""},
      {"eval-samples", "N", "held-out images for the final accuracy", "1000"},
  };
  return {"attnscope train --variant NAME --out FILE [--steps N]", state_options, flags};
}

int train_command(const Args& args) {
  auto parsed = parse_or_print_help(args, train_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  configure_threads();
  TrainOptions options;
  options.recipe = line.flags["variant"];
  options.steps = line.flag_int("steps");
  options.batch = line.flag_int("batch");
  options.learning_rate = line.flag_double("lr");
  options.seed = uint64_t(line.flag_int("seed"));
  options.out = line.flags["out"];
  options.resume = line.flags["resume"];
  options.eval_samples = line.flag_int("eval-samples");
  if (options.eval_samples < 0) throw std::invalid_argument("--eval-samples must be 0 (no evaluation) or more");
  options.device = line.state.device;
  const DemoRecipe& recipe = demo_recipe(options.recipe);
  if (!options.out.empty() && std::filesystem::path(options.out).has_parent_path())
    std::filesystem::create_directories(std::filesystem::path(options.out).parent_path());

  const TrainResult result = train_demo_model(options, draw_progress_bar);
  std::cerr << "\n";

  std::ostringstream command;
  command << "attnscope train --variant " << recipe.name << " --steps " << options.steps << " --batch " << options.batch
          << " --lr " << options.learning_rate << " --seed " << options.seed << " --out " << options.out;
  const std::string card_path = std::filesystem::path(options.out).replace_extension(".md").string();
  write_file_atomically(card_path, [&](std::ostream& card) {
    card << "# Demo model: " << recipe.name << "\n\n"
         << "- Attention: " << recipe.description << "\n"
         << "- Architecture: " << demo_architecture_text(recipe) << "\n"
         << "- Task: sign in clutter (datasets/glyph_task.h): name the one digit, printed on a light plate, among "
            "capital letters and shapes on a textured background; training images are generated on the fly from the "
            "seed\n"
         << "- Held-out accuracy: " << std::fixed << std::setprecision(3) << result.held_out_accuracy << " on "
         << options.eval_samples << " generated images (seeds from 10^12, never seen in training)\n"
         << "- Training: " << result.steps << " steps x " << options.batch << " images, AdamW lr " << std::defaultfloat
         << options.learning_rate << std::fixed << ", wd " << options.weight_decay << ", final training loss "
         << std::setprecision(3) << result.final_loss << ", " << duration_text(result.train_seconds) << " on "
         << torch::get_num_threads() << " CPU threads\n"
         << "- Reproduce: `" << command.str() << "`\n";
  });
  std::cout << "attnscope train: " << recipe.name << ": held-out accuracy " << result.held_out_accuracy << " after "
            << result.steps << " steps (" << duration_text(result.train_seconds) << "); wrote " << options.out
            << " and " << card_path << "\n";
  return 0;
}

}  // namespace attnscope
