// The hostile inputs of issue 36, each through the command a careless user or a hostile tester
// runs, in a child process with a bound on its address space: exit code, a message naming what is
// wrong, a peak resident memory under a bound (the child's, from wait4) and nothing written where
// the command was refused. The bounded readers are also checked directly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "analysis/token_norms.h"
#include "core/npy.h"
#include "core/yaml_checked.h"
#include "tests/cli_process.h"
#include "untrusted_files.h"

namespace attnscope {
namespace test_hostile_inputs {

namespace fs = std::filesystem;

const std::string kModels = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/";
// LibTorch alone takes about 160 MB; a small hostile input may not add gigabytes to it.
constexpr long kMaxPeakMegabytes = long(1024 * (testing::kSanitizerSlowdown > 1 ? 2 : 1));
// The child's address space: room for LibTorch's libraries and thread stacks, not for an expansion.
constexpr rlim_t kAddressSpaceBytes = rlim_t(6) << 30;

struct Outcome {
  int exit_code = -1;
  long peak_megabytes = 0;
  std::string output;  // stdout and stderr together
};

// Runs the CLI with `args` in a child under kAddressSpaceBytes and reports its exit code, peak memory
// and output.
Outcome run_cli(const fs::path& folder, std::vector<std::string> args) {
  const std::string output_path = (folder / "output.txt").string();
  testing::CliRequest request{std::move(args), output_path, output_path};
  request.address_space_bytes = kAddressSpaceBytes;
  const testing::CliOutcome run = testing::run_cli_process(request);
  Outcome outcome;
  outcome.exit_code = run.shell_code();
  outcome.peak_megabytes = run.peak_kilobytes / 1024;
  outcome.output = testing::read_file_bytes(output_path);
  return outcome;
}

class HostileInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("attnscope-hostile-" + std::to_string(::getpid()));
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    image_ = (folder_ / "image.png").string();
    cv::imwrite(image_, cv::Mat(40, 48, CV_8UC3, cv::Scalar(30, 140, 220)));
  }
  void TearDown() override { fs::remove_all(folder_); }

  // The outcome has `code`, says `phrase`, stays under the memory bound and is short.
  static void expect(const Outcome& outcome, int code, const std::string& phrase) {
    EXPECT_EQ(outcome.exit_code, code) << outcome.output.substr(0, 3000);
    EXPECT_NE(outcome.output.find(phrase), std::string::npos) << outcome.output.substr(0, 3000);
    EXPECT_LT(outcome.peak_megabytes, kMaxPeakMegabytes);
    std::cout << "  exit " << outcome.exit_code << ", peak " << outcome.peak_megabytes << " MB\n";
  }

  // A copy of a bundled demo model in a folder of its own, with `beside` files next to it.
  std::string model_in_folder(const std::string& model, const std::string& folder,
                              const std::map<std::string, std::string>& beside = {}) {
    const fs::path dir = folder_ / folder;
    fs::create_directories(dir);
    fs::copy_file(kModels + model + ".safetensors", dir / "model.safetensors");
    for (const auto& [name, text] : beside) testing::write_file_bytes((dir / name).string(), text);
    return (dir / "model.safetensors").string();
  }

  fs::path folder_;
  std::string image_;
};

// ---- Row 1: a "billion laughs" yaml (10 levels of 10 aliases, 10^10 values from a few hundred bytes).

std::string billion_laughs() {
  std::string text = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char name = 'b'; name <= 'j'; ++name) {
    const char previous = char(name - 1);
    text += std::string(1, name) + ": &" + name + " [";
    for (int i = 0; i < 10; ++i) text += std::string(i ? "," : "") + "*" + previous;
    text += "]\n";
  }
  return text + "MODEL:\n  TYPE: *j\n";
}

TEST(BoundedYaml, RefusesAnExpansionBeforeBuildingIt) {
  const std::string text = billion_laughs();
  ASSERT_LT(text.size(), 700u);
  const int64_t before = testing::resident_bytes();
  try {
    parse_yaml_checked(text, "laughs.yaml");
    FAIL() << "an expansion to 10^10 values was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("laughs.yaml expands to more than 100000 values"), std::string::npos)
        << e.what();
  }
  // The bound is paid before anything is copied: a few MB at most.
  EXPECT_LT(testing::resident_bytes() - before, int64_t(32) << 20);
}

TEST(BoundedYaml, ReadsATrainingConfigAsYamlCppDid) {
  const nlohmann::json parsed = parse_yaml_checked(
      "MODEL:\n  TYPE: flatten_swin\n  LA: {FOCUSING_FACTOR: 3, KERNEL_SIZE: 5}\n  SWIN:\n"
      "    DEPTHS: [ 2, 2, 6, 2 ]\n    NAME: '224'\n    RATE: 1e-3\n    ON: true\n    OFF: False\n    NONE: ~\n"
      "DATA:\n  IMG_SIZE: &size 224\n  TEST_SIZE: *size\n",
      "config.yaml");
  EXPECT_EQ(parsed["MODEL"]["TYPE"], "flatten_swin");
  EXPECT_EQ(parsed["MODEL"]["LA"]["FOCUSING_FACTOR"], 3);
  EXPECT_EQ(parsed["MODEL"]["SWIN"]["DEPTHS"], nlohmann::json({2, 2, 6, 2}));
  EXPECT_EQ(parsed["MODEL"]["SWIN"]["NAME"], "224");  // quoted: text
  EXPECT_DOUBLE_EQ(parsed["MODEL"]["SWIN"]["RATE"].get<double>(), 1e-3);
  EXPECT_EQ(parsed["MODEL"]["SWIN"]["ON"], true);
  EXPECT_EQ(parsed["MODEL"]["SWIN"]["OFF"], false);
  EXPECT_TRUE(parsed["MODEL"]["SWIN"]["NONE"].is_null());
  EXPECT_EQ(parsed["DATA"]["TEST_SIZE"], 224);
  EXPECT_TRUE(parse_yaml_checked("", "empty.yaml").is_null());
}

TEST(BoundedYaml, RefusesWhatJsonIsRefused) {
  auto message = [](const std::string& text) {
    try {
      parse_yaml_checked(text, "c.yaml");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("a: 1\na: 2\n"), "c.yaml has the key 'a' twice in one map");
  EXPECT_EQ(message("? [1, 2]\n: 3\n"), "c.yaml has a map key that is not plain text");
  EXPECT_EQ(message(std::string(100, '[') + std::string(100, ']')), "c.yaml nests deeper than 64 levels");
  // The parser's words and place, not its "yaml-cpp: error at" prefix.
  EXPECT_EQ(message("a: [1, 2\n"),
            "c.yaml is not valid YAML: end of sequence flow not found at line 2, column 1 (where the parser looked "
            "for it)");
  // A long text repeated by aliases counts its bytes: 100 aliases of 100 KB.
  std::string text = "a: &a " + std::string(100'000, 'x') + "\nb: [";
  for (int i = 0; i < 100; ++i) text += std::string(i ? "," : "") + "*a";
  EXPECT_NE(message(text + "]\n").find("or 8 MB of text"), std::string::npos);
}

// Beside the weights (FLatten's yaml, a DeiT's folder) it is said and not read; as --config it is refused.
TEST_F(HostileInputs, BillionLaughsYamlIsBounded) {
  for (const char* model : {"flatten", "softmax"}) {
    SCOPED_TRACE(model);
    const std::string weights = model_in_folder(model, model, {{"model.yaml", billion_laughs()}});
    expect(run_cli(folder_, {"info", "--model", weights}), 0, "expands to more than 100000 values");
  }
  testing::write_file_bytes((folder_ / "laughs.yaml").string(), billion_laughs());
  const std::string out = (folder_ / "out").string();
  expect(run_cli(folder_, {"run", "--model", kModels + "flatten.safetensors", "--image", image_, "--config",
                           (folder_ / "laughs.yaml").string(), "--out", out}),
         1, "expands to more than 100000 values");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(HostileInputs, ConfigThatIsADeviceIsNamed) {
  expect(run_cli(folder_, {"info", "--model", kModels + "softmax.safetensors", "--config", "/dev/zero"}), 1,
         "--config /dev/zero is not a regular file");
}

// ---- Row 5: the output folder is checked before any work, and "wrote" only follows a write.

TEST_F(HostileInputs, OutputThatIsAFileIsRefusedBeforeTheWork) {
  const std::string file = (folder_ / "a_file").string();
  testing::write_file_bytes(file, "x");
  const std::vector<std::vector<std::string>> commands = {
      {"run", "--model", kModels + "softmax.safetensors", "--image", image_, "--out", file},
      {"analyze", "--analysis", "spectrum", "--model", kModels + "softmax.safetensors", "--image", image_, "--out",
       file},
      {"export", "--model", kModels + "softmax.safetensors", "--image", image_, "--out", file},
      {"run", "--model", kModels + "softmax.safetensors", "--image", image_, "--out", file + "/below"},
  };
  for (const auto& command : commands) {
    SCOPED_TRACE(command.front() + " " + command.back());
    const Outcome outcome = run_cli(folder_, command);
    expect(outcome, 1, "is a file");
    EXPECT_EQ(outcome.output.find("wrote"), std::string::npos) << outcome.output;
    // Refused before the model ran: no prediction (" p=") nor analysis result is in its output.
    EXPECT_EQ(outcome.output.find(" p="), std::string::npos) << outcome.output;
    EXPECT_EQ(outcome.output.find("rank "), std::string::npos) << outcome.output;
  }
  EXPECT_EQ(testing::read_file_bytes(file), "x");
}

// ---- Rows 2, 3 and 4: the matrix is streamed into its NPY, a long forward is followed a block at a time.

TEST_F(HostileInputs, MatrixOfManyTokensIsStreamedAndTheForwardFollowed) {
  const std::string out = (folder_ / "out").string();
  // 1024 pixels at patch 8: 16,385 tokens, a 1.07 GB matrix that used to take 3.6 GB to write.
  const Outcome outcome = run_cli(folder_, {"run", "--model", kModels + "linear.safetensors", "--image", image_,
                                            "--size", "1024", "--matrix", "on", "--layer", "3", "--out", out});
  expect(outcome, 0, "attnscope run: forward over 16385 tokens");
  EXPECT_NE(outcome.output.find("[4/4] forward, block 4 of 4"), std::string::npos) << outcome.output;
  const fs::path matrix = fs::path(out) / "matrix_l3_h0.npy";
  const std::string header = npy_header({16385, 16385}, torch::kFloat);
  ASSERT_EQ(fs::file_size(matrix), header.size() + size_t(16385) * 16385 * 4);
  // Its row of the query (the class token) is the attention row run writes: the rows came in order.
  const torch::Tensor row = read_npy((fs::path(out) / "attention_l3_h0.npy").string()).to(torch::kFloat).flatten();
  std::ifstream in(matrix, std::ios::binary);
  std::vector<float> first(16385);
  in.seekg(std::streamoff(header.size()));
  in.read(reinterpret_cast<char*>(first.data()), std::streamsize(first.size() * sizeof(float)));
  ASSERT_EQ(row.numel(), 16385);
  // The same weights from a block of rows and from one: equal up to float32 sums over 16,385 keys
  // (at most 16,385 x 2^-24 relative).
  EXPECT_TRUE(
      torch::allclose(torch::from_blob(first.data(), {16385}, torch::kFloat), row, 16385 * std::ldexp(1.0, -24), 0.0));
  fs::remove_all(out);
}

// ---- Row 7: a registered name that contradicts the weights.

TEST_F(HostileInputs, RegisteredNameContradictingTheWeightsIsRefused) {
  const std::string weights =
      model_in_folder("softmax", "named", {{"config.json", R"({"architecture": "vit_base_patch16_224"})"}});
  const Outcome outcome = run_cli(folder_, {"info", "--model", weights});
  expect(outcome, 1,
         "the config names architecture 'vit_base_patch16_224' (embed_dim 768, depth 12, patch_size 16), but the "
         "weights have embed_dim 96 (patch_embed.proj.weight), depth 4 (blocks.N), patch_size 8");
}

// ---- Row 10: a declared normalisation gets the checks --mean and --std get.

TEST_F(HostileInputs, DeclaredStdIsCheckedAsStdIs) {
  for (const char* std : {"[-1, -1, -1]", "[0, 0, 0]"}) {
    SCOPED_TRACE(std);
    const std::string weights = model_in_folder(
        "softmax", std[1] == '-' ? "negative" : "zero",
        {{"config.json", std::string(R"({"pretrained_cfg": {"mean": [0.5, 0.5, 0.5], "std": )") + std + "}}"}});
    const Outcome outcome = run_cli(folder_, {"info", "--model", weights});
    expect(outcome, 1, "pretrained_cfg (config.json) declares std");
    EXPECT_NE(outcome.output.find("every value must be positive"), std::string::npos) << outcome.output;
  }
}

// ---- Rows 8, 9 and 11: the statistics over a folder.

class FolderStatistics : public HostileInputs {
 protected:
  // `count` copies of one image (or `count` different ones), plus what the test adds.
  std::string images(const std::string& name, int count, bool different) {
    const fs::path dir = folder_ / name;
    fs::create_directories(dir);
    for (int i = 0; i < count; ++i)
      cv::imwrite(
          (dir / ("image" + std::to_string(i) + ".png")).string(),
          cv::Mat(64, 64, CV_8UC3, cv::Scalar(30 + (different ? 50 * i : 0), 140, 220 - (different ? 40 * i : 0))));
    return dir.string();
  }
};

TEST_F(FolderStatistics, CkaOfFeaturesThatDoNotVarySaysWhy) {
  const std::string same = images("same", 4, false), two = images("two", 2, true);
  const std::string model = kModels + "softmax.safetensors";
  expect(run_cli(folder_, {"analyze", "--analysis", "cka", "--model", model, "--compare-model", model, "--images", same,
                           "--out", (folder_ / "out").string()}),
         1, "CKA is undefined: block 0 of the first model (--model) gives the same features for all 4 images");
  expect(run_cli(folder_, {"analyze", "--analysis", "cka", "--model", model, "--compare-model", model, "--images", two,
                           "--out", (folder_ / "out").string()}),
         1, "CKA needs at least 3 images, got 2 (over 2 images every pair of blocks gives 1)");
  EXPECT_FALSE(fs::exists(folder_ / "out"));
}

TEST_F(FolderStatistics, HiddenFilesAreSkippedAndBadImagesReportedAndListed) {
  const std::string dir = images("mixed", 3, true);
  testing::write_file_bytes(dir + "/._image0.png", std::string("\0\5\x16\7", 4) + std::string(200, 'x'));
  testing::write_file_bytes(dir + "/broken.png", "not a png at all");
  for (const char* analysis : {"headstats", "erf"}) {
    SCOPED_TRACE(analysis);
    const fs::path out = folder_ / (std::string("out_") + analysis);
    const Outcome outcome = run_cli(folder_, {"analyze", "--analysis", analysis, "--model",
                                              kModels + "softmax.safetensors", "--images", dir, "--out", out.string()});
    expect(outcome, 0, "skipped broken.png");
    EXPECT_EQ(outcome.output.find("._image0.png"), std::string::npos) << outcome.output;
    const nlohmann::json summary = nlohmann::json::parse(testing::read_file_bytes((out / "summary.json").string()));
    EXPECT_EQ(summary["images_used"], nlohmann::json({"image0.png", "image1.png", "image2.png"}));
    ASSERT_EQ(summary["images_skipped"].size(), 1u);
    EXPECT_EQ(summary["images_skipped"][0]["file"], "broken.png");
  }
}

TEST_F(FolderStatistics, BrokenCompareModelFailsBeforeTheFirstPass) {
  const std::string dir = images("folder", 3, true);
  testing::write_file_bytes((folder_ / "broken.safetensors").string(), "not a model");
  for (const char* analysis : {"headstats", "erf"}) {
    SCOPED_TRACE(analysis);
    const Outcome outcome = run_cli(
        folder_, {"analyze", "--analysis", analysis, "--model", kModels + "softmax.safetensors", "--compare-model",
                  (folder_ / "broken.safetensors").string(), "--images", dir, "--out", (folder_ / "out").string()});
    expect(outcome, 1, "broken.safetensors");
    EXPECT_EQ(outcome.output.find("[1/3]"), std::string::npos) << "a pass ran first: " << outcome.output;
  }
}

// ---- Row 12: a full SVD is followed in logs too.

TEST_F(HostileInputs, FullSvdPrintsLinesWhenNotATerminal) {
  // 192 pixels at patch 8: 577 tokens, past the 400 a full SVD is cheap for.
  const Outcome outcome =
      run_cli(folder_, {"analyze", "--analysis", "spectrum", "--model", kModels + "softmax.safetensors", "--image",
                        image_, "--size", "192", "--out", (folder_ / "out").string()});
  expect(outcome, 0, "] full SVD of native");
  EXPECT_NE(outcome.output.find("(577 tokens)"), std::string::npos) << outcome.output;
}

// ---- Row 6: the norms' threshold reports no outliers when there are none.

TEST(HighNormThreshold, ReportsNoneWithoutHighNormTokensAndFindsThemAtTenTimesTheMedian) {
  // 144 patch norms spread over [5, 7.5] (the demo's range): Otsu splits them in two anyway.
  const torch::Tensor spread = torch::linspace(5.0, 7.5, 144, torch::kFloat);
  const HighNormThreshold plain = high_norm_threshold(spread);
  EXPECT_LT(plain.otsu, 7.5);                          // Otsu alone would report outliers
  EXPECT_FALSE(plain.by_otsu());                       // the floor wins
  EXPECT_GT(plain.norm, spread.max().item<double>());  // and none is above it
  EXPECT_NEAR(plain.median_floor, std::sqrt(10.0) * spread.median().item<double>(), 1e-9);
  // Three tokens at ten times the median (Darcet et al.'s artefacts): exactly those are above.
  torch::Tensor with_artefacts = spread.clone();
  with_artefacts.index_put_({torch::tensor({3, 70, 141})}, 10 * spread.median().item<float>());
  const HighNormThreshold found = high_norm_threshold(with_artefacts);
  EXPECT_EQ((with_artefacts > found.norm).sum().item<int64_t>(), 3);
}

// ---- The smaller ones: options that were taken silently or named wrongly.

TEST_F(HostileInputs, OptionsGivenTwiceOrMixedAreRefused) {
  expect(run_cli(folder_, {"info", "--model", kModels + "softmax.safetensors", "--arch", "heads=3,heads=4"}), 1,
         "--arch gives heads twice: give it once");
  expect(run_cli(folder_, {"eval", "--model", kModels + "softmax.safetensors", "--images", folder_.string(), "--masks",
                           folder_.string(), "--methods", "dino-masks,gradcam"}),
         1, "dino-masks runs alone");
}

}  // namespace test_hostile_inputs
}  // namespace attnscope
