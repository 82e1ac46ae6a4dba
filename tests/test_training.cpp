// Training: every demo recipe learns (overfits one batch through the whole training path) and a
// run resumes from its checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/checkpoint.h"
#include "models/demo_models.h"
#include "models/model_loader.h"
#include "models/trainer.h"

namespace attnscope {
namespace test_training {

namespace fs = std::filesystem;

fs::path scratch_folder(const std::string& name) {
  auto folder = fs::temp_directory_path() / ("attnscope-train-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

TEST(Training, EveryRecipeLowersTheLossOnOneBatch) {
  const auto folder = scratch_folder("overfit");
  for (const auto& recipe : demo_recipes()) {
    SCOPED_TRACE(recipe.name);
    TrainOptions options;
    options.recipe = recipe.name;
    // 15 steps of 4 images: the worst recipe ends at 0.28 of its first loss (l2vit), the best at 0.015.
    options.steps = 15;
    options.batch = 4;
    options.learning_rate = 2e-3;
    options.warmup_steps = 3;
    options.eval_samples = 0;
    options.repeat_first_batch = true;
    options.device = "cpu";
    options.out = (folder / (recipe.name + ".safetensors")).string();
    const TrainResult result = train_demo_model(options, nullptr);
    EXPECT_EQ(result.steps, options.steps);
    EXPECT_LT(result.last_loss, 0.5 * result.first_loss)
        << "first " << result.first_loss << " last " << result.last_loss;
    // What it wrote loads back as the same architecture, natively as its variant.
    LoadedModel model = load_model(options.out, {}, torch::kCPU);
    if (recipe.family == DemoFamily::Vit)
      EXPECT_EQ(model.vit_arch().blocks[0].attention.native, recipe.attention);
    else
      EXPECT_EQ(model.family(), build_demo_model(recipe)->family());
    EXPECT_EQ(model.class_names.size(), 10u);
  }
  fs::remove_all(folder);
}

TEST(Training, ResumesFromItsCheckpoint) {
  const auto folder = scratch_folder("resume");
  TrainOptions options;
  options.steps = 4;
  options.batch = 4;
  options.eval_samples = 0;
  options.device = "cpu";
  options.checkpoint_every = 2;
  options.out = (folder / "first.safetensors").string();
  train_demo_model(options, nullptr);
  EXPECT_TRUE(fs::exists(options.out + ".optim"));
  EXPECT_EQ(load_checkpoint(options.out).metadata.at("train_step"), "4");

  TrainOptions resumed = options;
  resumed.steps = 6;
  resumed.resume = options.out;
  resumed.out = (folder / "second.safetensors").string();
  const TrainResult result = train_demo_model(resumed, nullptr);
  EXPECT_EQ(result.resumed_from, 4);
  EXPECT_EQ(result.steps, 6);
  EXPECT_EQ(load_checkpoint(resumed.out).metadata.at("train_step"), "6");
  fs::remove_all(folder);
}

}  // namespace test_training
}  // namespace attnscope
