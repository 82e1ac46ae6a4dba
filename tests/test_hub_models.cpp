// The checkpoints researchers download (Hugging Face ViT/DeiT folders, OpenAI CLIP, DINOv2 hub files)
// and TorchScript files against independent Python references: tests/python/reference_hub_vit.py
// (written from transformers', OpenAI's and DINOv2's code) and eager PyTorch models exported by
// scripts/export_torchscript.py (tests/python/make_torchscript_cases.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/gradcam.h"
#include "core/cv_image.h"
#include "core/npy.h"
#include "models/checkpoint_layouts.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "session/app_state.h"
#include "tests/numeric_bounds.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_hub_models {

const std::string kFixtures = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/";

nlohmann::json read_cases(const std::string& folder) {
  std::ifstream in(kFixtures + folder + "/cases.json");
  if (!in)
    throw std::runtime_error("missing " + kFixtures + folder + "/cases.json (tests/python/make_all_fixtures.sh)");
  return nlohmann::json::parse(in);
}

// Every layer's rows of the case's queries, [L, h, Q, T], within `tolerance` of the reference.
void expect_rows_match(const ForwardOutput& output, const nlohmann::json& c, const std::string& folder,
                       double tolerance) {
  const auto reference = read_npy(kFixtures + folder + "/" + c.at("rows").get<std::string>());
  const auto queries = c.at("queries").get<std::vector<int64_t>>();
  ASSERT_EQ(reference.size(0), int64_t(output.layers.size()));
  for (int64_t layer = 0; layer < reference.size(0); ++layer)
    for (int64_t head = 0; head < reference.size(1); ++head)
      EXPECT_LT(max_abs_difference(output.layers[size_t(layer)].rows(0, head, queries), reference[layer][head]),
                tolerance)
          << "rows of layer " << layer << " head " << head;
}

TEST(HubParity, EveryLayoutMatchesItsAuthorsForward) {
  configure_threads(2);
  const auto cases = read_cases("hub_cases");
  ASSERT_GE(cases.size(), 10u);
  std::set<std::string> layouts;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    LoadedModel model = load_model(kFixtures + "hub_cases/" + c.at("model").get<std::string>(), {}, torch::kCPU);
    layouts.insert(to_string(model.vit_arch().source_layout));
    EXPECT_EQ(model.vit_arch().heads, c.at("heads").get<int>());
    EXPECT_EQ(model.vit_arch().output_kind == OutputKind::Logits ? "logits" : "embedding",
              c.at("output_kind").get<std::string>());
    const auto mean = c.at("mean").get<std::vector<float>>(), std = c.at("std").get<std::vector<float>>();
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_FLOAT_EQ(model.normalization.mean[i], mean[i]) << "mean";
      EXPECT_FLOAT_EQ(model.normalization.std[i], std[i]) << "std";
    }
    const auto input = read_npy(kFixtures + "hub_cases/" + c.at("input").get<std::string>());
    c10::InferenceMode inference_mode;
    const ForwardOutput output = model.forward(input, AttentionSettings{});
    EXPECT_EQ(output.layout.grid_h, c["grid"][0].get<int>());
    EXPECT_EQ(output.layout.grid_w, c["grid"][1].get<int>());
    EXPECT_EQ(output.layout.prefix_tokens(), c["num_prefix"].get<int>());
    EXPECT_EQ(output.layout.total_tokens(), c["tokens"].get<int>());
    const auto logits = read_npy(kFixtures + "hub_cases/" + c.at("logits").get<std::string>());
    ASSERT_EQ(output.logits.sizes(), logits.sizes());
    EXPECT_LT(max_abs_difference(output.logits, logits), 3e-5) << "output";
    expect_rows_match(output, c, "hub_cases", 2e-5);
  }
  for (const char* layout : {"hf-vit", "hf-deit", "openai-clip", "dinov2"})
    EXPECT_TRUE(layouts.count(layout)) << layout;
}

TEST(HubLayouts, ConfigLabelsAndClipHaveNoClasses) {
  const auto cases = read_cases("hub_cases");
  for (const auto& c : cases) {
    LoadedModel model = load_model(kFixtures + "hub_cases/" + c.at("model").get<std::string>(), {}, torch::kCPU);
    if (to_string(model.vit_arch().source_layout) == "hf-vit" && model.vit_arch().num_classes > 0) {
      // id2label from config.json names the outputs.
      ASSERT_EQ(int(model.class_names.size()), model.vit_arch().num_classes);
      EXPECT_NE(model.class_names.front().rfind("LABEL_", 0), 0u);
    }
    if (to_string(model.vit_arch().source_layout) == "openai-clip") {
      const torch::Tensor input =
          torch::zeros({1, 3, model.vit_arch().native_height(), model.vit_arch().native_width()});
      cv::Mat rgb(model.vit_arch().native_height(), model.vit_arch().native_width(), CV_8UC3, cv::Scalar(90, 120, 30));
      const InferenceResult result = run_inference(model, to_rgb_image(rgb), AttentionSettings{});
      EXPECT_TRUE(result.top.empty()) << "an embedding has no classes to rank";
    }
  }
}

TEST(HubLayouts, RegisterAndDistillationQueriesResolve) {
  TokenLayout layout;
  layout.has_class_token = true;
  layout.register_tokens = 4;
  layout.grid_h = layout.grid_w = 4;
  EXPECT_EQ(resolve_query("reg0", layout).token, 1);
  EXPECT_EQ(resolve_query("reg3", layout).token, 4);
  EXPECT_THROW(resolve_query("reg4", layout), std::invalid_argument);
  EXPECT_THROW(resolve_query("dist", layout), std::invalid_argument);
  EXPECT_EQ(resolve_query("1,2", layout).token, 5 + 4 + 2);
  EXPECT_THROW(resolve_query("x,2", layout), std::invalid_argument);
  layout.has_dist_token = true;
  EXPECT_EQ(resolve_query("dist", layout).token, 1);
  EXPECT_EQ(resolve_query("reg0", layout).token, 2);
  AppState state;
  EXPECT_NO_THROW(set_option(state, "query", "reg12"));
  EXPECT_NO_THROW(set_option(state, "query", "dist"));
  EXPECT_THROW(set_option(state, "query", "regx"), std::invalid_argument);
  EXPECT_THROW(set_option(state, "query", "3"), std::invalid_argument);
}

// CLIP has no classes: Grad-CAM differentiates the embedding's norm by default, or one dimension.
TEST(HubLayouts, GradCamOnAnEmbeddingTargetsItsNormOrOneDimension) {
  LoadedModel model = load_model(kFixtures + "hub_cases/clip_visual.safetensors", {}, torch::kCPU);
  ASSERT_EQ(to_string(model.vit_arch().output_kind), "embedding");
  const torch::Tensor image = torch::randn({1, 3, model.vit_arch().native_height(), model.vit_arch().native_width()},
                                           torch::Generator(at::detail::createCPUGenerator(7)));
  torch::Tensor embedding;
  {
    c10::InferenceMode inference_mode;
    embedding = model.forward(image, AttentionSettings{}).logits[0];
  }
  GradCamOptions options;
  options.layer = "blocks.-1.norm1";
  const GradCamResult by_norm = grad_cam(model.native("Grad-CAM"), image, AttentionSettings{}, options);
  EXPECT_EQ(by_norm.target_class, -1);
  EXPECT_NEAR(by_norm.score, embedding.norm().item<double>(), 1e-4);
  EXPECT_GT(by_norm.cam.max().item<double>(), 0.0);
  EXPECT_EQ(output_name(model, -1), "norm of the embedding");
  options.target = class_target(5);
  const GradCamResult by_dimension = grad_cam(model.native("Grad-CAM"), image, AttentionSettings{}, options);
  EXPECT_NEAR(by_dimension.score, embedding[5].item<double>(), 1e-4);
  EXPECT_FALSE(torch::allclose(by_norm.cam, by_dimension.cam));
  options.target = class_target(int(embedding.size(0)));
  EXPECT_THROW(grad_cam(model.native("Grad-CAM"), image, AttentionSettings{}, options), std::invalid_argument);
}

// timm's own CLIP towers (norm_pre, a head without bias) load from timm keys; QuickGELU, which keys
// cannot show, comes from --arch act=quick_gelu (and CLIP's eps=1e-5) and then gives OpenAI's embedding exactly.
TEST(HubLayouts, TimmLayoutClipTowerMatchesOpenAIsWithQuickGelu) {
  const std::string openai = kFixtures + "hub_cases/clip_visual.safetensors";
  Checkpoint checkpoint = load_checkpoint(openai);
  ASSERT_EQ(to_string(adopt_known_layout(checkpoint, openai).layout), "openai-clip");
  const std::string timm_file =
      ::testing::TempDir() + "/clip_timm_layout_" + std::to_string(::getpid()) + ".safetensors";
  save_safetensors(timm_file, checkpoint.tensors);
  LoadedModel reference = load_model(openai, {}, torch::kCPU);
  LoadedModel plain = load_model(timm_file, {}, torch::kCPU);
  LoadedModel quick = load_model(timm_file, ArchOverrides::parse("act=quick_gelu,eps=1e-5"), torch::kCPU);
  EXPECT_TRUE(quick.vit_arch().norm_pre);
  EXPECT_FALSE(quick.vit_arch().head_bias);
  bool noted = false;
  for (const auto& note : plain.report.notes) noted = noted || note.find("act=quick_gelu") != std::string::npos;
  EXPECT_TRUE(noted);
  const torch::Tensor image =
      torch::randn({1, 3, reference.vit_arch().native_height(), reference.vit_arch().native_width()});
  c10::InferenceMode inference_mode;
  const torch::Tensor expected = reference.forward(image, {}).logits;
  EXPECT_LT((quick.forward(image, {}).logits - expected).abs().max().item<double>(), 1e-6);
  EXPECT_GT((plain.forward(image, {}).logits - expected).abs().max().item<double>(), 1e-4);
  EXPECT_THROW(ArchOverrides::parse("act=relu"), std::invalid_argument);
  for (const char* bad : {"eps=nan", "eps=-1", "eps=inf", "eps=2", "heads=-3", "heads=99999999999", "heads=5000"})
    EXPECT_THROW(ArchOverrides::parse(bad), std::invalid_argument) << bad;
}

// OpenAI's released CLIP files are TorchScript archives: their parameters are read (their forward
// never runs) and give the same embedding as the state_dict of the same weights.
TEST(HubLayouts, OpenAIsTorchScriptClipFileLoadsItsWeights) {
  LoadedModel archive = load_model(kFixtures + "hub_cases/clip_openai_jit.pt", {}, torch::kCPU);
  LoadedModel state_dict = load_model(kFixtures + "hub_cases/clip_full.pth", {}, torch::kCPU);
  EXPECT_FALSE(archive.is_scripted());
  EXPECT_EQ(to_string(archive.vit_arch().source_layout), "openai-clip");
  EXPECT_EQ(archive.format, "torchscript-weights");
  const torch::Tensor image =
      torch::randn({1, 3, archive.vit_arch().native_height(), archive.vit_arch().native_width()});
  c10::InferenceMode inference_mode;
  EXPECT_LT((archive.forward(image, {}).logits - state_dict.forward(image, {}).logits).abs().max().item<double>(),
            1e-6);
}

TEST(TorchScriptParity, ExportedModelsMatchEagerPyTorch) {
  configure_threads(2);
  const auto cases = read_cases("torchscript_cases");
  ASSERT_GE(cases.size(), 2u);
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    LoadedModel model =
        load_model(kFixtures + "torchscript_cases/" + c.at("model").get<std::string>(), {}, torch::kCPU);
    ASSERT_TRUE(model.is_scripted());
    EXPECT_EQ(int(model.vit_arch().blocks.size()), c.at("layers").get<int>());
    EXPECT_EQ(model.vit_arch().prefix_tokens(), c.at("prefix_tokens").get<int>());
    const auto input = read_npy(kFixtures + "torchscript_cases/" + c.at("input").get<std::string>());
    const ForwardOutput output = model.forward(input, AttentionSettings{});
    EXPECT_EQ(output.layout.grid_h, c["grid"][0].get<int>());
    EXPECT_EQ(output.layout.grid_w, c["grid"][1].get<int>());
    const auto expected = read_npy(kFixtures + "torchscript_cases/" + c.at("output").get<std::string>());
    EXPECT_LT(max_abs_difference(output.logits, expected), 1e-5) << "output";
    expect_rows_match(output, c, "torchscript_cases", 1e-5);
  }
}

TEST(TorchScript, SwapsAndGradCamSayWhyTheyAreOff) {
  const auto cases = read_cases("torchscript_cases");
  LoadedModel model =
      load_model(kFixtures + "torchscript_cases/" + cases.front().at("model").get<std::string>(), {}, torch::kCPU);
  cv::Mat rgb(model.vit_arch().native_height(), model.vit_arch().native_width(), CV_8UC3, cv::Scalar(40, 80, 160));
  AttentionSettings swapped;
  swapped.variant = Variant::Linear;
  try {
    run_inference(model, to_rgb_image(rgb), swapped);
    FAIL() << "a variant swap on a TorchScript file must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TorchScript"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model.native("Grad-CAM"), std::invalid_argument);
  const InferenceResult native = run_inference(model, to_rgb_image(rgb), AttentionSettings{});
  // Rows of a recorded softmax are probabilities.
  const auto row = native.forward.layers.back().row(0, 0, 0);
  EXPECT_NEAR(row.sum().item<double>(), 1.0, 1e-5);
}

TEST(TorchScript, FileWithoutMetadataIsRefusedWithWhatToDo) {
  try {
    load_model(kFixtures + "torchscript_cases/no_metadata.pt", {}, torch::kCPU);
    FAIL() << "a TorchScript file without attnscope.json must be refused";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("export_torchscript.py"), std::string::npos) << e.what();
  }
}

}  // namespace test_hub_models
}  // namespace attnscope
