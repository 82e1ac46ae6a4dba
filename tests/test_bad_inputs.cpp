// Every kind of bad file of issue 16 through `attnscope run`, `attnscope info` and the workbench
// worker's own loading path (load_model, load_image_rgb, prepare_model_input, run_inference; a
// session through read_json_file and apply_json), each in a child process: exit code 1, a message
// naming the problem, a peak resident memory under a bound (the child's, from wait4), and nothing
// written in the output folder. The files come from tests/python/make_bad_inputs.py.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/cv_image.h"
#include "core/image.h"
#include "core/json_checked.h"
#include "models/inference.h"
#include "session/app_state.h"
#include "tests/cli_process.h"
#include "untrusted_files.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_bad_inputs {

namespace fs = std::filesystem;

const std::string kBadInputs = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/bad_inputs/";
const std::string kGoodModel = kBadInputs + "good.safetensors";
// LibTorch alone takes about 160 MB; no bad file may add gigabytes to that (ASan's shadow memory
// and quarantine roughly double what a process holds).
constexpr long kMaxPeakMegabytes = long(1024 * (testing::kSanitizerSlowdown > 1 ? 2 : 1));

enum class Kind { Model, Image, Session };
enum class Info { Fails, Warns, NotApplicable };  // what `attnscope info` does with the file

struct BadInput {
  const char* file;  // in kBadInputs, or made by the test (below)
  Kind kind;
  const char* phrase;  // the error must contain it
  Info info = Info::Fails;
};

const std::vector<BadInput> kTable = {
    // 1. deep nesting, echoed values
    {"deep_shape.safetensors", Kind::Model, "nests deeper than 64"},
    {"session_5mb_string.json", Kind::Session, "--p: the value is 5000001 bytes long"},
    // 2. architecture from shapes alone
    {"fc1_5e7x0.safetensors", Kind::Model, "MLP hidden size read from 'blocks.0.mlp.fc1.weight' is 50000000"},
    {"fc1_3e9x0.safetensors", Kind::Model, "tensor 'blocks.0.mlp.fc1.weight' has shape [3000000000,0]"},
    {"head_1e8x0.safetensors", Kind::Model, "class count read from 'head.weight' is 100000000"},
    {"pos_embed_huge.safetensors", Kind::Model, "position grid height read from 'pos_embed' is 40000"},
    {"patch_0.safetensors", Kind::Model, "patch size read from 'patch_embed.proj.weight' is 0"},
    {"width_0.safetensors", Kind::Model, "width read from 'patch_embed.proj.weight' is 0"},
    // ... in every family: refused by its bounds before anything is allocated, naming the file's key
    // (Microsoft's Swin names the head `head`, which attnscope reads as timm's `head.fc`).
    {"swin_hidden_5e7x0.safetensors", Kind::Model,
     "MLP hidden size read from 'layers.0.blocks.0.mlp.fc1.weight' is 50000000"},
    {"swin_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.fc.weight' is 100000000"},
    {"swin_microsoft_hidden_5e7x0.safetensors", Kind::Model,
     "MLP hidden size read from 'layers.0.blocks.0.mlp.fc1.weight' is 50000000"},
    {"swin_microsoft_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.weight' is 100000000"},
    {"pvt_v2_hidden_5e7x0.safetensors", Kind::Model,
     "MLP hidden size read from 'stages.0.blocks.0.mlp.fc1.weight' is 50000000"},
    {"pvt_v2_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.weight' is 100000000"},
    {"cswin_hidden_5e7x0.safetensors", Kind::Model, "MLP hidden size read from 'stage1.0.mlp.fc1.weight' is 50000000"},
    {"cswin_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.weight' is 100000000"},
    {"l2vit_hidden_5e7x0.safetensors", Kind::Model,
     "MLP hidden size read from 'stages.0.0.mlp.fc1.weight' is 50000000"},
    {"l2vit_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.weight' is 100000000"},
    {"care_hidden_5e7x0.safetensors", Kind::Model,
     "hidden size read from 'stages.0.blocks.0.inter_layer.inter1_fc1.weight' is 50000000"},
    {"care_head_1e8x0.safetensors", Kind::Model, "class count read from 'head.fc.weight' is 100000000"},
    // 3. pickle memory amplification
    {"pickle_inflates_to_2gb.pth", Kind::Model, "its data.pkl would take 2147483648 bytes"},
    {"pickle_52mb.pth", Kind::Model, "more than 1048576 values"},
    {"lists_10m_deep.pth", Kind::Model, "more than 1048576 values"},
    {"storage_4gb_in_6mb.pth", Kind::Model, "1000000000 Float elements need 4000000000"},
    // 4. not regular files
    {"fifo.safetensors", Kind::Model, "not a regular file"},
    {"fifo.png", Kind::Image, "not a regular file"},
    // 6. huge images in tiny files
    {"bomb_20000x20000.png", Kind::Image, "a PNG of 20000x20000 pixels, more than --max-pixels 89478485"},
    {"strip_100000x1.png", Kind::Image, "the aspect ratio is too extreme"},
    {"strip_1000000x1.png", Kind::Image, "the aspect ratio is too extreme"},
    {"text.png", Kind::Image, "not a supported image format"},
    // 8. NaN weights: `info` loads the file and warns
    {"nan_weights.safetensors", Kind::Model, "blocks.1.mlp.fc1.weight", Info::Warns},
    // 13. messages that mislead
    {"protocol0.pth", Kind::Model, "a protocol-0 storage reference"},
    {"empty_zip.pth", Kind::Model, "an empty zip archive"},
    {"missing_head_weight.safetensors", Kind::Model, "missing tensor 'head.weight'"},
    {"missing_block_norm.safetensors", Kind::Model, "missing tensor 'blocks.2.norm1.weight'"},
    {"num_heads_huge.safetensors", Kind::Model, "num_heads '99999999999'"},
    {"even_dwc_kernel.safetensors", Kind::Model, "with an odd k"},
    {"session_folder.json", Kind::Session, "is a folder, not a JSON file"},
    {"session_duplicate_key.json", Kind::Session, "has the key 'p' twice"},
    // issue 60: panel lists in their object form skipped the option cap
    {"session_3000_variants.json", Kind::Session, "session key 'variants': its panels are"},
    {"session_panel_ablate_million.json", Kind::Session, "session key 'compare': its panels are"},
    {"text_model.safetensors", Kind::Model, "not a safetensors file"},
    // 14. damaged zips
    {"no_version.pth", Kind::Model, "it has no version record"},
    {"bad_version.pth", Kind::Model, "its format version 'abc"},
    {"truncated_zip.pth", Kind::Model, "not a usable zip archive"},
};

struct Outcome {
  int exit_code = -1;
  long peak_megabytes = 0;
  std::string message;
};

// Runs `body` in a child (its stderr to a file, its stdout discarded) and reports its exit code
// and peak memory.
template <typename Body>
Outcome in_child(const std::string& stderr_path, Body body) {
  std::cout.flush();  // nothing buffered may be written twice
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::_exit(body());
  }
  int status = 0;
  rusage usage{};
  ::wait4(child, &status, 0, &usage);
  Outcome outcome;
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.peak_megabytes = usage.ru_maxrss / 1024;
  outcome.message = testing::read_file_bytes(stderr_path);
  return outcome;
}

Outcome run_cli(const std::string& stderr_path, std::vector<std::string> args) {
  const testing::CliOutcome run = testing::run_cli_process({std::move(args), "/dev/null", stderr_path});
  Outcome outcome;
  outcome.exit_code = run.shell_code();
  outcome.peak_megabytes = run.peak_kilobytes / 1024;
  outcome.message = testing::read_file_bytes(stderr_path);
  return outcome;
}

class BadInputs : public ::testing::TestWithParam<BadInput> {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("attnscope-bad-" + std::to_string(::getpid()));
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    good_image_ = (folder_ / "good.png").string();
    cv::imwrite(good_image_, cv::Mat(40, 48, CV_8UC3, cv::Scalar(30, 140, 220)));
  }
  void TearDown() override { fs::remove_all(folder_); }

  // The bad file: from the Python generator, or one only a running test can make.
  std::string input(const BadInput& row) {
    const std::string name = row.file;
    const std::string path = (folder_ / name).string();
    if (name.rfind("fifo", 0) == 0) {
      ::mkfifo(path.c_str(), 0600);
    } else if (name == "session_5mb_string.json") {
      std::ofstream(path) << nlohmann::json{{"p", std::string(5'000'000, '7') + "x"}}.dump();
    } else if (name == "session_folder.json") {
      fs::create_directories(path);
    } else if (name == "session_duplicate_key.json") {
      std::ofstream(path) << "{\"p\": \"2\", \"p\": \"3\"}";
    } else if (name == "session_3000_variants.json") {
      nlohmann::json rows = nlohmann::json::array();
      for (int i = 0; i < 3000; ++i) rows.push_back({{"variant", "focused"}, {"p", 1 + i % 9}});
      std::ofstream(path) << nlohmann::json{{"variants", rows}}.dump();
    } else if (name == "session_panel_ablate_million.json") {
      std::string heads;
      for (int i = 0; i < 1'000'000; ++i) heads += (i ? "," : "") + std::to_string(i % 4) + "." + std::to_string(i % 3);
      std::ofstream(path) << nlohmann::json{{"compare", {{{"variant", "softmax"}, {"ablate", heads}}}}}.dump();
    } else {
      return kBadInputs + name;
    }
    return path;
  }

  void expect_refused(const std::string& where, const Outcome& outcome, const BadInput& row) {
    SCOPED_TRACE(where);
    EXPECT_EQ(outcome.exit_code, 1) << outcome.message.substr(0, 2000);
    EXPECT_NE(outcome.message.find(row.phrase), std::string::npos) << outcome.message.substr(0, 2000);
    EXPECT_LT(outcome.message.size(), 2000u) << "a message that echoes too much";
    EXPECT_LT(outcome.peak_megabytes, kMaxPeakMegabytes);
    std::cout << "  " << row.file << " " << where << ": exit " << outcome.exit_code << ", peak "
              << outcome.peak_megabytes << " MB\n";
  }

  fs::path folder_;
  std::string good_image_;
};

TEST_P(BadInputs, AreRefusedWithAClearMessageBoundedMemoryAndNothingWritten) {
  const BadInput& row = GetParam();
  const std::string path = input(row);
  const std::string out = (folder_ / "out").string(), err = (folder_ / "stderr.txt").string();

  std::vector<std::string> run = {"run", "--out", out, "--device", "cpu"};
  if (row.kind == Kind::Model) run.insert(run.end(), {"--model", path, "--image", good_image_});
  if (row.kind == Kind::Image) run.insert(run.end(), {"--model", kGoodModel, "--image", path});
  if (row.kind == Kind::Session) run.insert(run.end(), {"--session", path, "--model", kGoodModel});
  expect_refused("run", run_cli(err, run), row);
  EXPECT_FALSE(fs::exists(out)) << "run wrote " << out;

  if (row.kind != Kind::Image && row.info != Info::NotApplicable) {
    const Outcome info = row.kind == Kind::Model ? run_cli(err, {"info", "--model", path})
                                                 : run_cli(err, {"info", "--session", path, "--model", kGoodModel});
    if (row.info == Info::Warns) {
      EXPECT_EQ(info.exit_code, 0) << info.message;
      EXPECT_NE(info.message.find(std::string("warning: the checkpoint's 1 tensor holds NaN or Inf: ") + row.phrase),
                std::string::npos)
          << info.message;
    } else {
      expect_refused("info", info, row);
    }
  }

  // The workbench worker's steps (viewer/inference_worker.cpp), and its session loading.
  const Outcome loader = in_child(err, [&] {
    torch::set_num_threads(1);  // no OpenMP team is carried over a fork
    try {
      if (row.kind == Kind::Session) {
        AppState state;
        apply_json(state, read_json_file(path, "session file " + path));
        return 0;
      }
      AppState state;
      LoadedModel model = load_model(row.kind == Kind::Model ? path : kGoodModel, {}, torch::kCPU);
      const RgbImage rgb = load_image_rgb(row.kind == Kind::Image ? path : good_image_, state.max_pixels);
      run_inference(model, prepare_model_input(rgb, state.input_settings(), model), state.attention);
      return 0;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  });
  expect_refused("workbench loader", loader, row);
}

std::string row_name(const ::testing::TestParamInfo<BadInput>& info) {
  std::string name = info.param.file;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Issue16, BadInputs, ::testing::ValuesIn(kTable), row_name);

// The files the zero-byte rows damage load and run undamaged: each row's refusal is its one tensor.
TEST(BadInputFamilies, UndamagedFilesLoadAndRun) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"swin", "swin"},     {"swin_microsoft", "swin (microsoft)"},
      {"pvt_v2", "pvt-v2"}, {"cswin", "flatten-cswin"},
      {"l2vit", "l2vit"},   {"care", "care"}};
  for (const auto& [file, family] : files) {
    SCOPED_TRACE(file);
    LoadedModel model = load_model(kBadInputs + file + ".safetensors", {}, torch::kCPU);
    EXPECT_EQ(model.family(), family);
    AppState state;
    const cv::Mat rgb(40, 48, CV_8UC3, cv::Scalar(30, 140, 220));
    const auto result =
        run_inference(model, prepare_model_input(to_rgb_image(rgb), state.input_settings(), model), state.attention);
    EXPECT_EQ(result.forward.logits.size(1), 5);
  }
}

}  // namespace test_bad_inputs
}  // namespace attnscope
