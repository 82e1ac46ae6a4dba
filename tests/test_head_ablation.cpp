// Head ablation as a setting (issue 35): `--ablate L.H,..` / the workbench's DLA clicks knock heads out
// of every forward of a ViT (VisionTransformerImpl::forward), so every output of `run`, every map and
// every gradient method is the ablated model's. Checked against the same independent float64 reference
// as tests/test_residual_stream.cpp (ViT-Prisma's hook_z zeroed or replaced by its mean), bit for bit
// against the residual-stream engine's ablate_heads, through the CLI (`run --ablate`, `analyze dla`,
// `logit-lens`, `patching`) and for the refusals. Tolerances as tests/test_residual_stream.cpp states
// them: an ablated forward is the same float32 computation as an unablated one (kOutputTolerance).
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>
#include <opencv2/imgcodecs.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/residual_stream.h"
#include "core/assets.h"
#include "core/image.h"
#include "core/npy.h"
#include "models/head_ablation.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "tests/case_folder.h"
#include "tests/cli_process.h"
#include "tests/numeric_bounds.h"
#include "tests/residual_stream_cases.h"
#include "tests/test_folder.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_head_ablation {

constexpr double kOutputTolerance = 1e-4;

const CaseFolder& folder() { return residual_stream_cases(); }

// dla_components.csv's rows: the component's name and its value.
std::vector<std::pair<std::string, double>> read_components(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "component,value");
  std::vector<std::pair<std::string, double>> rows;
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    rows.emplace_back(line.substr(0, comma), std::stod(line.substr(comma + 1)));
  }
  return rows;
}

void expect_refusal(const std::function<void()>& action, const std::string& words) {
  try {
    action();
    ADD_FAILURE() << "not refused; expected: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(HeadAblation, TheHeadListParsesOnceAndPrintsAsItParses) {
  EXPECT_EQ(parse_head_list("3.1,5.0"), (std::vector<HeadIndex>{{3, 1}, {5, 0}}));
  EXPECT_EQ(parse_head_list("3.1+5.0"), (std::vector<HeadIndex>{{3, 1}, {5, 0}}));  // as panel specs write it
  EXPECT_TRUE(parse_head_list("none").empty());
  EXPECT_TRUE(parse_head_list("").empty());
  EXPECT_EQ(head_list_text(parse_head_list("11.7,0.0")), "11.7,0.0");
  EXPECT_EQ(head_list_text({}), "none");
  expect_refusal([] { parse_head_list("3"); }, "'3' is not a head");
  expect_refusal([] { parse_head_list("3.x"); }, "'3.x' is not a head");
  expect_refusal([] { parse_head_list("-1.0"); }, "is not a head");
  expect_refusal([] { parse_head_list("1.2,1.2"); }, "listed twice");
  // The knob row: the option, sessions and request keys read it.
  const AttentionKnob* ablate = find_attention_knob("ablate");
  ASSERT_NE(ablate, nullptr);
  AttentionSettings settings;
  const std::string unablated_key = knobs_key(settings);
  ablate->set(settings, "2.1,0.3");
  EXPECT_EQ(ablate->text(settings), "2.1,0.3");
  EXPECT_NE(knobs_key(settings), unablated_key);
  const AttentionKnob* kind = find_attention_knob("ablation");
  ASSERT_NE(kind, nullptr);
  kind->set(settings, "mean");
  EXPECT_EQ(settings.ablation.kind, AblationKind::Mean);
  expect_refusal([&] { kind->set(settings, "half"); }, "half");
  // Sessions save the ablation and give it back.
  AppState state;
  set_option(state, "ablate", "1.0,2.1");
  set_option(state, "ablation", "mean");
  set_option(state, "ablation-images", "some/folder");
  const nlohmann::json saved = to_json(state);
  EXPECT_EQ(saved.at("ablate"), "1.0,2.1");
  AppState restored;
  apply_json(restored, saved);
  EXPECT_TRUE(restored.attention.ablation == state.attention.ablation);
}

TEST(HeadAblation, EveryForwardRunsWithoutTheAblatedHeadsAsPrismasHookedForward) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel loaded = load_model(folder().dir() + c.at("model").get<std::string>(), {}, torch::kCPU);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    const torch::Tensor input = folder().array(c, "input");
    AttentionSettings settings = case_settings(c);
    settings.ablation.heads = case_ablated_heads(c);

    // The model's own forward (what run, the maps and the analyses call), with captures.
    const ForwardOutput zero = model.forward(input, settings);
    EXPECT_LT(max_abs_difference(zero.logits, folder().array(c, "zero_output")), kOutputTolerance);
    const torch::Tensor rows = folder().array(c, "zero_rows");
    const auto queries = c.at("queries").get<std::vector<int64_t>>();
    ASSERT_EQ(int64_t(zero.layers.size()), rows.size(0));
    for (int64_t layer = 0; layer < rows.size(0); ++layer)
      for (int64_t head = 0; head < rows.size(1); ++head)
        EXPECT_LT(max_abs_difference(zero.layers[size_t(layer)].rows(0, head, queries), rows[layer][head]),
                  kOutputTolerance);
    // The same computation as the residual-stream engine's ablation, bit for bit.
    AttentionSettings plain = case_settings(c);
    const ResidualRun engine = ablate_heads(model, input, plain, {case_ablated_heads(c), AblationKind::Zero, {}});
    EXPECT_TRUE(torch::equal(zero.logits, engine.output.logits));
    // Without ablation the forward is the one it always was.
    EXPECT_TRUE(torch::equal(model.forward(input, plain).logits,
                             model.forward_with_streams(input, plain, {}, {}, {}, nullptr).logits));

    // Mean ablation: the means over the case's images, kept by the model for these settings.
    settings.ablation.kind = AblationKind::Mean;
    settings.ablation.images = "case images";
    expect_refusal([&] { model.forward(input, settings); }, "were not taken for this input size");
    std::vector<torch::Tensor> images;
    const torch::Tensor mean_images = folder().array(c, "mean_images");
    for (int64_t i = 0; i < mean_images.size(0); ++i) images.push_back(mean_images.narrow(0, i, 1));
    auto means = std::make_shared<HeadMeanOutputs>();
    means->z = average_head_outputs(model, images, settings);
    means->key = head_means_key(settings, c.at("tokens").get<int64_t>());
    model.set_head_means(means);
    const ForwardOutput mean = model.forward(input, settings);
    EXPECT_LT(max_abs_difference(mean.logits, folder().array(c, "mean_output")), kOutputTolerance);
    // Other attention settings took other means: refused, never silently reused.
    AttentionSettings other = settings;
    other.variant = Variant::Linear;
    expect_refusal([&] { model.forward(input, other); }, "were not taken");
  }
}

TEST(HeadAblation, OutOfRangeHeadsAndModelsWithoutOneResidualStreamAreRefused) {
  const auto& c = folder().cases().front();
  LoadedModel loaded = load_model(folder().dir() + c.at("model").get<std::string>(), {}, torch::kCPU);
  c10::InferenceMode inference;
  const torch::Tensor input = folder().array(c, "input");
  AttentionSettings settings;
  const int layers = loaded.vit_arch().depth, heads = loaded.vit_arch().heads;
  settings.ablation.heads = {{layers, 0}};
  expect_refusal([&] { loaded.forward(input, settings); }, "is outside 0.." + std::to_string(layers - 1));
  settings.ablation.heads = {{0, heads}};
  expect_refusal([&] { loaded.forward(input, settings); }, "heads a layer");
  settings.ablation.heads = {{0, 0}};
  settings.ablation.kind = AblationKind::Mean;
  expect_refusal([&] { loaded.forward(input, settings); }, "--ablation-images");
  LoadedModel swin = load_model(asset_path("models/flatten_swin.safetensors"), {}, torch::kCPU);
  settings.ablation.kind = AblationKind::Zero;
  expect_refusal([&] { swin.forward(torch::zeros({1, 3, 224, 224}), settings); }, "no single residual stream");
}

// A folder of images the mean ablation averages over, prepared as the input is.
std::filesystem::path write_images(const TestFolder& test, int count, int side) {
  const std::filesystem::path images = test.path() / "images";
  std::filesystem::create_directories(images);
  cv::RNG random(35);
  for (int i = 0; i < count; ++i) {
    cv::Mat bgr(side, side, CV_8UC3);
    random.fill(bgr, cv::RNG::UNIFORM, 0, 256);
    cv::imwrite((images / ("image_" + std::to_string(i) + ".png")).string(), bgr);
  }
  return images;
}

TEST(HeadAblation, MeanAblationPreparesItsFolderAsTheInputAndGradientsSeeIt) {
  TestFolder test("head_ablation_mean");
  const std::filesystem::path images = write_images(test, 3, 80);
  LoadedModel loaded = load_model(default_model_path(), {}, torch::kCPU);
  configure_input(loaded, {});
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(asset_path("images/sign_4.png"), kDefaultMaxPixels), {}, loaded);
  AttentionSettings settings;
  settings.ablation.heads = {{1, 0}, {2, 1}};
  settings.ablation.kind = AblationKind::Mean;
  settings.ablation.images = images.string();
  // Inside the inference mode run_inference uses, as the workbench calls it.
  const InferenceResult ablated = run_inference(loaded, prepared, settings);
  const HeadMeanOutputs* means = loaded.vit().head_means();
  ASSERT_NE(means, nullptr);
  EXPECT_EQ(means->images.size(), 3u);
  // The means are those of the folder's images prepared as the input was, through the unablated model.
  std::vector<torch::Tensor> inputs;
  for (const std::string& file : list_images(images.string()))
    inputs.push_back(image_to_tensor(prepare_model_input(load_image_rgb(file, kDefaultMaxPixels), {}, loaded),
                                     loaded.normalization));
  EXPECT_TRUE(torch::equal(means->z, average_head_outputs(loaded.vit(), inputs, settings)));
  const InferenceResult unablated = run_inference(loaded, prepared, {});
  EXPECT_GT(max_abs_difference(ablated.forward.logits, unablated.forward.logits), 1e-4);
  // A gradient through the ablated model (Grad-CAM's path): the means are ordinary tensors.
  const torch::Tensor input = image_to_tensor(prepared, loaded.normalization).requires_grad_(true);
  const ForwardOutput output = loaded.forward(input, settings);
  output.logits[0][4].backward();
  ASSERT_TRUE(input.grad().defined());
  EXPECT_GT(input.grad().abs().sum().item<double>(), 0.0);
  // An empty folder is refused naming it.
  std::filesystem::create_directories(test.path() / "empty");
  settings.ablation.images = (test.path() / "empty").string();
  expect_refusal([&] { run_inference(loaded, prepared, settings); }, "holds no images");
}

// The means stream through the folder: a folder 20 times larger costs no more memory (issue 60: every
// image was decoded and kept first; 5,000 tiny ones took 738 MB).
TEST(HeadAblation, TheMeansFolderStreamsInBoundedMemory) {
  TestFolder test("head_ablation_stream");
  const auto peak_kilobytes = [&](int count) {
    TestFolder images_folder("head_ablation_stream_" + std::to_string(count));
    const std::filesystem::path images = write_images(images_folder, count, 96);
    testing::CliRequest request({"run", "--ablate", "1.0", "--ablation", "mean", "--ablation-images", images.string(),
                                 "--matrix", "off", "--out", (images_folder.path() / "out").string()});
    request.fresh_process = true;  // its own peak, not a forked server's
    const testing::CliOutcome outcome = testing::run_cli_process(request);
    EXPECT_EQ(outcome.exit_code, 0) << count << " images";
    return outcome.peak_kilobytes;
  };
  const long few = peak_kilobytes(20), many = peak_kilobytes(400);
  // 380 more 96 x 96 images held as float32 tensors would be 42 MB more.
  EXPECT_LT(many - few, 15 * 1024) << "peak " << few << " kB with 20 images, " << many << " kB with 400";
}

// The folder's images pass --max-pixels as the input does (issue 60: --ablation-images ignored it).
TEST(HeadAblation, TheMeansFolderPassesTheMaxPixelsGuard) {
  TestFolder test("head_ablation_pixels");
  const std::filesystem::path images = write_images(test, 2, 200);
  const std::string out = (test.path() / "run").string();
  const CommandRun run = run_attnscope("run --ablate 1.0 --ablation mean --ablation-images '" + images.string() +
                                           "' --max-pixels 20000 --out '" + out + "'",
                                       test.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_NE(run.err.find("200x200 pixels, more than --max-pixels 20000"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/summary.json"));
}

TEST(HeadAblation, TheCommandsWriteTheAblatedModelsOutputsAndTheResidualStreamAnalyses) {
  TestFolder test("head_ablation_cli");
  const std::string image = asset_path("images/sign_4.png");
  CommandRun run = run_attnscope("run --ablate 1.0,2.1 --out '" + (test.path() / "run").string() + "'", test.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  LoadedModel loaded = load_model(default_model_path(), {}, torch::kCPU);
  configure_input(loaded, {});
  const RgbImage prepared = prepare_model_input(load_image_rgb(image, kDefaultMaxPixels), {}, loaded);
  AttentionSettings settings;
  settings.ablation.heads = {{1, 0}, {2, 1}};
  const torch::Tensor ablated = run_inference(loaded, prepared, settings).forward.logits[0];
  const torch::Tensor written = read_npy((test.path() / "run" / "logits.npy").string());
  EXPECT_LT(max_abs_difference(written, ablated), 1e-5 * (1.0 + ablated.abs().max().item<double>()));
  const torch::Tensor unablated = read_npy((test.path() / "run" / "logits_unablated.npy").string());
  const torch::Tensor reference = run_inference(loaded, prepared, {}).forward.logits[0];
  EXPECT_LT(max_abs_difference(unablated, reference), 1e-5 * (1.0 + reference.abs().max().item<double>()));
  const nlohmann::json summary = read_json_file(test.path() / "run" / "summary.json");
  EXPECT_EQ(summary.at("ablation").at("heads"), "1.0,2.1");

  run = run_attnscope("run --ablate 9.0 --out '" + (test.path() / "bad").string() + "'", test.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_NE(run.err.find("layer 9 is outside"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(test.path() / "bad" / "summary.json"));
  run = run_attnscope("run --ablate 1.0 --ablation mean --out '" + (test.path() / "bad2").string() + "'", test.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("--ablation-images"), std::string::npos) << run.err;

  // dla: the heads' grid and the components, which sum to the logit, as the engine computes them.
  run = run_attnscope("analyze --analysis dla --class 4 --out '" + (test.path() / "dla").string() + "'", test.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  VisionTransformerImpl& model = loaded.vit();
  const torch::Tensor input = image_to_tensor(prepared, loaded.normalization);
  const TokenLayout layout = model.arch().layout_for(prepared.rows, prepared.cols);
  torch::NoGradGuard no_grad;
  const ResidualRun recorded = record_residual_stream(model, input, {}, readout_recording(model, layout));
  const LogitAttribution dla = direct_logit_attribution(model, recorded, ReadoutTarget::of_class(4));
  // The same computation in another process: only float32 summation orders (threads, BLAS kernels) differ,
  // each within the relative error test_residual_stream.cpp bounds activations by (1e-5).
  const double dla_scale = 1.0 + dla.heads.abs().max().item<double>();
  EXPECT_LT(max_abs_difference(read_npy((test.path() / "dla" / "dla_heads.npy").string()), dla.heads),
            1e-5 * dla_scale);
  const auto components = read_components(test.path() / "dla" / "dla_components.csv");
  ASSERT_EQ(components.size(), dla.values.size());
  double sum = 0;
  for (size_t i = 0; i < components.size(); ++i) {
    EXPECT_EQ(components[i].first, dla.labels[i]);
    sum += components[i].second;
  }
  const nlohmann::json dla_summary = read_json_file(test.path() / "dla" / "summary.json");
  EXPECT_NEAR(sum, dla_summary.at("output").get<double>(), 1e-4);
  EXPECT_EQ(dla_summary.at("target").at("index"), 4);

  run = run_attnscope("analyze --analysis logit-lens --out '" + (test.path() / "lens").string() + "'", test.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  StreamRecording inputs;
  inputs.resid_pre = true;
  const torch::Tensor lens = patch_logit_lens(model, record_residual_stream(model, input, {}, inputs));
  EXPECT_LT(max_abs_difference(read_npy((test.path() / "lens" / "logit_lens.npy").string()), lens),
            1e-5 * (1.0 + lens.abs().max().item<double>()));

  run = run_attnscope("analyze --analysis patching --image2 '" + asset_path("images/sign_1.png") + "' --out '" +
                          (test.path() / "patching").string() + "'",
                      test.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Its cost was said before the work: (heads + tokens) x depth partial forwards (issue 60).
  EXPECT_NE(run.err.find(std::to_string(model.arch().depth * (model.arch().heads + layout.total_tokens())) +
                         " partial forwards"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find(" a forward"), std::string::npos) << run.err;
  const torch::Tensor heads = read_npy((test.path() / "patching" / "patching_heads.npy").string());
  EXPECT_EQ(heads.size(0), model.arch().depth);
  EXPECT_EQ(heads.size(1), model.arch().heads);
  const torch::Tensor residual = read_npy((test.path() / "patching" / "patching_resid.npy").string());
  EXPECT_EQ(residual.size(1), layout.total_tokens());
  // Patching an image into itself is undefined (no logit difference to restore): refused, nothing written.
  run = run_attnscope(
      "analyze --analysis patching --image2 '" + image + "' --out '" + (test.path() / "same").string() + "'",
      test.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_FALSE(std::filesystem::exists(test.path() / "same" / "summary.json"));
}

}  // namespace test_head_ablation
}  // namespace attnscope
