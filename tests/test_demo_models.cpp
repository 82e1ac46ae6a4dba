// The demo models shipped in assets/models: each loads as its recipe's native attention and still
// reaches the held-out accuracy its model card states.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/assets.h"
#include "models/demo_models.h"
#include "models/model_loader.h"
#include "models/trainer.h"
#include "tests/cli_process.h"

namespace attnscope {
namespace test_demo_models {

struct CardAccuracy {
  double accuracy = -1;
  int samples = 0;
};

// The card's "Held-out accuracy: 0.938 on 1000 generated images" line.
CardAccuracy read_card_accuracy(const std::string& card_path) {
  std::ifstream in(card_path);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch match;
  const std::string content = text.str();
  CardAccuracy card;
  if (std::regex_search(content, match, std::regex(R"(Held-out accuracy: ([0-9.]+) on ([0-9]+) generated)"))) {
    card.accuracy = std::stod(match[1]);
    card.samples = std::stoi(match[2]);
  }
  return card;
}

class ShippedDemoModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedDemoModel, LoadsNativelyAndReachesItsCardAccuracy) {
  const DemoRecipe& recipe = demo_recipe(GetParam());
  const std::string model_path = asset_path("models/" + recipe.name + ".safetensors");
  const CardAccuracy card = read_card_accuracy(asset_path("models/" + recipe.name + ".md"));
  ASSERT_GT(card.samples, 0) << "no held-out accuracy line in the model card";

  LoadedModel model = load_model(model_path, {}, torch::kCPU);
  if (recipe.family != DemoFamily::Vit) {
    // A hierarchical demo: its family, stages and native attention as the recipe builds them.
    EXPECT_EQ(model.family(), build_demo_model(recipe)->family());
    const nlohmann::json described = model.backbone->describe(), built = build_demo_model(recipe)->describe();
    EXPECT_EQ(described.at("stages"), built.at("stages"));
    EXPECT_EQ(described.value("attn_type", ""), built.value("attn_type", ""));
    const double accuracy = held_out_accuracy(*model.backbone, torch::kCPU, card.samples);
    EXPECT_NEAR(accuracy, card.accuracy, 0.01) << recipe.name;
    EXPECT_GT(accuracy, 0.2) << recipe.name;
    return;
  }
  const VitArch expected = demo_arch(recipe);
  ASSERT_EQ(model.vit_arch().depth, expected.depth);
  EXPECT_EQ(model.vit_arch().embed_dim, expected.embed_dim);
  EXPECT_EQ(model.vit_arch().heads, expected.heads);
  EXPECT_EQ(model.vit_arch().pos_grid_h, expected.pos_grid_h);
  for (int block = 0; block < model.vit_arch().depth; ++block) {
    const BlockArch& loaded = model.vit_arch().blocks[size_t(block)];
    EXPECT_EQ(loaded.attention.native, recipe.attention) << "block " << block;
    EXPECT_EQ(loaded.attention.dwc_kernel, recipe.dwc_kernel) << "block " << block;
    EXPECT_EQ(loaded.attention.anchors, recipe.anchors) << "block " << block;
    EXPECT_EQ(loaded.attention.agents, recipe.agents) << "block " << block;
    EXPECT_EQ(loaded.attention.inline_residual, recipe.attention == NativeAttention::InLine) << "block " << block;
    EXPECT_EQ(loaded.local_concentration, recipe.local_concentration) << "block " << block;
  }

  // The same held-out seeds as the card: only summation order can differ (thread count), so a
  // handful of borderline images at most may flip.
  const double accuracy = held_out_accuracy(model.vit(), torch::kCPU, card.samples);
  EXPECT_NEAR(accuracy, card.accuracy, 0.01) << recipe.name;
  // Twice chance (0.1) at least: a model that learned nothing must not ship.
  EXPECT_GT(accuracy, 0.2) << recipe.name;
}

// `attnscope eval` end to end on a shipped model: its accuracy is the trainer's held-out accuracy on
// the same seeds, and every focus number is a fraction.
TEST(EvalCommand, ReportsAccuracyAndFocusOfAShippedModel) {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("attnscope-eval-test-" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string model_path = asset_path("models/softmax.safetensors");
  const int samples = 30;
  const std::string command = std::string(ATTNSCOPE_CLI) + " eval --models '" + model_path + "' --samples " +
                              std::to_string(samples) + " --device cpu --out '" + out.string() + "' > /dev/null";
  ASSERT_EQ(testing::cli_system(command), 0);
  std::ifstream in(out / "eval.json");
  const nlohmann::json report = nlohmann::json::parse(in);
  ASSERT_EQ(report["models"].size(), 1u);
  const nlohmann::json& entry = report["models"][0];

  LoadedModel model = load_model(model_path, {}, torch::kCPU);
  // Batched differently (50 against 100 images), so one borderline image at most may flip.
  EXPECT_NEAR(entry["accuracy"].get<double>(), held_out_accuracy(model.vit(), torch::kCPU, samples),
              1.0 / samples + 1e-9);
  ASSERT_EQ(entry["layers"].size(), size_t(model.vit_arch().depth));
  for (const auto& layer : entry["layers"]) {
    EXPECT_GE(layer["mass_inside"].get<double>(), 0.0);
    EXPECT_LE(layer["mass_inside"].get<double>(), 1.0);
    EXPECT_GE(layer["pointing"].get<double>(), 0.0);
    EXPECT_LE(layer["pointing"].get<double>(), 1.0);
    // Every layer's rank, within its matrix (145 tokens) and, softmax, above a head's dimension.
    EXPECT_EQ(layer["kind"], "softmax global");
    EXPECT_EQ(layer["matrix_size"].get<int>(), 145);
    EXPECT_GT(layer["rank"].get<double>(), 32.0);
    EXPECT_LE(layer["rank"].get<double>(), 145.0);
  }
  EXPECT_GE(entry["gradcam"]["mass_inside"].get<double>(), 0.0);
  EXPECT_LE(entry["gradcam"]["mass_inside"].get<double>(), 1.0);
  const double uniform = report["uniform_mass_inside"].get<double>();
  EXPECT_GT(uniform, 0.0);
  EXPECT_LT(uniform, 0.5);  // the sign covers a minority of the patches
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ShippedDemoModel,
                         ::testing::Values("softmax", "linear", "focused", "flatten", "l2vit", "anchor", "agent",
                                           "inline", "flatten_swin", "pola_swin", "l2vit_hierarchical", "mlla"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace test_demo_models
}  // namespace attnscope
