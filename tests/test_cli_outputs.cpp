// The command line as the workbench's twin: run and analyze refuse to overwrite, summaries record
// query, variant and preprocessing (read from the checkpoint's config unless given), export writes
// what the workbench shows (panels with their own checkpoints, the mean view, a 240 pt column),
// Grad-CAM panels carry their own colour bars and analyze takes --colormap.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "analysis/focus_projection.h"
#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/npy.h"
#include "figures/plots.h"
#include "models/inference.h"
#include "session/app_state.h"
#include "tests/cli_process.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_cli_outputs {

namespace fs = std::filesystem;

const std::string kParityModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

class CliOutputsTest : public ::testing::Test {
 protected:
  // Exit code of `attnscope ARGS`; stderr in err_.
  int run(const std::string& arguments) {
    const CommandRun command = run_attnscope(arguments, folder_);
    err_ = command.err;
    return command.exit_code;
  }
  static std::string read(const fs::path& path) { return read_file_contents(path); }
  static nlohmann::json read_json(const fs::path& path) { return read_json_file(path); }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  TestFolder scratch_{"outputs"};
  const fs::path& folder_ = scratch_.path();
  std::string err_;
};

// `run` and `analyze` keep their output names, and a second run into the same folder is refused
// (nothing is touched) unless --overwrite.
TEST_F(CliOutputsTest, RunAndAnalyzeRefuseToOverwriteUnlessAsked) {
  const std::string image = asset_path("images/sign_4.png");
  const std::string run_args = "run --image " + image + " --out " + path("run") + " --query 3,4 --variant linear";
  ASSERT_EQ(run(run_args), 0) << err_;
  for (const char* name :
       {"summary.json", "logits.npy", "attention_l3_h0.npy", "matrix_l3_h0.npy", "overlay_l3_h0.png"})
    EXPECT_TRUE(fs::exists(folder_ / "run" / name)) << name;
  const nlohmann::json summary = read_json(folder_ / "run" / "summary.json");
  EXPECT_EQ(summary["variant"], "linear");
  EXPECT_EQ(summary["query"]["spec"], "3,4");
  const std::string logits = read(folder_ / "run" / "logits.npy");
  fs::remove(folder_ / "run" / "logits.npy");  // only the summary (and others) remain: still refused

  EXPECT_EQ(run(run_args + " --variant softmax"), 1);
  EXPECT_NE(err_.find("exists"), std::string::npos) << err_;
  EXPECT_NE(err_.find("--overwrite"), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(folder_ / "run" / "logits.npy"));  // nothing was written
  EXPECT_EQ(read_json(folder_ / "run" / "summary.json")["variant"], "linear");
  ASSERT_EQ(run(run_args + " --variant softmax --overwrite"), 0) << err_;
  EXPECT_EQ(read_json(folder_ / "run" / "summary.json")["variant"], "softmax");

  const std::string analyze_args = "analyze --analysis rollout --model " + default_model_path() + " --image " + image +
                                   " --out " + path("analysis") + " --query 2,2";
  ASSERT_EQ(run(analyze_args), 0) << err_;
  const nlohmann::json rollout = read_json(folder_ / "analysis" / "summary.json");
  EXPECT_EQ(rollout["variant"], "native");
  EXPECT_EQ(rollout["query"]["spec"], "2,2");
  EXPECT_EQ(rollout["query"]["name"], "patch(2,2)");
  const std::string before = read(folder_ / "analysis" / "rollout.npy");
  EXPECT_EQ(run(analyze_args + " --discard 0.5"), 1);
  EXPECT_NE(err_.find("--overwrite"), std::string::npos) << err_;
  EXPECT_EQ(read(folder_ / "analysis" / "rollout.npy"), before);
  ASSERT_EQ(run(analyze_args + " --discard 0.5 --overwrite"), 0) << err_;
  EXPECT_NE(read(folder_ / "analysis" / "rollout.npy"), before);
}

// A path that is not UTF-8 (bytes of a Latin-1 file name) is taken by analyze and eval as by run: the
// summary writes its bad bytes as U+FFFD (issue 60: analyze refused it with nlohmann's raw type error).
TEST_F(CliOutputsTest, PathsThatAreNotUtf8AreCarriedAsBytes) {
  const std::string image = path("caf\xe9.png");
  fs::copy_file(asset_path("images/sign_4.png"), image);
  // A process of its own: the fork server's requests are JSON, which cannot carry these bytes.
  for (const std::string command : {"analyze", "run"}) {
    std::vector<std::string> args = {command, "--image", image, "--out", path("latin1_" + command)};
    if (command == "analyze") args.insert(args.begin() + 1, {"--analysis", "rollout"});
    testing::CliRequest request(args, "/dev/null", path("err_" + command + ".txt"));
    request.fresh_process = true;
    EXPECT_EQ(testing::run_cli_process(request).exit_code, 0) << read(path("err_" + command + ".txt"));
  }
  const nlohmann::json summary = read_json(folder_ / "latin1_analyze" / "summary.json");
  EXPECT_NE(summary.dump().find("caf\xef\xbf\xbd.png"), std::string::npos) << summary.dump();
}

// timm's pretrained_cfg in the file's metadata (or a config.json beside it) sets mean, std, crop and
// interpolation; options override each; summary.json says what was used and where it came from.
TEST_F(CliOutputsTest, PreprocessingComesFromTheCheckpointsConfig) {
  Checkpoint checkpoint = load_checkpoint(default_model_path());
  const nlohmann::json cfg = {{"mean", {0.5, 0.5, 0.5}},
                              {"std", {0.25, 0.25, 0.25}},
                              {"crop_pct", 1.0},
                              {"interpolation", "bilinear"},
                              {"input_size", {3, 96, 96}}};
  std::map<std::string, std::string> metadata = checkpoint.metadata;
  metadata["pretrained_cfg"] = cfg.dump();
  const std::string with_cfg = path("with_cfg.safetensors");
  save_safetensors(with_cfg, checkpoint.tensors, metadata);

  const std::string image = asset_path("images/horse.png");
  ASSERT_EQ(run("run --model " + with_cfg + " --image " + image + " --out " + path("cfg")), 0) << err_;
  const nlohmann::json used = read_json(folder_ / "cfg" / "summary.json")["preprocessing"];
  EXPECT_EQ(used["mean"], (nlohmann::json{0.5, 0.5, 0.5}));
  EXPECT_EQ(used["std"], (nlohmann::json{0.25, 0.25, 0.25}));
  EXPECT_EQ(used["crop"]["fraction"], 1.0);
  EXPECT_EQ(used["crop"]["source"], "pretrained_cfg (file metadata)");
  EXPECT_EQ(used["interpolation"]["filter"], "bilinear");
  EXPECT_EQ(used["normalization_source"], "pretrained_cfg (file metadata)");

  // The logits are the engine's on exactly that input.
  LoadedModel model = load_model(with_cfg, {}, torch::kCPU);
  InputSettings input;
  const RgbImage expected_input =
      prepare_image(load_image_rgb(image, kDefaultMaxPixels), ResizeMode::Timm, 96, 96, 1.0, Interpolation::Bilinear);
  EXPECT_TRUE(prepare_model_input(load_image_rgb(image, kDefaultMaxPixels), input, model).same_pixels(expected_input));
  const InferenceResult engine = run_inference(model, expected_input, AttentionSettings{});
  EXPECT_TRUE(torch::allclose(read_npy(path("cfg/logits.npy")), engine.forward.logits[0], 1e-5, 1e-6));

  // Options override the checkpoint, one by one.
  ASSERT_EQ(run("run --model " + with_cfg + " --image " + image + " --out " + path("given") +
                " --mean 0.4,0.4,0.4 --crop 0.875 --interpolation bicubic"),
            0)
      << err_;
  const nlohmann::json given = read_json(folder_ / "given" / "summary.json")["preprocessing"];
  EXPECT_EQ(given["crop"]["source"], "--crop");
  EXPECT_EQ(given["interpolation"]["filter"], "bicubic");
  EXPECT_EQ(given["normalization_source"], "--mean");
  EXPECT_NEAR(given["mean"][0].get<double>(), 0.4, 1e-6);
  EXPECT_EQ(given["std"], (nlohmann::json{0.25, 0.25, 0.25}));  // still the checkpoint's

  // A timm hub folder: config.json with pretrained_cfg beside the weights.
  fs::create_directories(folder_ / "hub");
  fs::copy_file(default_model_path(), folder_ / "hub" / "model.safetensors");
  std::ofstream(folder_ / "hub" / "config.json") << nlohmann::json{{"architecture", "vit"}, {"pretrained_cfg", cfg}};
  const LoadedModel hub = load_model(path("hub/model.safetensors"), {}, torch::kCPU);
  EXPECT_EQ(hub.declared.crop_pct, 1.0);
  EXPECT_EQ(hub.declared.normalization_source, "pretrained_cfg (config.json)");
  // Nothing declared: ImageNet and timm's defaults, said so.
  ASSERT_EQ(run("run --image " + image + " --out " + path("plain")), 0) << err_;
  const nlohmann::json plain = read_json(folder_ / "plain" / "summary.json")["preprocessing"];
  EXPECT_EQ(plain["crop"]["fraction"], 0.875);
  EXPECT_EQ(plain["crop"]["source"], "default");
}

// Hugging Face's preprocessor_config.json: resize then centre crop is timm's transform with crop =
// crop_size / size; its mean and std are the model's.
TEST_F(CliOutputsTest, HuggingFacePreprocessorIsRead) {
  const std::string folder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/hf_deit_cls";
  if (!fs::exists(folder)) GTEST_SKIP() << "no " << folder;
  const nlohmann::json pre = read_json(fs::path(folder) / "preprocessor_config.json");
  const LoadedModel model = load_model(folder, {}, torch::kCPU);
  EXPECT_EQ(model.declared.source, "preprocessor_config.json");
  ASSERT_TRUE(model.declared.resize.has_value());
  if (pre.value("do_center_crop", false)) {
    EXPECT_EQ(*model.declared.resize, ResizeMode::Timm);
    ASSERT_TRUE(model.declared.crop_pct.has_value());
    EXPECT_GT(*model.declared.crop_pct, 0.5);
    EXPECT_LE(*model.declared.crop_pct, 1.0);
  } else {
    EXPECT_EQ(*model.declared.resize, ResizeMode::Fit);
  }
  EXPECT_EQ(model.declared.normalization_source, "preprocessor_config.json");
}

// The workbench's panels as a figure: each column its own checkpoint, the mean over heads, one scale
// in the requested mode, and the numbers behind each panel are the engine's mean rows.
TEST_F(CliOutputsTest, ExportOfTheMeanViewWithACheckpointPerPanel) {
  const std::string image = asset_path("images/sign_4.png");
  const std::string first = asset_path("models/softmax.safetensors"), other = asset_path("models/linear.safetensors");
  ASSERT_EQ(run("export --model " + first + " --image " + image + " --out " + path("fig") +
                " --layout panels --view mean --scale uniform --colormap magma --variants native,native:model=" +
                other + " --query 5,6"),
            0)
      << err_;
  const nlohmann::json manifest = read_json(folder_ / "fig" / "sign_4_panels.png.json");
  EXPECT_EQ(manifest["layout"], "panels");
  ASSERT_EQ(manifest["col_labels"].size(), 2u);
  EXPECT_EQ(manifest["col_labels"][1], "linear: native");
  EXPECT_EQ(manifest["scales"][0]["colormap"], "magma");
  EXPECT_NE(manifest["scales"][0]["label"].get<std::string>().find("x uniform"), std::string::npos);
  ASSERT_EQ(manifest["panels"].size(), 2u);
  EXPECT_NE(manifest["title"].get<std::string>().find("mean of 3 heads"), std::string::npos) << manifest["title"];
  for (int column = 0; column < 2; ++column) {
    const auto& panel = manifest["panels"][column];
    LoadedModel model = load_model(column == 0 ? first : other, {}, torch::kCPU);
    const InferenceResult result =
        run_inference(model, prepare_model_input(load_image_rgb(image, kDefaultMaxPixels), InputSettings{}, model),
                      AttentionSettings{});
    const AttentionCapture& capture = result.forward.layers.back();
    const int token = capture.layout.patch_token(5, 6);
    torch::Tensor mean = torch::zeros({capture.key_layout.total_tokens()});
    for (int h = 0; h < capture.heads; ++h) mean += capture.row(0, h, token);
    mean = capture.key_grid(mean / capture.heads) * capture.key_layout.total_tokens();  // x uniform
    const torch::Tensor written = read_npy((folder_ / "fig" / panel["data"].get<std::string>()).string());
    EXPECT_TRUE(torch::allclose(written, mean, 1e-4, 1e-6)) << panel["data"];
  }
  EXPECT_TRUE(fs::exists(folder_ / "fig" / "sign_4_panels.png"));
}

// A paper column: the PNG is 240 pt wide at the DPI asked for.
TEST_F(CliOutputsTest, ExportFitsTheWidthAskedFor) {
  ASSERT_EQ(run("export --model " + default_model_path() + " --image " + asset_path("images/sign_4.png") + " --out " +
                path("col") + " --layout grid-layers --variants softmax,focused:p=8 --width-pt 240 --dpi 300"),
            0)
      << err_;
  const nlohmann::json manifest = read_json(folder_ / "col" / "sign_4_grid-layers.png.json");
  EXPECT_LE(manifest["size_pt"][0].get<double>(), 240.0);
  EXPECT_GE(manifest["size_pt"][0].get<double>(), 239.0);
  EXPECT_EQ(manifest["png_size_px"][0], 1000);
  const cv::Mat png = cv::imread(path("col/sign_4_grid-layers.png"));
  EXPECT_EQ(png.cols, 1000);
}

// Grad-CAM figures: every panel has its own colour bar right beside it; analyze takes --colormap.
TEST_F(CliOutputsTest, GradcamPanelsHaveTheirOwnBarsAndAnalyzeTakesAColormap) {
  const std::string image = asset_path("images/sign_4.png");
  ASSERT_EQ(run("export --model " + default_model_path() + " --image " + image + " --out " + path("cam") +
                " --layout gradcam-attention --variants native,linear --colormap gray --dpi 150"),
            0)
      << err_;
  const nlohmann::json manifest = read_json(folder_ / "cam" / "sign_4_gradcam-attention.png.json");
  cv::Mat png = cv::imread(path("cam/sign_4_gradcam-attention.png"), cv::IMREAD_GRAYSCALE);
  ASSERT_FALSE(png.empty());
  const double pixels_per_point = manifest["pixels_per_point"];
  const double font = 8.0;  // the default style's
  for (const auto& panel : manifest["panels"]) {
    const auto& box = panel["content_px"];
    // The bar starts 0.6 font sizes right of the panel and is 0.7 font sizes wide; with the gray
    // map it runs from black at the bottom to white at the top.
    const int x = int(box[0].get<double>() + box[2].get<double>() + 0.95 * font * pixels_per_point);
    const int top = int(box[1].get<double>() + 3), bottom = int(box[1].get<double>() + box[3].get<double>() - 3);
    ASSERT_LT(x, png.cols);
    EXPECT_GT(png.at<uint8_t>(top, x), 230) << panel["title"];
    EXPECT_LT(png.at<uint8_t>(bottom, x), 25) << panel["title"];
  }

  ASSERT_EQ(run("analyze --analysis gradcam --model " + default_model_path() + " --image " + image + " --out " +
                path("gray") + " --colormap gray --opacity 1 --alpha constant"),
            0)
      << err_;
  cv::Mat overlay = cv::imread(path("gray/gradcam_overlay.png"));
  ASSERT_FALSE(overlay.empty());
  for (int y = 0; y < overlay.rows; y += 7)
    for (int x = 0; x < overlay.cols; x += 7) {
      const cv::Vec3b bgr = overlay.at<cv::Vec3b>(y, x);
      ASSERT_EQ(bgr[0], bgr[1]);
      ASSERT_EQ(bgr[1], bgr[2]);
    }
  EXPECT_EQ(read_json(folder_ / "gray" / "summary.json")["state"]["colormap"], "gray");
}

}  // namespace test_cli_outputs
}  // namespace attnscope

namespace attnscope {
namespace test_cli_outputs {

// f_p made visible on real data: a head's keys before and after f_p in 2-D, one segment from each
// x to f_p(x); f_p pulls them toward their largest channel's axis; the figure exports.
TEST_F(CliOutputsTest, FocusingOnAHeadsOwnVectorsIsVisibleAndExports) {
  LoadedModel model = load_model(default_model_path(), {}, torch::kCPU);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(asset_path("images/sign_4.png"), kDefaultMaxPixels), InputSettings{}, model);
  const InferenceResult result = run_inference(model, prepared, AttentionSettings{});
  c10::InferenceMode guard;
  for (FocusProjectionKind kind : {FocusProjectionKind::Channels, FocusProjectionKind::Pca}) {
    const FocusProjection projection = project_focusing(result.forward.layers[2], 0, 3.0, false, kind, 100);
    EXPECT_EQ(projection.shown, 100);
    EXPECT_EQ(projection.total, 145);
    EXPECT_NE(projection.axes.find(kind == FocusProjectionKind::Pca ? "PCA" : "channels"), std::string::npos);
    double before = 0, after = 0;
    for (int i = 0; i < projection.shown; ++i) {
      before += projection.axis_cosine_before[size_t(i)];
      after += projection.axis_cosine_after[size_t(i)];
    }
    EXPECT_GT(after, before + 5);  // pulled toward the axes
    const PlotPanel plot = focus_projection_plot(projection, 3.0);
    ASSERT_EQ(plot.series.size(), 3u);
    EXPECT_TRUE(plot.series[0].pairs);
    EXPECT_EQ(plot.series[0].x.size(), 200u);  // one segment per vector
  }
  ASSERT_EQ(run("export --model " + default_model_path() + " --image " + asset_path("images/sign_4.png") + " --out " +
                path("fp") + " --layout fp-vectors --layer 2 --fp-projection pca"),
            0)
      << err_;
  const nlohmann::json manifest = read_json(folder_ / "fp" / "sign_4_fp-vectors.png.json");
  EXPECT_NE(manifest["panels"][0]["title"].get<std::string>().find("PCA"), std::string::npos);
  const std::string csv = read(folder_ / "fp" / "sign_4_fp-vectors_data" / "fp_projection.csv");
  EXPECT_NE(csv.find("\nx,"), std::string::npos);
}

}  // namespace test_cli_outputs
}  // namespace attnscope
