// Analyses against independent Python computations on the same weights (Grad-CAM as
// pytorch-grad-cam, rollout as vit-explain, numpy ranks and spectra, f_p from its formula), the
// factor path against the full SVD, and `attnscope analyze` end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "analysis/focus_metrics.h"
#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/case_folder.h"
#include "tests/numeric_bounds.h"
#include "tests/test_folder.h"
#include "views/panel_maps.h"

namespace attnscope {
namespace test_analysis {

namespace fs = std::filesystem;

const CaseFolder& folder() {
  static const CaseFolder loaded("analysis_cases");
  return loaded;
}
const std::string kCaseDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/analysis_cases/";
const nlohmann::json& cases() { return folder().cases(); }
LoadedModel load_case_model(const std::string& name) { return folder().load_model(name); }

AttentionSettings settings_for(const std::string& variant, bool dwc = true) {
  AttentionSettings settings;
  settings.variant = parse_variant(variant);
  settings.dwc = dwc;
  return settings;
}

ForwardOutput captured_forward(LoadedModel& model, const std::string& input, const AttentionSettings& settings) {
  c10::InferenceMode inference_mode;
  return model.vit().forward(read_npy(kCaseDir + input), settings);
}

TEST(GradCam, MatchesPythonGradCamOnTheSameWeights) {
  ASSERT_GE(cases().at("gradcam").size(), 6u);
  for (const auto& c : cases().at("gradcam")) {
    const std::string layer = c.at("layer");
    SCOPED_TRACE(c.at("model").get<std::string>() + " " + layer + " " + c.at("variant").get<std::string>());
    LoadedModel model = load_case_model(c.at("model"));
    const auto input = read_npy(kCaseDir + c.at("input").get<std::string>());
    GradCamOptions options;
    options.layer = layer;
    options.target = class_target(c.at("class"));
    const GradCamResult result = grad_cam(model.vit(), input, settings_for(c.at("variant")), options);
    EXPECT_EQ(result.layer, layer);
    EXPECT_EQ(result.target_class, c.at("expected_class").get<int>());
    EXPECT_NEAR(result.score, c.at("logit").get<double>(), 1e-4);
    const auto reference_cam = read_npy(kCaseDir + c.at("cam").get<std::string>());
    ASSERT_EQ(result.cam.sizes(), reference_cam.sizes());
    const double scale = std::max(1.0, reference_cam.abs().max().item<double>());
    EXPECT_LT(max_abs_difference(result.cam, reference_cam), 1e-4 * scale) << "raw cam";
    EXPECT_LT(max_abs_difference(result.scaled, read_npy(kCaseDir + c.at("scaled").get<std::string>())), 1e-4);
    const auto upsampled = upsample_map(result.scaled, int(input.size(2)), int(input.size(3)));
    EXPECT_LT(max_abs_difference(upsampled, read_npy(kCaseDir + c.at("upsampled").get<std::string>())), 1e-4);
    EXPECT_EQ(!result.warning.empty(), c.at("zero_gradient").get<bool>()) << result.warning;
  }
}

TEST(GradCam, WarnsWhereThePatchGradientsAreZero) {
  LoadedModel model = load_case_model("gc_vit");  // class token, 3 blocks, final norm
  const auto input = read_npy(kCaseDir + cases().at("gradcam")[0].at("input").get<std::string>());
  for (const std::string layer : {"norm", "blocks.-1", "blocks.2.norm2"}) {
    GradCamOptions options;
    options.layer = layer;
    const GradCamResult result = grad_cam(model.vit(), input, {}, options);
    EXPECT_EQ(result.max_abs_gradient, 0.0) << layer;
    EXPECT_NE(result.warning.find("zero on every patch token"), std::string::npos) << layer;
    EXPECT_EQ(result.scaled.abs().max().item<double>(), 0.0) << layer;
  }
  const GradCamResult usual = grad_cam(model.vit(), input, {}, {});
  EXPECT_EQ(usual.layer, "blocks.2.norm1");
  EXPECT_TRUE(usual.warning.empty()) << usual.warning;
  EXPECT_GT(usual.max_abs_gradient, 0.0);
  EXPECT_NEAR(usual.scaled.max().item<double>(), 1.0, 1e-5);  // (max + 1e-7) in the divisor
  // Parameters keep wanting gradients afterwards (the call only switches them off for itself).
  for (const auto& parameter : model.vit().parameters()) EXPECT_TRUE(parameter.requires_grad());
}

TEST(GradCam, RejectsLayersAndClassesThatDoNotExist) {
  LoadedModel model = load_case_model("gc_vit");
  const auto input = read_npy(kCaseDir + cases().at("gradcam")[0].at("input").get<std::string>());
  for (const std::string layer : {"blocks.3.norm1", "blocks.-4.norm1", "blocks.1.attn", "head", "blocks.x"}) {
    GradCamOptions options;
    options.layer = layer;
    EXPECT_THROW(grad_cam(model.vit(), input, {}, options), std::invalid_argument) << layer;
  }
  GradCamOptions options;
  options.target = class_target(10);
  EXPECT_THROW(grad_cam(model.vit(), input, {}, options), std::invalid_argument);
  const int depth = model.vit_arch().depth;
  EXPECT_EQ(model.vit().resolve_hook_point("blocks.-1.norm1"), "blocks." + std::to_string(depth - 1) + ".norm1");
  EXPECT_EQ(model.vit().resolve_hook_point("blocks.0"), "blocks.0");
  EXPECT_EQ(model.vit().resolve_hook_point(""), "blocks." + std::to_string(depth - 1) + ".norm1");
  EXPECT_EQ(model.vit().resolve_hook_point("norm"), "norm");
  EXPECT_THROW(model.vit().resolve_hook_point("blocks.-"), std::invalid_argument);
}

TEST(Rollout, MatchesVitExplainWithRowNormalisation) {
  ASSERT_GE(cases().at("rollout").size(), 5u);
  for (const auto& c : cases().at("rollout")) {
    SCOPED_TRACE(c.at("model").get<std::string>() + " " + c.at("variant").get<std::string>() + " " +
                 c.at("fusion").get<std::string>());
    LoadedModel model = load_case_model(c.at("model"));
    const ForwardOutput output = captured_forward(model, c.at("input"), settings_for(c.at("variant")));
    RolloutOptions options;
    options.fusion = parse_head_fusion(c.at("fusion"));
    options.discard_ratio = c.at("discard");
    const RolloutResult result = attention_rollout(output.layers, options);
    const auto reference = read_npy(kCaseDir + c.at("row").get<std::string>());
    EXPECT_LT(max_abs_difference(result.row, reference), 1e-4);
    EXPECT_EQ(result.patch_map.size(0), output.layout.grid_h);
    EXPECT_NEAR(result.normalised.max().item<double>(), 1.0, 1e-6);
  }
  const torch::Tensor fused = torch::rand({5, 5});
  EXPECT_THROW(rollout_factor(fused, 1.0), std::invalid_argument);
  EXPECT_TRUE(torch::allclose(rollout_factor(fused, 0.4).sum(-1), torch::ones({5})));
}

TEST(Spectrum, RanksAndSingularValuesMatchNumpy) {
  ASSERT_GE(cases().at("spectrum").size(), 5u);
  for (const auto& c : cases().at("spectrum")) {
    const std::string variant = c.at("variant");
    const bool dwc = c.at("dwc");
    SCOPED_TRACE(c.at("model").get<std::string>() + " " + variant + (dwc ? " +dwc" : ""));
    LoadedModel model = load_case_model(c.at("model"));
    const ForwardOutput output = captured_forward(model, c.at("input"), settings_for(variant, dwc));
    const auto ranks = c.at("ranks").get<std::vector<int>>();
    const auto values = read_npy(kCaseDir + c.at("singular_values").get<std::string>());  // [L*h, T]
    const int heads = c.at("heads"), head_dim = c.at("head_dim");
    const int64_t tokens = output.layout.total_tokens();
    for (size_t layer = 0; layer < output.layers.size(); ++layer)
      for (int head = 0; head < heads; ++head) {
        const size_t index = layer * size_t(heads) + size_t(head);
        const AttentionSpectrum result = attention_spectrum(output.layers[layer], head);
        const int64_t count = result.spectrum.singular_values.numel();
        const auto expected = values[int64_t(index)].slice(0, 0, count);
        // numpy's rank, unless a singular value lies within rounding of the tolerance.
        const RankRange possible =
            possible_ranks(expected, result.spectrum.tolerance,
                           singular_value_radius(result.spectrum.singular_values, expected, tokens, tokens));
        if (possible.low == possible.high) {
          EXPECT_EQ(result.spectrum.numerical_rank, ranks[index]) << "layer " << layer << " head " << head;
        } else {
          EXPECT_GE(result.spectrum.numerical_rank, possible.low) << "layer " << layer << " head " << head;
          EXPECT_LE(result.spectrum.numerical_rank, possible.high) << "layer " << layer << " head " << head;
        }
        const bool low_rank = variant != "softmax" && !(variant == "focused" && dwc);
        EXPECT_EQ(result.method, low_rank ? "factors" : "full SVD");
        if (low_rank) {
          EXPECT_LE(result.spectrum.numerical_rank, head_dim);  // rank(phi(Q) phi(K)^T) <= d
        }
        if (variant == "focused" && dwc) {
          EXPECT_EQ(result.spectrum.numerical_rank, tokens);
        }
        const double largest = expected[0].item<double>();
        EXPECT_LT(max_abs_difference(result.spectrum.singular_values, expected), 1e-4 * largest);
      }
  }
}

TEST(Spectrum, FactorPathEqualsTheFullSvdForEveryFactoredKernel) {
  LoadedModel model = load_case_model("gc_vit");
  const std::string input = cases().at("spectrum")[0].at("input");
  AttentionSettings anchor = settings_for("anchor");
  anchor.anchors = 12;
  for (const AttentionSettings& settings :
       {settings_for("linear"), settings_for("focused"), settings_for("enhanced"), anchor}) {
    SCOPED_TRACE(to_string(settings.variant));
    const ForwardOutput output = captured_forward(model, input, settings);
    for (const auto& layer : output.layers)
      for (int head = 0; head < layer.heads; ++head) {
        const auto factors = equivalent_matrix_factors(layer, head);
        ASSERT_TRUE(factors.has_value());
        const torch::Tensor matrix = layer.matrix(0, head);
        // The factors rebuild the displayed matrix ...
        EXPECT_LT(max_abs_difference(torch::matmul(factors->left, factors->right.transpose(0, 1)), matrix),
                  1e-5 * matrix.abs().max().item<double>());
        // ... and their spectrum is the full SVD's.
        const Spectrum fast = factored_spectrum(factors->left, factors->right);
        const Spectrum full = matrix_spectrum(matrix);
        const RankRange possible = possible_ranks(
            full.singular_values, full.tolerance,
            singular_value_radius(fast.singular_values, full.singular_values, matrix.size(0), matrix.size(1)));
        EXPECT_GE(fast.numerical_rank, possible.low);
        EXPECT_LE(fast.numerical_rank, possible.high);
        if (possible.low == possible.high) {
          EXPECT_EQ(fast.numerical_rank, full.numerical_rank);
        }
        EXPECT_NEAR(fast.tolerance, full.tolerance, 1e-5 * full.tolerance);
        const int64_t count = fast.singular_values.numel();
        EXPECT_LT(max_abs_difference(fast.singular_values, full.singular_values.slice(0, 0, count)),
                  1e-4 * full.singular_values[0].item<double>());
        EXPECT_NEAR(fast.effective_rank, full.effective_rank, 1e-2 * full.effective_rank);
      }
  }
  // Softmax has no factors; a window restriction neither.
  AttentionSettings windowed = settings_for("linear");
  windowed.window = 3;
  EXPECT_FALSE(equivalent_matrix_factors(captured_forward(model, input, settings_for("softmax")).layers[0], 0));
  EXPECT_FALSE(equivalent_matrix_factors(captured_forward(model, input, windowed).layers[0], 0));
}

// The mean attention the patch queries give each prefix key (the sidebar's numbers), from the thin
// factors of every kernel that has them, is that column of the matrix the views draw.
TEST(PanelMaps, PrefixMassFromFactorsIsTheMatrixColumnMean) {
  LoadedModel model = load_case_model("gc_vit");
  const std::string input = cases().at("spectrum")[0].at("input");
  AttentionSettings anchor = settings_for("anchor");
  anchor.anchors = 12;
  int factored = 0;
  for (const AttentionSettings& settings :
       {settings_for("linear"), settings_for("focused"), settings_for("enhanced"), anchor, settings_for("agent"),
        settings_for("inline"), settings_for("mlla"), settings_for("pola")}) {
    SCOPED_TRACE(to_string(settings.variant));
    const ForwardOutput output = captured_forward(model, input, settings);
    for (const auto& layer : output.layers) {
      const int64_t prefix = layer.layout.prefix_tokens(), prefix_keys = layer.key_layout.prefix_tokens();
      ASSERT_GT(prefix_keys, 0);
      for (int head = 0; head < layer.heads; ++head) {
        if (!equivalent_matrix_factors(layer, head, /*include_dwc=*/false)) continue;
        ++factored;
        const torch::Tensor expected = layer.matrix(0, head).slice(0, prefix).slice(1, 0, prefix_keys).mean(0);
        EXPECT_LT(max_abs_difference(prefix_received(layer, head), expected),
                  1e-6 * std::max(1.0, expected.abs().max().item<double>()))
            << "head " << head;
      }
    }
  }
  EXPECT_GT(factored, 0);
}

TEST(Spectrum, DwcBandIsOnlyOnTheWithDwcSide) {
  LoadedModel model = load_case_model("gc_focused");
  const std::string input = cases().at("spectrum")[3].at("input");
  const ForwardOutput output = captured_forward(model, input, settings_for("focused", true));
  const AttentionCapture& layer = output.layers[0];
  ASSERT_TRUE(layer.attention.dwc);
  const AttentionSpectrum with = attention_spectrum(layer, 0, true);
  const AttentionSpectrum without = attention_spectrum(layer, 0, false);
  EXPECT_TRUE(with.dwc);
  EXPECT_FALSE(without.dwc);
  EXPECT_EQ(without.method, "factors");
  EXPECT_LE(without.spectrum.numerical_rank, layer.head_dim);
  EXPECT_GT(with.spectrum.numerical_rank, layer.head_dim);
  const ForwardOutput plain = captured_forward(model, input, settings_for("focused", false));
  EXPECT_EQ(attention_spectrum(plain.layers[0], 0).spectrum.numerical_rank, without.spectrum.numerical_rank);
}

TEST(Focusing, MatchesTheFormulaInPython) {
  const auto& c = cases().at("focusing");
  const auto vectors = read_npy(kCaseDir + c.at("vectors").get<std::string>());
  const auto focused = read_npy(kCaseDir + c.at("focused").get<std::string>());
  const auto ps = c.at("ps").get<std::vector<double>>();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_LT(max_abs_difference(focus_rows(vectors, ps[i]), focused[int64_t(i)]), 1e-12) << "p = " << ps[i];

  const ScoreExample example = example_focus_scores(3.0);
  const auto before = c.at("example_before").get<std::vector<double>>();
  const auto after = c.at("example_after").get<std::vector<double>>();
  for (size_t j = 0; j < before.size(); ++j) {
    EXPECT_NEAR(example.before[int64_t(j)].item<double>(), before[j], 1e-12);
    EXPECT_NEAR(example.after[int64_t(j)].item<double>(), after[j], 1e-12);
  }
  // The paper's Fig. 4 numbers, to the two decimals it prints.
  const std::vector<double> paper_before = {0.37, 0.19, 0.26, 0.18}, paper_after = {0.75, 0.11, 0.09, 0.05};
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(example.before[int64_t(j)].item<double>(), paper_before[j], 0.005);
    EXPECT_NEAR(example.after[int64_t(j)].item<double>(), paper_after[j], 0.005);
  }

  const auto& s = c.at("study");
  LoadedModel model = load_case_model(s.at("model"));
  const ForwardOutput output = captured_forward(model, s.at("input"), settings_for("softmax"));
  FocusStudyOptions options;
  options.p = s.at("p");
  options.curve_ps = s.at("ps").get<std::vector<double>>();
  options.histogram_bins = s.at("bins");
  options.top_k = s.at("top_k");
  const FocusStudy study = study_focusing(output.layers[s.at("layer").get<size_t>()], s.at("head"), options);
  const auto entropy = s.at("entropy").get<std::vector<double>>();
  const auto top_mass = s.at("top_k_mass").get<std::vector<double>>();
  ASSERT_EQ(study.entropy.size(), entropy.size());
  for (size_t i = 0; i < entropy.size(); ++i) {
    EXPECT_NEAR(study.entropy[i], entropy[i], 1e-4) << "p = " << options.curve_ps[i];
    EXPECT_NEAR(study.top_k_mass[i], top_mass[i], 1e-4) << "p = " << options.curve_ps[i];
  }
  EXPECT_GT(study.entropy.front(), study.entropy.back());  // f_p sharpens the rows
  const auto counts = s.at("axis_counts").get<std::vector<int64_t>>();
  const auto cos_before = s.at("axis_cos_before").get<std::vector<double>>();
  const auto cos_after = s.at("axis_cos_after").get<std::vector<double>>();
  for (size_t a = 0; a < counts.size(); ++a) {
    EXPECT_EQ(study.axis_counts[int64_t(a)].item<int64_t>(), counts[a]);
    EXPECT_NEAR(study.axis_cosine_before[int64_t(a)].item<double>(), cos_before[a], 1e-4);
    EXPECT_NEAR(study.axis_cosine_after[int64_t(a)].item<double>(), cos_after[a], 1e-4);
  }
  // Histograms: float32 features against float64 ones may move a pair across a bin edge.
  for (const auto& [mine, name] : {std::make_pair(study.histogram_before, "histogram_before"),
                                   std::make_pair(study.histogram_after, "histogram_after")}) {
    const auto theirs = torch::tensor(s.at(name).get<std::vector<int64_t>>());
    EXPECT_EQ(mine.sum().item<int64_t>(), theirs.sum().item<int64_t>());
    EXPECT_LE((mine - theirs).abs().sum().item<int64_t>(), theirs.sum().item<int64_t>() / 200) << name;
  }
}

TEST(Focusing, KeepsNormsAndAxesAndPullsTowardTheAxis) {
  const auto vectors = octant_vectors(30);
  EXPECT_TRUE(torch::allclose(vectors.norm(2, {1}), torch::ones({30}, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(focus_rows(vectors, 1.0), vectors));
  for (double p : {2.0, 3.0, 8.0}) {
    const auto focused = focus_rows(vectors, p);
    EXPECT_TRUE(torch::allclose(focused.norm(2, {1}), vectors.norm(2, {1})));
    EXPECT_TRUE(torch::equal(focused.argmax(1), vectors.argmax(1)));
    EXPECT_TRUE((nearest_axis_cosine(focused) >= nearest_axis_cosine(vectors) - 1e-12).all().item<bool>());
  }
  const auto quarter = quarter_circle_vectors(5);
  EXPECT_NEAR(quarter[2][0].item<double>(), std::sqrt(0.5), 1e-12);
  EXPECT_THROW(focus_rows(vectors, 0.0), std::invalid_argument);
}

TEST(FocusMetrics, BoxMassAndSummary) {
  TokenLayout layout;
  layout.has_class_token = true;
  layout.grid_h = 3;
  layout.grid_w = 4;
  const PatchBox box = parse_patch_box("1,1,3,3");
  const auto coverage = box_coverage(box, layout);
  EXPECT_EQ(coverage.sum().item<double>(), 4.0);
  EXPECT_EQ(coverage[1 * 4 + 1].item<double>(), 1.0);
  EXPECT_EQ(coverage[0].item<double>(), 0.0);
  auto map = torch::zeros({12});
  map[5] = 3.0;    // (1,1): inside
  map[0] = 1.0;    // (0,0): outside
  map[11] = -2.0;  // negative entries count as 0
  const FocusSummary summary = summarise_focus(map, 1, coverage);
  ASSERT_TRUE(summary.box_mass.has_value());
  EXPECT_NEAR(*summary.box_mass, 0.75, 1e-12);
  EXPECT_NEAR(summary.top_k_mass, 0.75, 1e-12);
  EXPECT_FALSE(summary.object_mass.has_value());
  EXPECT_THROW(parse_patch_box("1,1,1,3"), std::invalid_argument);
  EXPECT_THROW(parse_patch_box("1,1,2"), std::invalid_argument);
  EXPECT_THROW(box_coverage(parse_patch_box("0,0,4,4"), layout), std::invalid_argument);
}

// `attnscope analyze` end to end on a PNG and the fixture model.
class AnalyzeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    image_ = (folder_ / "input.png").string();
    cv::Mat picture(90, 120, CV_8UC3);
    cv::randu(picture, 0, 255);
    cv::imwrite(image_, picture);
    base_ = " --model " + kCaseDir + "gc_vit.safetensors --arch heads=2 --image " + image_ + " --size 96x128 --out " +
            (folder_ / "out").string() + " --device cpu --overwrite";  // one folder for every analysis
  }
  // Exit code and stderr of one command.
  std::pair<int, std::string> run(const std::string& arguments) {
    const CommandRun command = run_attnscope(arguments, folder_);
    return {command.exit_code, command.err};
  }
  nlohmann::json summary() { return read_json_file(folder_ / "out" / "summary.json"); }
  void expect_clear_error(const std::string& arguments, const std::string& phrase) {
    SCOPED_TRACE(arguments);
    const auto [code, text] = run(arguments);
    EXPECT_TRUE(code == 1 || code == 2) << "exit code " << code;
    EXPECT_NE(text.find(phrase), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }

  TestFolder scratch_{"analyze"};
  const fs::path& folder_ = scratch_.path();
  std::string image_, base_;
};

TEST_F(AnalyzeCliTest, EveryAnalysisWritesItsOutputs) {
  const fs::path out = folder_ / "out";
  auto [code, text] = run("analyze --analysis gradcam --class 4" + base_);
  ASSERT_EQ(code, 0) << text;
  EXPECT_EQ(summary()["layer"], "blocks.2.norm1");
  EXPECT_EQ(summary()["class"]["index"], 4);
  EXPECT_EQ(read_npy((out / "gradcam.npy").string()).sizes(), torch::IntArrayRef({6, 8}));
  EXPECT_EQ(read_npy((out / "gradcam_upsampled.npy").string()).sizes(), torch::IntArrayRef({96, 128}));
  EXPECT_FALSE(cv::imread((out / "gradcam_overlay.png").string()).empty());

  std::tie(code, text) = run("analyze --analysis rollout --fusion max --discard 0.5" + base_);
  ASSERT_EQ(code, 0) << text;
  EXPECT_EQ(summary()["fusion"], "max");
  EXPECT_NEAR(read_npy((out / "rollout_row.npy").string()).sum().item<double>(), 1.0, 1e-4);

  std::tie(code, text) = run("analyze --analysis spectrum --variants softmax,linear --layer 1 --head 1" + base_);
  ASSERT_EQ(code, 0) << text;
  const auto variants = summary()["variants"];
  ASSERT_EQ(variants.size(), 2u);
  EXPECT_EQ(variants[0]["matrix"]["method"], "full SVD");
  EXPECT_EQ(variants[1]["matrix"]["method"], "factors");
  EXPECT_LE(variants[1]["matrix"]["rank"].get<int>(), 32);
  EXPECT_TRUE(fs::exists(out / "spectrum.csv"));
  EXPECT_TRUE(fs::exists(out / "matrix_linear.png"));

  std::tie(code, text) = run("analyze --analysis fp --p 3 --layer 1" + base_);
  ASSERT_EQ(code, 0) << text;
  EXPECT_EQ(summary()["curves"]["p"].size(), 10u);
  EXPECT_TRUE(fs::exists(out / "fp_histogram.csv"));
  std::tie(code, text) = run("analyze --analysis fp --out " + (folder_ / "fig4").string());  // no model: Fig. 4 only
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(fs::exists(folder_ / "fig4" / "fp_vectors_3d.csv"));

  std::tie(code, text) = run("analyze --analysis metrics --variants softmax,focused --box 1,1,4,5" + base_);
  ASSERT_EQ(code, 0) << text;
  const auto metrics = summary()["variants"];
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[1]["heads"].size(), 2u);
  EXPECT_GE(metrics[0]["heads"][0]["box_mass"].get<double>(), 0.0);
}

TEST_F(AnalyzeCliTest, ZeroGradientLayerWarnsButSucceeds) {
  const auto [code, text] = run("analyze --analysis gradcam --gradcam-layer norm" + base_);
  EXPECT_EQ(code, 0);
  EXPECT_NE(text.find("warning: the gradient of class"), std::string::npos) << text;
  EXPECT_TRUE(summary().contains("warning"));
}

TEST_F(AnalyzeCliTest, ReportsBadInputClearly) {
  expect_clear_error("analyze --analysis saliency" + base_, "unknown --analysis 'saliency'");
  expect_clear_error("analyze" + base_, "--analysis is required");
  expect_clear_error("analyze --analysis gradcam --gradcam-layer blocks.7.norm1" + base_,
                     "--gradcam-layer 'blocks.7.norm1' does not exist");
  expect_clear_error("analyze --analysis gradcam --gradcam-layer attn" + base_, "--gradcam-layer 'attn'");
  expect_clear_error("analyze --analysis gradcam --class 10" + base_, "--class 10: the model has 10 classes");
  expect_clear_error("analyze --analysis spectrum --layer 5" + base_, "--layer 5: the model has 3 blocks");
  expect_clear_error("analyze --analysis spectrum --head 2" + base_, "--head 2: this layer has 2 heads");
  expect_clear_error("analyze --analysis rollout --fusion median" + base_, "unknown head fusion 'median'");
  expect_clear_error("analyze --analysis rollout --discard 1" + base_, "--discard must be in [0, 1)");
  expect_clear_error("analyze --analysis metrics --box 0,0,9,9" + base_, "does not fit the 6x8 patch grid");
  expect_clear_error("analyze --analysis metrics --variants softmax,fancy" + base_, "--variants");
}

}  // namespace test_analysis
}  // namespace attnscope
