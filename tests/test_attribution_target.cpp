// --target: the table of target kinds (parsed once, printed back), Grad-CAM of a random-weight CLIP
// with a text and an image target against the float64 reference of tests/python/make_target_cases.py
// (pytorch-grad-cam's GradCAM with its ClipOutputTarget and SimilarityToConceptTarget, OpenAI and
// Hugging Face layouts), every other gradient method reading the same target, and the refusals: a
// file without a text tower, a prompt over 77 tokens, an image that cannot be read.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/cam_methods.h"
#include "analysis/faithfulness.h"
#include "analysis/integrated_gradients.h"
#include "analysis/relevance.h"
#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/image.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "tests/case_folder.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_attribution_target {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace fs = std::filesystem;

const std::string kCases = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/target_cases/";
const std::string kHub = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/";

// The case's target, the image file found in the case folder.
TargetSpec case_spec(const nlohmann::json& c) {
  TargetSpec spec = parse_target_spec(c.at("spec").get<std::string>());
  if (spec.kind == TargetKind::Image) spec.image_file = kCases + spec.image_file;
  return spec;
}

// The images are at the models' input size; the whole image is kept (crop 1: the reference
// normalises the whole PNG), whatever crop a file's default preprocessing would take.
InputSettings whole_image() {
  InputSettings input;
  input.crop = 1.0;
  return input;
}

LoadedModel load_case_model(const nlohmann::json& c) {
  LoadedModel model = load_model(kCases + c.at("model").get<std::string>(), {}, torch::kCPU);
  configure_input(model, whole_image());
  return model;
}

AttributionTarget resolve(LoadedModel& model, const TargetSpec& spec) {
  return resolve_target_spec(spec, {model, whole_image(), AttentionSettings{}, kDefaultMaxPixels});
}

torch::Tensor case_input() { return read_npy(kCases + "image.npy"); }

std::string thrown(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing was refused";
  return "";
}

TEST(TargetSpecs, EachKindParsesOnceAndPrintsBack) {
  for (const std::string text :
       {"class:3", "class:-1", "text:a photo of a dog", "text:a: b", "image:other.png", "image:C:/x.png", "norm"})
    EXPECT_EQ(to_string(parse_target_spec(text)), text);
  const TargetSpec spec = parse_target_spec("text:a: b");
  EXPECT_EQ(spec.kind, TargetKind::Text);
  EXPECT_EQ(spec.prompt, "a: b");  // only the first colon separates the kind
  EXPECT_TRUE(parse_target_spec("class:-1").is_default());
  EXPECT_EQ(parse_target_spec("class:7").class_index, 7);
  EXPECT_EQ(parse_target_spec("image:b.png").image_file, "b.png");
  EXPECT_EQ(target_kinds_text(), "class:C | text:PROMPT | image:FILE | norm");
}

TEST(TargetSpecs, BadSpecsAreRefusedNamingTheForms) {
  EXPECT_CONTAINS(thrown([] { parse_target_spec("logit:3"); }), "expected class:C | text:PROMPT | image:FILE | norm");
  EXPECT_CONTAINS(thrown([] { parse_target_spec(""); }), "unknown target");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("norm:2"); }), "--target norm takes no argument");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("class"); }), "needs its argument: class:C");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("class:x"); }), "expects a class index");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("class:-2"); }), "expects a class index");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("class:3x"); }), "expects a class index");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("text: \t"); }), "needs a prompt");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("text:\xff\xfe"); }), "not valid UTF-8");
  EXPECT_CONTAINS(thrown([] { parse_target_spec("image:"); }), "needs a file");
}

// The map is float32 with float16 weights read exactly; the reference is float64 on the same
// weights. The embeddings and the score pass through two blocks of width 128 and the text tower;
// float32 rounding of those sums (length <= 512) stays near 1e-6 relative, the gradients near 1e-5.
// The tolerances below allow ten times that against each quantity's own scale.
TEST(TargetParity, GradCamWithTextAndImageTargetsMatchesPytorchGradCam) {
  const CaseFolder folder("target_cases");
  ASSERT_EQ(folder.cases().size(), 4u);
  const torch::Tensor input = case_input();
  for (const auto& c : folder.cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    LoadedModel model = load_case_model(c);
    const AttributionTarget target = resolve(model, case_spec(c));
    const torch::Tensor direction = folder.array(c.at("files"), "direction");
    const double direction_error = max_abs_difference(target.direction, direction);
    EXPECT_LT(direction_error, 1e-5);  // a unit vector: prepared and run as the reference did
    if (c.at("target") == "text") {
      EXPECT_EQ(target.kind, TargetKind::Text);
      EXPECT_EQ(target.prompt_tokens, c.at("prompt_tokens").get<int64_t>());
      EXPECT_NEAR(target.scale, c.at("logit_scale").get<double>(), 1e-9 * c.at("logit_scale").get<double>());
    } else {
      EXPECT_EQ(target.kind, TargetKind::Image);
      EXPECT_EQ(target.scale, 1.0);
    }
    CamOptions options;
    options.layer = c.at("layer");
    options.target = target;
    const CamResult cam = class_activation_map(model.native("test"), input, {}, options);
    const double score = c.at("score");
    const double cam_scale = c.at("cam_abs_max");
    const torch::Tensor reference_cam = folder.array(c.at("files"), "cam");
    const torch::Tensor reference_scaled = folder.array(c.at("files"), "scaled");
    const double score_error = std::abs(cam.score - score);
    const double cam_error = max_abs_difference(cam.cam, reference_cam) / cam_scale;
    const double scaled_error = max_abs_difference(cam.scaled, reference_scaled);
    // scale_cam_image divides by the ReLU map's maximum: its error is the map's over that maximum.
    const double scaled_tolerance = 2e-4 * cam_scale / reference_cam.clamp_min(0).max().item<double>();
    EXPECT_LT(score_error, 1e-4 * std::max(1.0, std::abs(score)));
    EXPECT_LT(cam_error, 1e-4);
    EXPECT_LT(scaled_error, scaled_tolerance);
    std::printf("%-12s score %+.6f (error %.1e), direction %.1e, cam %.1e of its max, scaled %.1e (tolerance %.1e)\n",
                c.at("name").get<std::string>().c_str(), score, score_error, direction_error, cam_error, scaled_error,
                scaled_tolerance);
  }
}

// The other gradient methods differentiate the same score: at the unperturbed image it is the
// reference's, whatever the method (and the faithfulness curves start from it).
TEST(TargetParity, EveryGradientMethodReadsTheTarget) {
  const CaseFolder folder("target_cases");
  const torch::Tensor input = case_input();
  for (const auto& c : folder.cases()) {
    if (c.at("model") != "openai_clip.pt") continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    LoadedModel model = load_case_model(c);
    Backbone& backbone = model.native("test");
    const AttributionTarget target = resolve(model, case_spec(c));
    const double score = c.at("score"), tolerance = 1e-4 * std::max(1.0, std::abs(score));
    for (const CamMethod method : {CamMethod::GradCamPlusPlus, CamMethod::XGradCam, CamMethod::LayerCam,
                                   CamMethod::HiResCam, CamMethod::ScoreCam}) {
      CamOptions options;
      options.method = method;
      options.target = target;
      EXPECT_NEAR(class_activation_map(backbone, input, {}, options).score, score, tolerance) << to_string(method);
    }
    for (const RelevanceRule rule : {RelevanceRule::Chefer, RelevanceRule::GradientRollout}) {
      RelevanceOptions options;
      options.rule = rule;
      options.target = target;
      const RelevanceResult relevance = attention_relevance(backbone, input, {}, options);
      EXPECT_NEAR(relevance.score, score, tolerance);
      EXPECT_GT(relevance.patch_map.abs().max().item<double>(), 0.0);
    }
    IntegratedGradientsOptions ig;
    ig.steps = 8;
    ig.target = target;
    const IntegratedGradientsResult integrated = integrated_gradients(backbone, input, {}, model.normalization, ig);
    EXPECT_NEAR(integrated.score, score, tolerance);
    FaithfulnessOptions faithfulness;
    faithfulness.steps = 3;
    faithfulness.target = target;
    const FaithfulnessProbe probe(backbone, input, {}, model.normalization, faithfulness);
    EXPECT_FALSE(probe.records_probability());
    EXPECT_EQ(probe.target_class(), -1);
    EXPECT_NEAR(probe.probability(), score, tolerance);  // the curves record the score, not a probability
    const FaithfulnessCurve deletion = probe.deletion(torch::rand({6, 6}));
    EXPECT_NEAR(deletion.probability.front(), score, tolerance);
  }
}

// Any model: DINOv2's output embedding against another image's; the image itself gives cosine 1.
TEST(TargetParity, AnImageTargetWorksOnAnyEmbeddingModel) {
  LoadedModel model = load_model(kHub + "dinov2.pth", {}, torch::kCPU);
  configure_input(model, whole_image());
  const std::string file = kCases + "image.png";
  const AttributionTarget target = resolve(model, parse_target_spec("image:" + file));
  const torch::Tensor input = image_to_tensor(
      prepare_model_input(load_image_rgb(file, kDefaultMaxPixels), whole_image(), model), model.normalization);
  CamOptions options;
  options.target = target;
  const CamResult cam = class_activation_map(model.native("test"), input, {}, options);
  EXPECT_NEAR(cam.score, 1.0, 1e-5);  // float32 cosine of a vector with itself
  EXPECT_EQ(describe(cam.target), "the cosine similarity to image.png");
}

TEST(TargetRefusals, NoTextTowerLongPromptsAndUnreadableImagesAreRefusedNamingWhy) {
  LoadedModel visual = load_model(kHub + "clip_visual.safetensors", {}, torch::kCPU);
  EXPECT_CONTAINS(thrown([&] { resolve(visual, parse_target_spec("text:a dog")); }),
                  "--target text: needs CLIP's text tower; this file has no text tower: 'token_embedding.weight' "
                  "missing");
  const CaseFolder folder("target_cases");
  LoadedModel clip = load_case_model(folder.cases().at(0));
  const std::string long_prompt = read_file_contents(kCases + "long_prompt.txt");
  const std::string too_long = thrown([&] { resolve(clip, parse_target_spec("text:" + long_prompt)); });
  EXPECT_CONTAINS(too_long, "--target text:");
  EXPECT_CONTAINS(too_long, "78 tokens");
  EXPECT_CONTAINS(too_long, "dog dog");  // names the prompt by its first words
  EXPECT_CONTAINS(thrown([&] { resolve(clip, parse_target_spec("image:" + kCases + "no_such_image.png")); }),
                  "--target image:" + kCases + "no_such_image.png: ");
  EXPECT_CONTAINS(thrown([&] { resolve(clip, parse_target_spec("image:" + kCases + "not_an_image.png")); }),
                  "--target image:" + kCases + "not_an_image.png: ");
  // A prompt's embedding used on a model of another width (another model's output row).
  const AttributionTarget text = resolve(clip, parse_target_spec("text:a dog"));
  EXPECT_CONTAINS(thrown([&] { resolve_target(*clip.backbone, text, torch::zeros({7})); }),
                  "the CLIP logit of 'a dog': its embedding has 32 values, this model's embedding 7");
}

// A text tower whose context is shorter than CLIP's 77 (its positional embedding's rows) takes text
// targets as zero-shot takes its prompts: tokenized to its own context. Under the causal mask the
// end-of-text row sees only the tokens before it, so the embedding is the full-context tower's.
TEST(TargetParity, ATextTowerWithAShortContextTakesTextTargets) {
  TestFolder scratch("target_short_context");
  Checkpoint clip = load_checkpoint(asset_path("models/clip.safetensors"));
  ASSERT_TRUE(clip.tensors.count("positional_embedding"));
  clip.tensors["positional_embedding"] = clip.tensors["positional_embedding"].slice(0, 0, 24).contiguous();
  const std::string path = scratch.file("clip_context24.safetensors");
  save_safetensors(path, clip.tensors, clip.metadata);
  LoadedModel short_context = load_model(path, {}, torch::kCPU);
  LoadedModel full = load_model(asset_path("models/clip.safetensors"), {}, torch::kCPU);
  const AttributionTarget shortened = resolve(short_context, parse_target_spec("text:the digit 4"));
  const AttributionTarget reference = resolve(full, parse_target_spec("text:the digit 4"));
  EXPECT_LE((shortened.direction - reference.direction).abs().max().item<double>(), 1e-5);
  // A prompt longer than the shorter context is refused naming it.
  EXPECT_CONTAINS(thrown([&] {
                    std::string dogs;
                    for (int i = 0; i < 30; ++i) dogs += " dog";
                    resolve(short_context, parse_target_spec("text:" + dogs));
                  }),
                  "--target text:");
}

// The CLI: summary.json records the target; refusals exit non-zero, name the problem, write nothing.
TEST(TargetCli, AnalyzeRecordsTheTargetAndRefusesWithoutWriting) {
  TestFolder scratch("target_cli");
  const fs::path& folder = scratch.path();
  const std::string model = kCases + "openai_clip.pt", image = kCases + "image.png";
  const std::string prompt = "a photo of a Dog, on the grass!";
  for (const std::string analysis : {"gradcam", "gradcam++", "relevance", "ig"}) {
    SCOPED_TRACE(analysis);
    const fs::path out = folder / analysis;
    const CommandRun run = run_attnscope("analyze --analysis " + analysis + " --model " + model + " --image " + image +
                                             " --ig-steps 4 --target 'text:" + prompt + "' --out " + out.string(),
                                         folder);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json summary = read_json_file(out / "summary.json");
    EXPECT_EQ(summary.at("target").at("kind"), "text");
    EXPECT_EQ(summary.at("target").at("prompt"), prompt);
    EXPECT_EQ(summary.at("target").at("prompt_tokens"), 12);
    EXPECT_FALSE(summary.contains("class"));
  }
  const fs::path image_out = folder / "image_target";
  CommandRun run = run_attnscope("analyze --analysis gradcam --model " + model + " --image " + image +
                                     " --target image:" + kCases + "other.png --out " + image_out.string(),
                                 folder);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(read_json_file(image_out / "summary.json").at("target").at("file"), kCases + "other.png");
  const fs::path faithful = folder / "faithfulness";
  run = run_attnscope("analyze --analysis faithfulness --methods gradcam,rollout --steps 3 --model " + model +
                          " --image " + image + " --target image:" + kCases + "other.png --out " + faithful.string(),
                      folder);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(read_json_file(faithful / "summary.json").at("target").at("kind"), "image");
  EXPECT_CONTAINS(read_file_contents((faithful / "faithfulness_curves.csv").string()),
                  "method,curve,step,fraction,score\n");

  const std::string long_prompt = read_file_contents(kCases + "long_prompt.txt");
  struct Refusal {
    std::string model, target, message;
  };
  for (const Refusal& refusal : {Refusal{kHub + "clip_visual.safetensors", "'text:a dog'", "needs CLIP's text tower"},
                                 Refusal{model, "'text:" + long_prompt + "'", "78 tokens"},
                                 Refusal{model, "image:" + kCases + "not_an_image.png", "--target image:"},
                                 Refusal{model, "logit:3", "expected class:C | text:PROMPT | image:FILE | norm"}}) {
    SCOPED_TRACE(refusal.target.substr(0, 40));
    const fs::path out = folder / "refused";
    const CommandRun refused = run_attnscope("analyze --analysis gradcam --model " + refusal.model + " --image " +
                                                 image + " --target " + refusal.target + " --out " + out.string(),
                                             folder);
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_FALSE(refused.crashed);
    EXPECT_CONTAINS(refused.err, refusal.message);
    EXPECT_FALSE(fs::exists(out / "summary.json"));
  }
}

}  // namespace test_attribution_target
}  // namespace attnscope
