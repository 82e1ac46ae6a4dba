// Attribution methods against independent Python computations on the same weights
// (tests/python/make_attribution_cases.py): the CAM family as pytorch-grad-cam computes it, Chefer
// et al.'s relevance, gradient rollout, integrated gradients, deletion and insertion curves; and
// the properties each method must have whatever the weights.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <set>

#include "analysis/attribution.h"
#include "analysis/cam_methods.h"
#include "analysis/faithfulness.h"
#include "analysis/gradcam.h"
#include "analysis/integrated_gradients.h"
#include "analysis/relevance.h"
#include "tests/case_folder.h"
#include "tests/numeric_bounds.h"

namespace attnscope {
namespace test_attribution {

const CaseFolder& folder() {
  static const CaseFolder loaded("attribution_cases");
  return loaded;
}
const nlohmann::json& cases() { return folder().cases(); }
LoadedModel load_case_model(const std::string& name) { return folder().load_model(name); }

torch::Tensor case_input(const nlohmann::json& c) { return folder().array(c, "input"); }

AttentionSettings settings_for(const nlohmann::json& c) {
  AttentionSettings settings;
  settings.variant = parse_variant(c.at("variant").get<std::string>());
  if (c.contains("anchors")) settings.anchors = c.at("anchors").get<int>();
  return settings;
}

torch::Tensor case_array(const nlohmann::json& c, const char* key) { return folder().array(c, key); }

// The layer's activations and gradients [C, gh, gw] of a case as patch rows [N, C].
torch::Tensor case_patch_rows(const nlohmann::json& c, const char* key) {
  const torch::Tensor grid = case_array(c, key);
  return grid.reshape({grid.size(0), -1}).t();
}

// How far the layer's activations and gradients may be from the reference's, relative to their
// largest magnitude. Float32 matrix products are backward stable: a product of inner size K is exact
// for inputs off by K u relative at worst (u = 2^-24), about sqrt(K) u in practice. Up to the layer
// these 3-block models (width 64, MLP 256) run about 15 products; the gradients go back through the
// rest of the network and its transposed products, and collect more. Measured over the OpenBLAS
// kernels Prescott, Sandybridge, Haswell, Zen and SkylakeX: at most 7e-7 and 4.9e-6.
constexpr double kActivationRelativeError = 1e-5;
constexpr double kGradientRelativeError = 3e-5;

// Where each input of a map may lie: the measured distance between ours and the reference's, plus
// both sides' float32 rounding in the map's own formula (sums of at most K terms: 2 K u relative).
torch::Tensor input_radius(const torch::Tensor& ours, const torch::Tensor& reference, int64_t sum_length) {
  const double rounding = 2.0 * double(sum_length) * std::ldexp(1.0, -24);
  return (ours.to(torch::kDouble) - reference.to(torch::kDouble)).abs() + rounding * reference.to(torch::kDouble).abs();
}

// The float32 rounding of a map scaled to [0, 1] (a subtraction, a division and one bilinear
// interpolation: a few units of 2^-24).
constexpr double kUnitMapRounding = 1e-6;

TEST(CamFamily, EveryMethodMatchesPytorchGradCamOnTheSameWeights) {
  ASSERT_GE(cases().at("cam").size(), 28u);
  std::set<std::string> seen;
  for (const auto& c : cases().at("cam")) {
    const std::string method = c.at("method");
    seen.insert(method);
    SCOPED_TRACE(method + " on " + c.at("model").get<std::string>() + " at " + c.at("layer").get<std::string>());
    LoadedModel model = load_case_model(c.at("model"));
    const torch::Tensor input = case_input(c);
    CamOptions options;
    options.method = parse_cam_method(method);
    options.layer = c.at("layer");
    options.target = class_target(c.at("class"));
    const CamResult result = class_activation_map(model.native("CAM"), input, settings_for(c), options);
    EXPECT_EQ(result.layer, c.at("layer").get<std::string>());
    EXPECT_EQ(result.target.index, c.at("expected_class").get<int>());
    EXPECT_NEAR(result.score, c.at("logit").get<double>(), 1e-4);
    const torch::Tensor reference_cam = case_array(c, "cam");
    ASSERT_EQ(result.cam.sizes(), reference_cam.sizes());
    const torch::Tensor image = cam_at_image_size(result.scaled, int(input.size(2)), int(input.size(3)));

    // What every map is computed from: the layer's patch activations (and their gradients), a
    // well-conditioned forward (and backward) pass.
    const bool with_gradients = uses_gradients(options.method);
    const LayerReading reading =
        read_layer(model.native("CAM"), input, settings_for(c), options.layer, options.target, with_gradients);
    const torch::Tensor activations = patch_rows(reading.activation, reading.point);
    const torch::Tensor reference_activations = case_patch_rows(c, "activations");
    EXPECT_LT(max_abs_difference(activations, reference_activations),
              kActivationRelativeError * reference_activations.abs().max().item<double>())
        << "the layer's activations";

    if (!with_gradients) {
      // EigenCAM (a projection on the first singular vector) and Score-CAM (a softmax over
      // channels of logits) are well conditioned on these cases: a relative bound.
      const double magnitude = std::max(1.0, reference_cam.abs().max().item<double>());
      EXPECT_LT(max_abs_difference(result.cam, reference_cam), 1e-4 * magnitude) << "before ReLU and scaling";
      EXPECT_LT(max_abs_difference(result.scaled, case_array(c, "scaled")), 1e-4) << "scale_cam_image at the grid";
      EXPECT_LT(max_abs_difference(image, case_array(c, "image")), 1e-4) << "the library's output at the image size";
      continue;
    }
    const torch::Tensor gradients = patch_rows(reading.gradient, reading.point);
    const torch::Tensor reference_gradients = case_patch_rows(c, "gradients");
    EXPECT_LT(max_abs_difference(gradients, reference_gradients),
              kGradientRelativeError * reference_gradients.abs().max().item<double>())
        << "the layer's gradients";

    // The map's error is its inputs' error carried through the method's formula, to first order at
    // the reference's point. XGradCAM divides by each channel's activation sum and Grad-CAM++ by
    // 2 g^2 + sum(a) g^3: where those are near 0 the map is that much more sensitive, and the bound
    // grows with it (instead of one bound for every case).
    const int64_t sum_length = std::max(activations.size(0), activations.size(1));
    const std::vector<torch::Tensor> point = {reference_activations, reference_gradients};
    const std::vector<torch::Tensor> radius = {input_radius(activations, reference_activations, sum_length),
                                               input_radius(gradients, reference_gradients, sum_length)};
    const auto map_of = [&](const std::vector<torch::Tensor>& x) { return gradient_cam(options.method, x[0], x[1]); };
    const auto scaled_of = [&](const std::vector<torch::Tensor>& x) {
      return scale_cam_image(gradient_cam(options.method, x[0], x[1]).clamp_min(0.0));
    };
    const torch::Tensor cam_bound = first_order_error(map_of, point, radius).reshape(reference_cam.sizes());
    const torch::Tensor scaled_bound =
        first_order_error(scaled_of, point, radius).reshape(reference_cam.sizes()) + kUnitMapRounding;
    const torch::Tensor cam_error = (result.cam.to(torch::kDouble) - reference_cam.to(torch::kDouble)).abs();
    const torch::Tensor scaled_error =
        (result.scaled.to(torch::kDouble) - case_array(c, "scaled").to(torch::kDouble)).abs();
    EXPECT_TRUE((cam_error <= cam_bound).all().item<bool>())
        << "before ReLU and scaling: " << (cam_error - cam_bound).max().item<double>() << " past the bound";
    EXPECT_TRUE((scaled_error <= scaled_bound).all().item<bool>())
        << "scale_cam_image at the grid: " << (scaled_error - scaled_bound).max().item<double>() << " past the bound";
    // At the image size: a bilinear upsampling (each pixel a convex combination of grid values, so
    // no larger error) and a second min-max scaling of a map whose range is 1 (x - min and the
    // range each off by up to the error: at most 3 times it).
    EXPECT_LT(max_abs_difference(image, case_array(c, "image")),
              3 * scaled_bound.max().item<double>() + kUnitMapRounding)
        << "the library's output at the image size";
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST(CamFamily, GradCamThroughTheFamilyEqualsGradCam) {
  const auto& c = cases().at("cam")[0];
  LoadedModel model = load_case_model(c.at("model"));
  CamOptions options;
  options.layer = c.at("layer");
  const CamResult family = class_activation_map(model.native("CAM"), case_input(c), settings_for(c), options);
  GradCamOptions plain;
  plain.layer = c.at("layer");
  const GradCamResult gradcam = grad_cam(model.native("Grad-CAM"), case_input(c), settings_for(c), plain);
  EXPECT_LT(max_abs_difference(family.scaled, gradcam.scaled), 1e-6);
  EXPECT_LT(max_abs_difference(family.weights, gradcam.weights), 1e-6);
}

TEST(CamFamily, ScoreCamReportsProgressAndStopsWhenAsked) {
  const auto& c = cases().at("cam")[0];
  LoadedModel model = load_case_model(c.at("model"));
  CamOptions options;
  options.method = CamMethod::ScoreCam;
  options.layer = c.at("layer");
  options.score_batch = 10;
  std::vector<int> reports;
  options.progress = [&](int done, int total) {
    reports.push_back(done);
    EXPECT_EQ(total, 64);  // the layer's channels
    return true;
  };
  const CamResult result = class_activation_map(model.native("CAM"), case_input(c), settings_for(c), options);
  EXPECT_EQ(reports, (std::vector<int>{10, 20, 30, 40, 50, 60, 64}));
  EXPECT_EQ(result.forward_passes, 8);
  EXPECT_NEAR(result.weights.sum().item<double>(), 1.0, 1e-5);  // a softmax over channels
  options.progress = [](int, int) { return false; };
  EXPECT_THROW(class_activation_map(model.native("CAM"), case_input(c), settings_for(c), options), Cancelled);
}

TEST(Relevance, CheferAndGradientRolloutMatchPythonForEveryVariant) {
  ASSERT_GE(cases().at("relevance").size(), 5u);
  for (const auto& c : cases().at("relevance")) {
    SCOPED_TRACE(c.at("model").get<std::string>() + " " + c.at("variant").get<std::string>());
    LoadedModel model = load_case_model(c.at("model"));
    RelevanceOptions options;
    options.target = class_target(c.at("class"));
    const RelevanceResult chefer =
        attention_relevance(model.native("relevance"), case_input(c), settings_for(c), options);
    EXPECT_EQ(chefer.target.index, c.at("expected_class").get<int>());
    EXPECT_NEAR(chefer.score, c.at("logit").get<double>(), 1e-4);
    const torch::Tensor row = case_array(c, "row");
    EXPECT_LT(max_abs_difference(chefer.row, row), 1e-4 * std::max(1.0, row.abs().max().item<double>()));
    const torch::Tensor normalised = case_array(c, "normalised");
    EXPECT_LT(max_abs_difference(chefer.normalised.reshape({-1}), normalised), 1e-4);
    EXPECT_EQ(chefer.layers.size(), model.vit_arch().blocks.size());

    options.rule = RelevanceRule::GradientRollout;
    options.discard_ratio = c.at("discard");
    const RelevanceResult rollout =
        attention_relevance(model.native("relevance"), case_input(c), settings_for(c), options);
    EXPECT_LT(max_abs_difference(rollout.row, case_array(c, "rollout_row")), 1e-4);
    EXPECT_LT(max_abs_difference(rollout.normalised.reshape({-1}), case_array(c, "rollout_mask")), 1e-4);
  }
}

TEST(Relevance, TheFastForwardStaysAsItWasAndParametersKeepTheirGradients) {
  const auto& c = cases().at("relevance")[0];
  LoadedModel model = load_case_model(c.at("model"));
  const torch::Tensor input = case_input(c);
  torch::Tensor plain, with_matrices;
  {
    c10::InferenceMode inference;
    plain = model.forward(input, settings_for(c)).logits;
    ForwardOptions options;
    int calls = 0;
    options.attention_hook = [&](const AttentionHookPoint& point, torch::Tensor& probabilities) {
      EXPECT_EQ(point.layer, calls++);
      EXPECT_EQ(probabilities.size(-1), point.layout.total_tokens());
    };
    with_matrices = model.forward(input, settings_for(c), options).logits;
    EXPECT_EQ(calls, 3);
  }
  EXPECT_LT(max_abs_difference(plain, with_matrices), 1e-5);
  attention_relevance(model.native("relevance"), input, settings_for(c));
  for (const auto& parameter : model.backbone->parameters()) EXPECT_TRUE(parameter.requires_grad());
}

TEST(IntegratedGradients, MatchesPythonAndIsComplete) {
  ASSERT_GE(cases().at("ig").size(), 2u);
  for (const auto& c : cases().at("ig")) {
    SCOPED_TRACE(c.at("model").get<std::string>());
    LoadedModel model = load_case_model(c.at("model"));
    IntegratedGradientsOptions options;
    options.steps = c.at("steps");
    options.target = class_target(c.at("class"));
    options.batch = 5;  // batches do not change the sum
    const IntegratedGradientsResult result =
        integrated_gradients(model.native("integrated gradients"), case_input(c), settings_for(c), {}, options);
    EXPECT_EQ(result.target.index, c.at("expected_class").get<int>());
    const torch::Tensor attributions = case_array(c, "attributions");
    const double magnitude = attributions.abs().max().item<double>();
    EXPECT_LT(max_abs_difference(result.attributions, attributions), 1e-4 * magnitude);
    const torch::Tensor patches = case_array(c, "patches");
    EXPECT_LT(max_abs_difference(result.patch_map, patches), 1e-4 * patches.abs().max().item<double>());
    EXPECT_LT(max_abs_difference(result.scaled, case_array(c, "scaled")), 1e-4);
    EXPECT_NEAR(result.completeness_gap, c.at("completeness_gap").get<double>(), 1e-4);
  }
}

TEST(Faithfulness, DeletionAndInsertionCurvesMatchPython) {
  ASSERT_GE(cases().at("faithfulness").size(), 3u);
  for (const auto& c : cases().at("faithfulness")) {
    SCOPED_TRACE(c.at("model").get<std::string>() + " steps " + std::to_string(c.at("steps").get<int>()));
    LoadedModel model = load_case_model(c.at("model"));
    FaithfulnessOptions options;
    options.steps = c.at("steps");
    options.batch = 4;
    const FaithfulnessProbe probe(model.native("faithfulness"), case_input(c), settings_for(c), {}, options);
    EXPECT_EQ(probe.target_class(), c.at("class").get<int>());
    const Faithfulness curves = probe.measure(case_array(c, "map"));
    const auto fraction = c.at("fraction").get<std::vector<double>>();
    ASSERT_EQ(curves.deletion.fraction.size(), fraction.size());
    for (size_t i = 0; i < fraction.size(); ++i) EXPECT_DOUBLE_EQ(curves.deletion.fraction[i], fraction[i]);
    for (const auto& [mine, kind] :
         {std::make_pair(&curves.deletion, "deletion"), std::make_pair(&curves.insertion, "insertion")}) {
      const auto expected = c.at(kind).at("probability").get<std::vector<double>>();
      for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(mine->probability[i], expected[i], 1e-4) << kind << i;
      EXPECT_NEAR(mine->auc, c.at(kind).at("auc").get<double>(), 1e-4) << kind;
    }
    EXPECT_EQ(probe.deletion(case_array(c, "map")).probability, curves.deletion.probability);
    // Deletion starts at the image, insertion ends at it.
    EXPECT_NEAR(curves.deletion.probability.front(), probe.probability(), 1e-5);
    EXPECT_NEAR(curves.insertion.probability.back(), probe.probability(), 1e-5);
  }
}

TEST(Faithfulness, RandomBaselineIsAMeanOfOrdersAndRepeatable) {
  const auto& c = cases().at("faithfulness")[0];
  LoadedModel model = load_case_model(c.at("model"));
  FaithfulnessOptions options;
  options.steps = 6;
  options.random_orders = 2;
  const FaithfulnessProbe probe(model.native("faithfulness"), case_input(c), settings_for(c), {}, options);
  const Faithfulness first = probe.random_baseline(4, 6), second = probe.random_baseline(4, 6);
  EXPECT_EQ(first.deletion.probability, second.deletion.probability);
  EXPECT_EQ(first.deletion.fraction.size(), 7u);
  EXPECT_NEAR(first.deletion.probability.front(), probe.probability(), 1e-5);
  // Any map's end points are the image and the fully replaced image, whatever the order.
  const Faithfulness ordered = probe.measure(case_array(c, "map"));
  EXPECT_NEAR(first.deletion.probability.back(), ordered.deletion.probability.back(), 1e-6);
  EXPECT_NEAR(first.insertion.probability.front(), ordered.insertion.probability.front(), 1e-6);
}

TEST(Attribution, EveryMethodGivesAMapInUnitRangeOnItsGrid) {
  const auto& c = cases().at("cam")[0];
  LoadedModel model = load_case_model(c.at("model"));
  const torch::Tensor input = case_input(c);
  for (const auto& method : enum_entries<AttributionMethod>()) {
    SCOPED_TRACE(method.name);
    AttributionRequest request;
    request.method = method.value;
    request.ig_steps = 8;
    const AttributionMap map = compute_attribution(model.native(method.name), input, settings_for(c), {}, request);
    EXPECT_EQ(map.map.sizes(), torch::IntArrayRef({4, 6}));
    EXPECT_GE(map.map.min().item<double>(), -1e-6);
    EXPECT_NEAR(map.map.max().item<double>(), 1.0, 1e-5);
    EXPECT_FALSE(map.normalisation.empty());
    EXPECT_FALSE(map.where.empty());
  }
  EXPECT_EQ(parse_method_list("gradcam,relevance,gradcam").size(), 2u);
  EXPECT_EQ(parse_method_list("all").size(), enum_entries<AttributionMethod>().size());
  EXPECT_THROW(parse_method_list("gradcam,saliency"), std::invalid_argument);
}

TEST(Attribution, ModelsWithoutClassesExplainTheirNormOrOneFeature) {
  LoadedModel model =
      load_model(std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/clip_visual.safetensors", {}, torch::kCPU);
  ASSERT_EQ(to_string(model.output_kind()), "embedding");
  const torch::Tensor image = torch::randn({1, 3, model.vit_arch().native_height(), model.vit_arch().native_width()},
                                           torch::Generator(at::detail::createCPUGenerator(11)));
  torch::Tensor embedding;
  {
    c10::InferenceMode inference_mode;
    embedding = model.forward(image, AttentionSettings{}).logits[0];
  }
  for (const RelevanceRule rule : {RelevanceRule::Chefer, RelevanceRule::GradientRollout}) {
    RelevanceOptions options;
    options.rule = rule;
    const RelevanceResult by_norm = attention_relevance(model.native("relevance"), image, {}, options);
    EXPECT_TRUE(by_norm.target.norm());
    EXPECT_NEAR(by_norm.score, embedding.norm().item<double>(), 1e-4);
    options.target = class_target(5);
    const RelevanceResult by_feature = attention_relevance(model.native("relevance"), image, {}, options);
    EXPECT_EQ(by_feature.target.index, 5);
    EXPECT_NEAR(by_feature.score, embedding[5].item<double>(), 1e-4);
    EXPECT_FALSE(torch::allclose(by_norm.row, by_feature.row));
  }
  CamOptions cam;
  cam.method = CamMethod::LayerCam;
  EXPECT_TRUE(class_activation_map(model.native("CAM"), image, {}, cam).target.norm());
  try {
    FaithfulnessProbe probe(model.native("faithfulness"), image, {}, {});
    FAIL() << "faithfulness records a class probability";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("an embedding without classes"), std::string::npos) << e.what();
  }
}

TEST(Attribution, MethodsSayWhyTheyDoNotApply) {
  const auto& c = cases().at("cam")[0];
  LoadedModel model = load_case_model(c.at("model"));
  CamOptions options;
  options.target = class_target(10);
  try {
    class_activation_map(model.native("CAM"), case_input(c), settings_for(c), options);
    FAIL() << "a class the model does not have";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--class 10: the model has 10 classes"), std::string::npos) << e.what();
  }
  RelevanceOptions relevance;
  relevance.layer = 3;
  EXPECT_THROW(attention_relevance(model.native("relevance"), case_input(c), settings_for(c), relevance),
               std::invalid_argument);
  IntegratedGradientsOptions ig;
  ig.steps = 1;
  EXPECT_THROW(integrated_gradients(model.native("ig"), case_input(c), settings_for(c), {}, ig), std::invalid_argument);
}

// Swin, PVT v2 and L2ViT run their own attention modules, which do not hand the probabilities to
// autograd (ForwardOptions::attention_hook): relevance and gradient rollout refuse there and say
// why (no crash, no map from the wrong layers); the CAM family still explains them.
TEST(Attribution, RelevanceOnHierarchicalFamiliesSaysWhyItDoesNotApply) {
  std::map<std::string, std::pair<std::string, nlohmann::json>> by_family;  // family -> (folder, case)
  for (const char* name : {"hier_cases", "part2_cases"}) {
    const CaseFolder hierarchical(name);
    for (const auto& c : hierarchical.cases()) {
      const std::string family = c.at("family");
      if ((family == "swin" || family == "pvt_v2" || family == "l2vit") && c.at("container") == "safetensors")
        by_family.emplace(family, std::make_pair(hierarchical.dir(), c));
    }
  }
  ASSERT_EQ(by_family.size(), 3u);
  for (const auto& [family, entry] : by_family) {
    const auto& [dir, c] = entry;
    SCOPED_TRACE(family + ": " + c.at("name").get<std::string>());
    LoadedModel model = attnscope::load_model(dir + c.at("model").get<std::string>(), {}, torch::kCPU);
    ASSERT_TRUE(model.backbone->hierarchical());
    const torch::Tensor input = read_npy(dir + c.at("input").get<std::string>());
    for (const RelevanceRule rule : {RelevanceRule::Chefer, RelevanceRule::GradientRollout})
      for (const int layer : {0, -1}) {
        SCOPED_TRACE(to_string(rule) + " at layer " + std::to_string(layer));
        RelevanceOptions options;
        options.rule = rule;
        options.layer = layer;
        try {
          attention_relevance(model.native("relevance"), input, {}, options);
          ADD_FAILURE() << "a map from layers whose probabilities autograd never saw";
        } catch (const std::invalid_argument& e) {
          const std::string message = e.what();
          EXPECT_EQ(message.rfind(to_string(rule), 0), 0u) << message;
          // The last stage attends over its own grid: the refusal is the family's missing hook.
          if (layer == -1)
            EXPECT_NE(message.find("is not available for the " + model.family() + " family"), std::string::npos)
                << message;
          else
            EXPECT_TRUE(message.find("ForwardOptions::attention_hook") != std::string::npos ||
                        message.find("rollout is not defined there") != std::string::npos)
                << message;
        }
      }
    CamOptions cam;
    cam.method = CamMethod::GradCamPlusPlus;
    const CamResult result = class_activation_map(model.native("CAM"), input, {}, cam);
    EXPECT_GE(result.scaled.min().item<double>(), 0.0);
    EXPECT_LE(result.scaled.max().item<double>(), 1.0);
  }
}

TEST(Perturbation, CellsTileTheImageAndBlurKeepsConstants) {
  // 10 rows in 3 cells: [0, 3), [3, 6), [6, 10).
  const torch::Tensor middle = cell_pixels(torch::tensor({1}, torch::kLong), 3, 1, 10, 4);
  EXPECT_EQ(middle.sum().item<int64_t>(), 3 * 4);
  EXPECT_TRUE(middle[3][0].item<bool>());
  EXPECT_FALSE(middle[6][0].item<bool>());
  const torch::Tensor constant = torch::full({1, 3, 12, 9}, 0.7);
  EXPECT_LT(max_abs_difference(gaussian_blur(constant, 2.0), constant), 1e-6);
  EXPECT_THROW(parse_replacement("noise"), std::invalid_argument);
}

}  // namespace test_attribution
}  // namespace attnscope
