// The attnscope command line end to end on real files: outputs and their consistency with the
// engine, and one clear error line with a non-zero exit for every kind of bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/image.h"
#include "core/npy.h"
#include "core/number_text.h"
#include "models/inference.h"
#include "session/app_state.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_cli {

namespace fs = std::filesystem;

const std::string kModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    image_ = (folder_ / "input.png").string();
    cv::Mat picture(150, 200, CV_8UC3);
    cv::randu(picture, 0, 255);
    cv::imwrite(image_, picture);
  }
  CommandRun run(const std::string& arguments) { return run_attnscope(arguments, folder_); }

  // Asserts a clean failure: exit code 1 or 2, no crash, exactly one line on stderr containing `phrase`.
  void expect_clear_error(const std::string& arguments, const std::string& phrase) {
    SCOPED_TRACE(arguments);
    const CommandRun result = run(arguments);
    EXPECT_FALSE(result.crashed) << result.err;
    EXPECT_TRUE(result.exit_code == 1 || result.exit_code == 2) << "exit code " << result.exit_code;
    EXPECT_NE(result.err.find(phrase), std::string::npos) << "stderr: " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }

  std::string write_bytes(const std::string& name, const std::string& bytes) {
    const std::string path = (folder_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  TestFolder scratch_{"cli"};
  const fs::path& folder_ = scratch_.path();
  std::string image_;
};

// OpenMP threads spin briefly, then sleep, unless the caller chose (libgomp reads the policy once,
// when it starts; app/main.cpp): libgomp starts once, in the process that runs the command, with a
// spin count of 10000 (unset it is 300000, PASSIVE alone 0), a caller's spin count and a caller's
// ACTIVE are kept.
TEST_F(CliTest, OpenMpSpinsBrieflyThenSleepsUnlessTheCallerChose) {
  auto policy_lines = [&](const std::string& environment) {
    const std::string err = (folder_ / "openmp_environment.txt").string();
    const int status = std::system(
        (environment + " OMP_DISPLAY_ENV=verbose " + ATTNSCOPE_CLI + " --help > /dev/null 2> '" + err + "'").c_str());
    EXPECT_EQ(status, 0);
    std::istringstream text(read_file_contents(err));
    std::vector<std::string> lines;
    for (std::string line; std::getline(text, line);)
      if (line.find("OMP_WAIT_POLICY") != std::string::npos || line.find("GOMP_SPINCOUNT") != std::string::npos)
        lines.push_back(line.substr(line.find_first_not_of(' ')));
    return lines;
  };
  EXPECT_EQ(policy_lines("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT"),
            (std::vector<std::string>{"OMP_WAIT_POLICY = 'PASSIVE'", "GOMP_SPINCOUNT = '10000'"}));
  EXPECT_EQ(policy_lines("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=0"),
            (std::vector<std::string>{"OMP_WAIT_POLICY = 'PASSIVE'", "GOMP_SPINCOUNT = '0'"}));
  const std::vector<std::string> active = policy_lines("env OMP_WAIT_POLICY=active");
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(active[0], "OMP_WAIT_POLICY = 'ACTIVE'");
}

TEST_F(CliTest, RunWritesOutputsConsistentWithTheEngine) {
  const fs::path out = folder_ / "out";
  const CommandRun result = run("run --model " + kModel + " --arch heads=2 --image " + image_ + " --out " +
                                out.string() + " --variant linear --layer 1 --head 1 --query 3,4 --device cpu");
  ASSERT_EQ(result.exit_code, 0) << result.err;

  std::ifstream summary_file(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_file);
  EXPECT_EQ(summary["variant"], "linear");
  EXPECT_EQ(summary["top5"].size(), 5u);
  EXPECT_EQ(summary["layers"].size(), 2u);
  EXPECT_EQ(summary["layers"][0]["ranks"].size(), 2u);
  EXPECT_EQ(summary["layers"][0]["heads"], 2);
  EXPECT_EQ(summary["layers"][0]["query_grid"], nlohmann::json::array({7, 7}));
  EXPECT_EQ(summary["query"]["token"], 1 + 3 * 7 + 4);
  EXPECT_EQ(summary["architecture"]["family"], "vit-cls");
  // Linear attention's rank is bounded by the head dimension (32 here) even with 50 tokens.
  for (const auto& layer : summary["layers"])
    for (const auto& head : layer["ranks"]) EXPECT_LE(head["rank"].get<int>(), 32);

  // The row the CLI wrote equals the engine's row for the same query, and row 25 of its matrix.
  AppState state;
  state.attention.variant = Variant::Linear;
  ArchOverrides overrides;
  overrides.values["heads"] = 2;
  LoadedModel model = load_model(kModel, overrides, torch::kCPU);
  const auto prepared = prepare_model_input(load_image_rgb(image_, kDefaultMaxPixels), state.input_settings(), model);
  const auto engine = run_inference(model, prepared, state.attention);
  const auto row = read_npy((out / "attention_l1_h1.npy").string());
  const auto matrix = read_npy((out / "matrix_l1_h1.npy").string());
  ASSERT_EQ(row.sizes(), torch::IntArrayRef({50}));
  ASSERT_EQ(matrix.sizes(), torch::IntArrayRef({50, 50}));
  EXPECT_TRUE(torch::allclose(row, engine.forward.layers[1].row(0, 1, 26), 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(matrix[26], row, 1e-6, 1e-7));
  const auto logits = read_npy((out / "logits.npy").string());
  EXPECT_TRUE(torch::allclose(logits, engine.forward.logits[0], 1e-5, 1e-6));
  EXPECT_EQ(summary["top5"][0]["index"].get<int>(), engine.top[0].index);

  // The overlay is the model's input size, and its hottest patch is where the row peaks.
  const cv::Mat overlay = cv::imread((out / "overlay_l1_h1.png").string());
  ASSERT_FALSE(overlay.empty());
  EXPECT_EQ(overlay.cols, 112);
  EXPECT_EQ(overlay.rows, 112);
}

// Without --model and --image, `run` takes the bundled demo model and sample image.
TEST_F(CliTest, RunWithoutModelOrImageUsesTheBundledDefault) {
  const std::string out = (folder_ / "default").string();
  const CommandRun result = run("run --out " + out);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(out + "/summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["model"], default_model_path());
  EXPECT_EQ(summary["image"], default_image_path());
  const auto logits = read_npy(out + "/logits.npy");
  EXPECT_EQ(logits.numel(), 10);
  EXPECT_EQ(logits.argmax().item<int64_t>(), 4) << "the FLatten demo model reads sign_4.png as a 4";
}

// ATTNSCOPE_LINEAR forces the linear layers' GEMM (otherwise timed once per process): both give the
// same logits, on the bundled ViT demo and on a Swin (row-chunked windows), and summary.json says
// which one ran.
TEST_F(CliTest, BothLinearBackendsGiveTheSameLogits) {
  const std::string swin = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hier_cases/swin_a.safetensors";
  for (const std::string& model : {default_model_path(), swin}) {
    SCOPED_TRACE(model);
    std::map<std::string, torch::Tensor> logits;
    for (const std::string backend : {"onednn", "blas"}) {
      const std::string out = (folder_ / ("backend_" + backend)).string();
      std::filesystem::remove_all(out);
      testing::CliRequest request{{"run", "--model", model, "--resize", "fit", "--device", "cpu", "--out", out}};
      request.environment = {"ATTNSCOPE_LINEAR=" + backend};
      ASSERT_EQ(testing::run_cli_process(request).exit_code, 0) << backend;
      std::ifstream in(out + "/summary.json");
      EXPECT_EQ(nlohmann::json::parse(in).at("linear_backend"), backend);
      logits[backend] = read_npy(out + "/logits.npy");
    }
    EXPECT_TRUE(torch::allclose(logits["onednn"], logits["blas"], 1e-4, 1e-5));
  }
}

TEST_F(CliTest, ReportsBadInputClearly) {
  const std::string base = " --arch heads=2 --out " + (folder_ / "out").string() + " --image " + image_;
  expect_clear_error("run --image " + image_, "--out is required");
  expect_clear_error("run --model " + (folder_ / "absent.safetensors").string() + base, "No such file");
  expect_clear_error("run --model " + write_bytes("garbage.safetensors", std::string(4096, '\x7f')) + base,
                     "garbage.safetensors");
  expect_clear_error("run --model " + write_bytes("empty.safetensors", "") + base, "empty.safetensors");
  const std::string valid = read_file_contents(kModel);
  for (size_t cut : {size_t(4), size_t(20), valid.size() / 2, valid.size() - 1})
    expect_clear_error(
        "run --model " + write_bytes("cut" + std::to_string(cut) + ".safetensors", valid.substr(0, cut)) + base,
        "cut" + std::to_string(cut));
  std::string huge_header = valid;
  for (int i = 0; i < 8; ++i) huge_header[size_t(i)] = '\xff';
  expect_clear_error("run --model " + write_bytes("huge.safetensors", huge_header) + base, "huge.safetensors");

  // Wrong shapes and missing keys, written as valid safetensors.
  Checkpoint checkpoint = load_safetensors(kModel);
  auto misshaped = checkpoint.tensors;
  misshaped["blocks.0.mlp.fc1.weight"] = torch::zeros({7, 64});
  const std::string misshaped_path = (folder_ / "misshaped.safetensors").string();
  save_safetensors(misshaped_path, misshaped);
  expect_clear_error("run --model " + misshaped_path + base, "blocks.0.mlp.fc2.weight");
  auto missing = checkpoint.tensors;
  missing.erase("blocks.1.norm2.bias");
  const std::string missing_path = (folder_ / "missing.safetensors").string();
  save_safetensors(missing_path, missing);
  expect_clear_error("run --model " + missing_path + base, "missing: blocks.1.norm2.bias");
  auto not_a_vit = std::map<std::string, torch::Tensor>{{"conv1.weight", torch::zeros({8, 3, 3, 3})}};
  const std::string resnet_path = (folder_ / "resnet.safetensors").string();
  save_safetensors(resnet_path, not_a_vit);
  expect_clear_error("run --model " + resnet_path + base, "unsupported model");

  const std::string model = " --model " + kModel + " --arch heads=2 --out " + (folder_ / "out").string();
  expect_clear_error("run" + model + " --image " + write_bytes("bad.png", "not a png at all"), "bad.png");
  expect_clear_error("run" + model + " --image " + (folder_ / "none.png").string(), "No such file");
  expect_clear_error("run" + model + " --image " + image_ + " --variant cosine", "unknown variant 'cosine'");
  expect_clear_error("run" + model + " --image " + image_ + " --layer 9", "the model has 2 blocks");
  expect_clear_error("run" + model + " --image " + image_ + " --head 5", "--head 5: this layer has 2 heads (0..1)");
  expect_clear_error("run" + model + " --image " + image_ + " --query 7,0", "outside the 7x7 patch grid");
  expect_clear_error("run" + model + " --image " + image_ + " --query middle",
                     "--query expects cls, dist, regN or ROW,COL");
  expect_clear_error("run" + model + " --image " + image_ + " --resize none", "--resize timm or fit");
  expect_clear_error("run" + model + " --image " + image_ + " --size 100", "not a multiple of 16");
  expect_clear_error("run" + model + " --image " + image_ + " --p -1", "--p must be in (0, 32]");
  expect_clear_error("run" + model + " --image " + image_ + " --bogus 1", "unknown option --bogus");
  // FLatten's learned encoding at another input size: said as grids and what to do.
  expect_clear_error("run --model " + asset_path("models/flatten.safetensors") + " --image " + image_ +
                         " --size 104 --out " + (folder_ / "out").string(),
                     "trained for a 12x12 grid; this input gives a 13x13 grid: give the model its trained input size");
  // An image given as the model is named as an image (it read as an absurd safetensors header).
  const std::string image_as_model = (folder_ / "image.pth").string();
  fs::copy_file(image_, image_as_model);
  expect_clear_error("info --model " + image_as_model, "a PNG image, not a checkpoint (did you mean --image?)");
  // Features of no SAE: refused, not ignored while the summary recorded them.
  expect_clear_error("run" + model + " --image " + image_ + " --sae-add 3:2", "give --sae FILE");
  EXPECT_FALSE(fs::exists(folder_ / "out" / "summary.json"));
  expect_clear_error("frobnicate", "unknown command");
  // No output of a failed run is left behind half-written.
  for (const auto& entry : fs::directory_iterator(folder_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST_F(CliTest, EveryCommandHasHelp) {
  for (const char* command : {"run", "info", "train", "eval", "glyphs", "bench", "export"}) {
    const CommandRun result = run(std::string(command) + " --help");
    EXPECT_EQ(result.exit_code, 0) << command << ": " << result.err;
    EXPECT_TRUE(result.err.empty()) << command;
  }
}

TEST_F(CliTest, InfoPrintsTheInferredArchitecture) {
  const CommandRun result = run("info --model " + kModel + " --arch heads=2 --json");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  expect_clear_error("info --model " + kModel + " --arch heads=3", "3 heads (from --arch) do not divide the width 64");
}

// The hub layouts from the command line, as a researcher runs them: a PNG, --resize none, the
// model's own normalisation; logits.npy and the query's row match the independent reference
// (tests/python/make_hub_cases.py) within the contract's 3e-5 and 2e-5.
TEST_F(CliTest, RunOnHubLayoutsMatchesTheAuthorsForward) {
  const std::string folder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/";
  std::ifstream in(folder + "image_cases.json");
  ASSERT_TRUE(in) << "missing image_cases.json";
  const auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const fs::path out = folder_ / c.at("name").get<std::string>();
    const int layer = c.at("layer"), head = c.at("head");
    const std::string query = c.at("query");
    const CommandRun result =
        run("run --model '" + folder + c.at("model").get<std::string>() + "' --image '" + folder +
            c.at("image").get<std::string>() + "' --resize none --layer " + std::to_string(layer) + " --head " +
            std::to_string(head) + " --query " + query + " --out '" + out.string() + "'");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const torch::Tensor logits = read_npy((out / "logits.npy").string());
    const torch::Tensor expected = read_npy(folder + c.at("logits").get<std::string>());
    ASSERT_EQ(logits.sizes(), expected.sizes());
    EXPECT_LT((logits - expected).abs().max().item<double>(), 3e-5);
    const std::string suffix = "_l" + std::to_string(layer) + "_h" + std::to_string(head);
    const torch::Tensor row = read_npy((out / ("attention" + suffix + ".npy")).string());
    const torch::Tensor expected_row = read_npy(folder + c.at("row").get<std::string>());
    ASSERT_EQ(row.sizes(), expected_row.sizes());
    EXPECT_LT((row - expected_row).abs().max().item<double>(), 2e-5);
    std::ifstream summary_in(out / "summary.json");
    const auto summary = nlohmann::json::parse(summary_in);
    EXPECT_EQ(summary["query"]["spec"], query);
  }
}

// A TorchScript file: what needs q and k says so and writes nothing; what it reports works.
TEST_F(CliTest, TorchScriptFilesRefuseWhatNeedsQAndKAndRunTheRest) {
  const std::string model =
      " --model '" + std::string(ATTNSCOPE_TEST_DATA_DIR) + "/torchscript_cases/mixer_vit_reg2.pt' --image " + image_;
  const fs::path out = folder_ / "out";
  for (const std::string analysis : {"fp", "gradcam"}) {
    expect_clear_error("analyze --analysis " + analysis + model + " --out '" + out.string() + "'", "TorchScript");
    EXPECT_FALSE(fs::exists(out) && !fs::is_empty(out)) << analysis << " wrote files before failing";
  }
  expect_clear_error("run" + model + " --variant linear --out '" + out.string() + "'", "TorchScript");
  const CommandRun result = run("run" + model + " --query reg1 --out '" + out.string() + "'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["query"]["name"], "reg1");
  EXPECT_EQ(summary["architecture"]["family"], "torchscript");
}

// A model whose output is NaN fails before anything is written: no half set of outputs.
TEST_F(CliTest, RunWithNonFiniteOutputWritesNothing) {
  Checkpoint checkpoint = load_checkpoint(kModel);
  checkpoint.tensors.at("blocks.0.norm1.weight")[0] = std::numeric_limits<float>::quiet_NaN();
  const std::string broken = (folder_ / "nan.safetensors").string();
  save_safetensors(broken, checkpoint.tensors, checkpoint.metadata);
  const fs::path out = folder_ / "out";
  expect_clear_error("run --model " + broken + " --arch heads=2 --image " + image_ + " --out " + out.string(),
                     "not finite");
  EXPECT_FALSE(fs::exists(out)) << "a failed run left files behind";
}

// A key missing from the middle of a file is named, not read as a smaller model.
TEST_F(CliTest, MissingKeysAreNamed) {
  for (const std::string key : {"blocks.1.norm1.weight", "head.weight"}) {
    Checkpoint checkpoint = load_checkpoint(kModel);
    ASSERT_EQ(checkpoint.tensors.erase(key), 1u);
    const std::string broken = (folder_ / "missing.safetensors").string();
    save_safetensors(broken, checkpoint.tensors, checkpoint.metadata);
    expect_clear_error("info --model " + broken + " --arch heads=2", "missing tensor '" + key + "'");
  }
}

// Sizes and counts have bounds: huge values are refused before anything is allocated.
TEST_F(CliTest, HugeSizesAndCountsAreRefused) {
  const std::string model = " --model " + kModel + " --arch heads=2";
  const std::string out = " --out " + (folder_ / "o").string();
  expect_clear_error("run" + model + " --image " + image_ + " --size 100000" + out, "at most 4096");
  expect_clear_error("analyze --analysis fp --bins 1000000000" + model + " --image " + image_ + out,
                     "--bins must be from 1 to 100000");
  expect_clear_error("gui --width 100000 --frames 1", "--width and --height are at most 16384 pixels");
  // A whole number past int's range is out of range, not "not an integer".
  expect_clear_error("run" + model + " --image " + image_ + " --layer 99999999999" + out,
                     "--layer 99999999999 is out of range: an integer from -2147483648 to 2147483647");
  // A 100000 x 1 image: timm's resize would scale it to 25.6 million pixels per row.
  const std::string thin = (folder_ / "thin.png").string();
  cv::imwrite(thin, cv::Mat(1, 100000, CV_8UC3, cv::Scalar(20, 40, 60)));
  expect_clear_error("run" + model + " --image " + thin + out, "aspect ratio is too extreme");
  EXPECT_TRUE(!fs::exists(folder_ / "o") || fs::is_empty(folder_ / "o"));
}

// Class names the file gives but that cannot be used (another count, not a list) are said as a
// warning; they were dropped in silence and the classes numbered.
TEST(ClassNames, NamesThatCannotBeUsedAreSaid) {
  TestFolder scratch("class-names");
  const Checkpoint demo = load_checkpoint(asset_path("models/softmax.safetensors"));
  for (const auto& [names, said] : std::vector<std::pair<std::string, std::string>>{
           {"[\"a\", \"b\"]", "lists 2 names for 10 classes"}, {"not json", "is not a JSON list of names"}}) {
    std::map<std::string, std::string> metadata = demo.metadata;
    metadata["class_names"] = names;
    const std::string path = (scratch.path() / "named.safetensors").string();
    save_safetensors(path, demo.tensors, metadata);
    const LoadedModel model = load_model(path, {}, torch::kCPU);
    std::string warnings;
    for (const std::string& warning : model.report.warnings) warnings += warning + "\n";
    EXPECT_NE(warnings.find("the file's class_names metadata " + said + ": not used"), std::string::npos) << warnings;
    EXPECT_EQ(output_name(model, 4), "class 4");
  }
  const LoadedModel bundled = load_model(asset_path("models/softmax.safetensors"), {}, torch::kCPU);
  for (const std::string& warning : bundled.report.warnings)
    EXPECT_EQ(warning.find("class_names"), std::string::npos) << warning;
}

// Sizes in messages: the free-space check said "0 MB of float32, and ... has 0 MB free" of 84 KB
// against 40 KB.
TEST(NumberText, BytesAreSaidInUnitsAPersonReads) {
  EXPECT_EQ(bytes_text(512), "512 bytes");
  EXPECT_EQ(bytes_text(4.0 * 145 * 145), "84.1 KB");
  EXPECT_EQ(bytes_text(40960), "41.0 KB");
  EXPECT_EQ(bytes_text(11059200000000.0), "11.1 TB");
}

// Training and evaluation refuse what they cannot do, instead of doing something else: resuming a
// finished run (it claimed a model file it never wrote), resuming as another recipe (it trained the
// softmax weights as linear attention), a learning rate below zero (LibTorch's text), a batch no
// machine holds (LibTorch's allocator text), a negative sample count (one image evaluated).
TEST_F(CliTest, TrainAndEvalRefuseWhatTheyCannotDo) {
  const std::string demo = asset_path("models/softmax.safetensors");
  const std::string out = " --eval-samples 0 --out " + (folder_ / "trained.safetensors").string();
  expect_clear_error("train --resume " + demo + " --steps 1" + out, "has already run 700 steps, --steps 1");
  expect_clear_error("train --resume " + demo + " --variant linear --steps 701" + out,
                     "was trained with --variant softmax, not linear");
  expect_clear_error("train --lr -1 --steps 1" + out, "--lr must be a learning rate above 0");
  expect_clear_error("train --batch 100000000 --steps 1" + out, "out of memory: a tensor of");
  EXPECT_FALSE(fs::exists(folder_ / "trained.safetensors"));
  EXPECT_FALSE(fs::exists(folder_ / "trained.md"));
  expect_clear_error("eval --samples -5 --models " + demo + " --out " + (folder_ / "eval").string(),
                     "--samples must be at least 1");
}

// bench refuses what it would ignore or blame on something else, before any timing: an unknown
// family (blamed on --python, or refused after the GEMM calibration), zero runs (taken as one), a
// mode's flag without its mode (an invalid value ignored).
TEST_F(CliTest, BenchRefusesOptionsItWouldIgnore) {
  expect_clear_error("bench --family foo --python none",
                     "--family foo: no such bench family (swin, pvt, agent_swin_tiny");
  expect_clear_error("bench --runs 0 --python none", "--runs must be at least 1, got 0");
  expect_clear_error("bench --rounds 0 --python none", "--rounds must be at least 1, got 0");
  expect_clear_error("bench --analyses foo --python none", "--analyses is read with --analysis only");
  expect_clear_error("bench --scale-model x --python none", "--scale-model is read with --scale only");
}

// Files that used to get misleading messages: an empty zip, an even DWC kernel.
TEST_F(CliTest, EmptyZipAndEvenDwcKernelAreNamed) {
  expect_clear_error("info --model " + write_bytes("empty.pth", std::string("PK\x05\x06", 4) + std::string(18, '\0')),
                     "an empty zip archive");
  Checkpoint checkpoint = load_checkpoint(kModel);
  const int64_t width = checkpoint.tensors.at("cls_token").size(2);
  checkpoint.tensors["blocks.0.attn.dwc.weight"] = torch::zeros({width / 2, 1, 4, 4});
  checkpoint.tensors["blocks.0.attn.scale"] = torch::zeros({1, 1, width});
  const std::string even = (folder_ / "even_dwc.safetensors").string();
  save_safetensors(even, checkpoint.tensors);
  expect_clear_error("info --model " + even, "needs [d, 1, k, k] with an odd k");
}

// JSON from outside: a duplicate key is an error, not a silent last-copy-wins, and nesting 70,000
// deep (a 140 KB file) is refused at parse time instead of overflowing the stack later.
TEST_F(CliTest, DuplicateKeysAndDeepNestingInJsonAreRefused) {
  const std::string out = " --out " + (folder_ / "o").string();
  expect_clear_error("run --session " + write_bytes("dup.json", R"({"p": 2, "p": 3})") + out, "has the key 'p' twice");
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  expect_clear_error("run --session " + write_bytes("deep.json", deep) + out, "nests deeper than 64 levels");
  auto safetensors = [](const std::string& header) {
    std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(padded.size()) >> (8 * i)) & 0xff);
    return bytes + padded + std::string(4, '\0');
  };
  const std::string tensor = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  expect_clear_error(
      "info --model " + write_bytes("dup.safetensors", safetensors("{\"a\":" + tensor + ",\"a\":" + tensor + "}")),
      "has the key 'a' twice");
  expect_clear_error(
      "info --model " + write_bytes("deep.safetensors", safetensors("{\"a\":{\"dtype\":\"F32\",\"shape\":" + deep +
                                                                    ",\"data_offsets\":[0,4]}}")),
      "nests deeper than 64 levels");
}

// A FIFO as a model, image or session would block a reader forever: each is refused at once.
TEST_F(CliTest, PipesAreRefusedInsteadOfBlocking) {
  const std::string fifo = (folder_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"info --model " + fifo, "not a regular file"},
      {"run --model " + kModel + " --arch heads=2 --image " + fifo + " --out " + (folder_ / "o").string(),
       "not a regular file"},
      {"run --session " + fifo + " --out " + (folder_ / "o").string(), "not a regular file"},
      {"run --session " + folder_.string() + " --out " + (folder_ / "o").string(), "is a folder"}};
  for (const auto& [arguments, phrase] : cases) {
    SCOPED_TRACE(arguments);
    // `timeout` ends a reader that blocks (exit 124), so a regression fails instead of hanging.
    const std::string err = (folder_ / "stderr.txt").string();
    const int status = std::system(
        ("timeout 60 " + std::string(ATTNSCOPE_CLI) + " " + arguments + " > /dev/null 2> '" + err + "'").c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find(phrase), std::string::npos) << text;
  }
}

}  // namespace test_cli
}  // namespace attnscope
