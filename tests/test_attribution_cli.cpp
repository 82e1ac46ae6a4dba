// The attribution commands end to end on real files: `analyze` writes every method's map as
// METHOD.npy at the layer's grid with a summary that says its size and normalisation, the
// faithfulness table with its curves and figure, and `eval` over a generated folder of glyph images
// with boxes and labels, including a model that does not fit the task.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/demo_models.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_attribution_cli {

namespace fs = std::filesystem;

class AttributionCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = asset_path("models") + "/flatten.safetensors";
    glyphs_ = (folder_ / "glyphs").string();
    ASSERT_EQ(run("glyphs --out " + glyphs_ + " --count 3 --seed 1000000000000").exit_code, 0);
    image_ = glyphs_ + "/glyph_1000000000000.png";
  }
  CommandRun run(const std::string& arguments) { return run_attnscope(arguments, folder_); }
  nlohmann::json summary(const fs::path& dir) { return read_json_file(dir / "summary.json"); }
  // A softmax ViT on the glyph task's 96 px input with `classes` outputs and random weights.
  std::string model_with_classes(int classes) {
    torch::manual_seed(3);
    const VitArch arch = plain_vit_arch(32, 2, 2, /*patch_size=*/8, /*grid=*/12, classes);
    VisionTransformer model(arch);
    initialise_weights(*model);
    const std::string path = (folder_ / ("classes" + std::to_string(classes) + ".safetensors")).string();
    save_safetensors(path, state_dict(*model), model_metadata(arch, {}));
    return path;
  }

  TestFolder scratch_{"attribution"};
  const fs::path& folder_ = scratch_.path();
  std::string model_, glyphs_, image_;
};

TEST_F(AttributionCliTest, EveryMethodWritesItsMapAtTheGridWithSizeAndNormalisation) {
  for (const std::string method :
       {"gradcam++", "xgradcam", "layercam", "eigencam", "hirescam", "scorecam", "relevance", "gradrollout", "ig"}) {
    SCOPED_TRACE(method);
    const fs::path out = folder_ / method;
    const CommandRun result =
        run("analyze --analysis " + method + " --gradcam-layer blocks.2.norm1 --class 3 --model " + model_ +
            " --image " + image_ + " --out " + out.string() + " --ig-steps 8");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const torch::Tensor map = read_npy((out / (method + ".npy")).string());
    EXPECT_EQ(map.sizes(), torch::IntArrayRef({12, 12}));
    EXPECT_GE(map.min().item<double>(), 0.0);
    EXPECT_NEAR(map.max().item<double>(), 1.0, 1e-5);
    const torch::Tensor upsampled = read_npy((out / (method + "_upsampled.npy")).string());
    EXPECT_EQ(upsampled.sizes(), torch::IntArrayRef({96, 96}));
    const nlohmann::json s = summary(out);
    EXPECT_EQ(s["size"]["grid"], nlohmann::json({12, 12}));
    EXPECT_EQ(s["size"]["image"], nlohmann::json({96, 96}));
    EXPECT_TRUE(s["normalisation"].contains(method + ".npy")) << s.dump();
    EXPECT_EQ(s["class"]["index"], 3);
    if (method != "relevance" && method != "gradrollout" && method != "ig") {
      EXPECT_EQ(s["layer"], "blocks.2.norm1");
    }
    if (method == "scorecam") {
      EXPECT_EQ(s["forward_passes"], 1 + 96 / 16);
      EXPECT_NE(result.err.find("Score-CAM"), std::string::npos) << "a progress bar: " << result.err;
    }
  }
  // Grad-CAM keeps its own names.
  const CommandRun gradcam = run("analyze --analysis gradcam --model " + model_ + " --image " + image_ + " --out " +
                                 (folder_ / "gradcam").string());
  ASSERT_EQ(gradcam.exit_code, 0) << gradcam.err;
  for (const char* name : {"gradcam.npy", "gradcam_raw.npy", "gradcam_upsampled.npy", "gradcam_overlay.png"})
    EXPECT_TRUE(fs::exists(folder_ / "gradcam" / name)) << name;
}

TEST_F(AttributionCliTest, FaithfulnessPrintsATableAndWritesCurvesAndTheFigure) {
  const fs::path out = folder_ / "faithfulness";
  const CommandRun result =
      run("analyze --analysis faithfulness --methods gradcam,relevance,attention --steps 6 --model " + model_ +
          " --image " + image_ + " --out " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* row : {"| gradcam |", "| relevance |", "| attention |", "| random"})
    EXPECT_NE(result.out.find(row), std::string::npos) << result.out;
  const nlohmann::json s = summary(out);
  ASSERT_EQ(s["methods"].size(), 3u);
  EXPECT_EQ(s["curves"]["replacement"], "blur");
  for (const auto& row : s["methods"]) {
    EXPECT_GE(row["deletion_auc"].get<double>(), 0.0);
    EXPECT_LE(row["insertion_auc"].get<double>(), 1.0);
  }
  std::ifstream csv(out / "faithfulness_curves.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "method,curve,step,fraction,probability");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 4 * 2 * 7);  // three methods and random, two curves, 7 points each
  EXPECT_FALSE(cv::imread((out / "faithfulness.png").string()).empty());
  EXPECT_TRUE(fs::exists(out / "faithfulness_data" / "relevance_deletion.csv"));

  // The same figure through export.
  const CommandRun exported = run("export --layout faithfulness --methods gradcam,ig --ig-steps 4 --steps 4 --model " +
                                  model_ + " --image " + image_ + " --out " + (folder_ / "figures").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_FALSE(cv::imread((folder_ / "figures" / "glyph_1000000000000_faithfulness.png").string()).empty());
}

// Like every analysis, the attribution methods and the faithfulness table (its figure included)
// refuse to replace existing outputs, writing nothing, unless --overwrite.
TEST_F(AttributionCliTest, ExistingOutputsAreRefusedUnlessOverwrite) {
  for (const std::string analysis : {"gradcam++", "faithfulness"}) {
    SCOPED_TRACE(analysis);
    const fs::path out = folder_ / ("again-" + analysis);
    const std::string arguments = "analyze --analysis " + analysis + " --methods gradcam,attention --steps 4 --model " +
                                  model_ + " --image " + image_ + " --out " + out.string();
    const CommandRun first = run(arguments);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const auto written = fs::last_write_time(out / "summary.json");
    const CommandRun again = run(arguments);
    EXPECT_NE(again.exit_code, 0);
    EXPECT_NE(again.err.find("--overwrite"), std::string::npos) << again.err;
    EXPECT_EQ(fs::last_write_time(out / "summary.json"), written);
    const CommandRun replaced = run(arguments + " --overwrite");
    EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  }
  // The figure alone is enough to refuse the table: nothing else is written either.
  const fs::path out = folder_ / "again-faithfulness";
  fs::remove(out / "summary.json");
  fs::remove(out / "faithfulness_curves.csv");
  const CommandRun figure_only = run("analyze --analysis faithfulness --methods gradcam,attention --steps 4 --model " +
                                     model_ + " --image " + image_ + " --out " + out.string());
  EXPECT_NE(figure_only.exit_code, 0);
  EXPECT_NE(figure_only.err.find("exists"), std::string::npos) << figure_only.err;
  EXPECT_FALSE(fs::exists(out / "summary.json"));
  EXPECT_FALSE(fs::exists(out / "faithfulness_curves.csv"));
}

TEST_F(AttributionCliTest, EvalScoresAFolderWithBoxesAndLabels) {
  const std::string labels = glyphs_ + "/labels.csv";
  const CommandRun result =
      run("eval --images " + glyphs_ + " --boxes " + labels + " --labels " + labels + " --model " + model_ +
          " --methods gradcam,relevance --layers -1 --steps 4 --out " + (folder_ / "eval").string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("| gradcam | blocks.3.norm1 |"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("| relevance | all |"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("accuracy: "), std::string::npos) << result.out;
  const nlohmann::json report = read_json_file(folder_ / "eval" / "eval.json");
  EXPECT_EQ(report["images"], 3);
  EXPECT_GT(report["accuracy"].get<double>(), 0.5);  // the demo model reads these digits
  for (const auto& row : report["methods"]) EXPECT_EQ(row["images"], 3);
  EXPECT_NE(result.err.find("[1/3]"), std::string::npos) << "a progress bar: " << result.err;

  // Masks instead of boxes: one per image, named like it.
  fs::create_directories(folder_ / "masks");
  for (const auto& entry : fs::directory_iterator(glyphs_)) {
    if (entry.path().extension() != ".png") continue;
    cv::Mat mask(96, 96, CV_8UC1, cv::Scalar(0));
    mask(cv::Rect(20, 20, 40, 40)).setTo(255);
    cv::imwrite((folder_ / "masks" / entry.path().filename()).string(), mask);
  }
  const CommandRun masked = run("eval --images " + glyphs_ + " --masks " + (folder_ / "masks").string() + " --model " +
                                model_ + " --methods attention --layers 0 --steps 2");
  ASSERT_EQ(masked.exit_code, 0) << masked.err;
  EXPECT_NE(masked.out.find("| attention | 0 |"), std::string::npos) << masked.out;
}

// "--methods all" on a hierarchical model: the methods that cannot apply there (relevance and
// gradient rollout need attention probabilities in autograd) are left out with their reason; named
// explicitly, such a method still fails the run.
TEST_F(AttributionCliTest, EvalWithAllMethodsLeavesOutWhatCannotApply) {
  const std::string labels = glyphs_ + "/labels.csv";
  const std::string swin = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hier_cases/swin_a.safetensors";
  const std::string common = "eval --images " + glyphs_ + " --boxes " + labels + " --model " + swin;
  const CommandRun all = run(common + " --methods all --layers -1 --steps 2 --out " + (folder_ / "all").string());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("not applicable: relevance: relevance is not available"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("| gradcam |"), std::string::npos) << all.out;
  const nlohmann::json report = read_json_file(folder_ / "all" / "eval.json");
  EXPECT_TRUE(report["not_applicable"].contains("gradrollout"));
  EXPECT_FALSE(report["not_applicable"].contains("gradcam"));
  const CommandRun named = run(common + " --methods relevance --steps 2");
  EXPECT_EQ(named.exit_code, 1);
  EXPECT_NE(named.err.find("relevance is not available"), std::string::npos) << named.err;
}

TEST_F(AttributionCliTest, EvalSaysWhenTheModelDoesNotFitTheTask) {
  const std::string three_classes = model_with_classes(3), labels = glyphs_ + "/labels.csv";
  const CommandRun folder = run("eval --images " + glyphs_ + " --boxes " + labels + " --labels " + labels +
                                " --model " + three_classes + " --methods attention --layers 0 --steps 2");
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  EXPECT_NE(folder.out.find("does not fit this task, accuracy is not measured"), std::string::npos) << folder.out;
  EXPECT_EQ(folder.out.find("accuracy: 0"), std::string::npos) << folder.out;

  const CommandRun demo = run("eval --models " + three_classes + " --samples 2");
  ASSERT_EQ(demo.exit_code, 0) << demo.err;
  EXPECT_NE(demo.out.find("does not fit the glyph task: the model has 3 classes, the task 10"), std::string::npos)
      << demo.out;
}

TEST_F(AttributionCliTest, ReportsBadInputClearly) {
  const std::string base = " --model " + model_ + " --image " + image_ + " --out " + (folder_ / "bad").string();
  for (const auto& [arguments, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"analyze --analysis faithfulness --methods gradcam,saliency" + base,
            "--methods: unknown method 'saliency'"},
           {"analyze --analysis relevance --layer 9" + base, "--layer 9"},
           {"analyze --analysis ig --ig-steps 1" + base, "--ig-steps must be from 2 to 10000"},
           {"analyze --analysis scorecam --class 12" + base, "--class 12: the model has 10 classes"},
           {"analyze --analysis faithfulness --replacement noise" + base, "unknown replacement 'noise'"},
           {"eval --images " + glyphs_ + " --model " + model_, "--masks DIR or --boxes FILE.csv"},
           {"analyze --analysis relevance --model " + std::string(ATTNSCOPE_TEST_DATA_DIR) +
                "/torchscript_cases/mixer_deit_dist.pt --image " + image_ + " --out " + (folder_ / "ts").string(),
            "attention relevance (Chefer et al.) needs q, k and the activations"},
       }) {
    SCOPED_TRACE(arguments);
    const CommandRun result = run(arguments);
    EXPECT_TRUE(result.exit_code == 1 || result.exit_code == 2) << result.exit_code;
    EXPECT_NE(result.err.find(phrase), std::string::npos) << result.err;
  }
}

}  // namespace test_attribution_cli
}  // namespace attnscope
