// The statistics over a folder (issue 26) against independent Python references
// (tests/python/make_folder_stats_cases.py: a softmax ViT with class and distillation tokens, a FLatten
// ViT, a DINOv2 with registers and a Swin, each statistic written from its anchor's code), through
// `attnscope analyze` and `eval` as researchers run them; and their math on exact inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "analysis/dino_masks.h"
#include "analysis/effective_receptive_field.h"
#include "analysis/linear_cka.h"
#include "core/npy.h"
#include "tests/case_folder.h"
#include "tests/test_folder.h"
#include "views/folder_statistics.h"

namespace attnscope {
namespace test_folder_stats {

namespace fs = std::filesystem;

// The issue's tolerances.
constexpr double kStatisticTolerance = 1e-4;  // relative
constexpr double kJaccardTolerance = 1e-4, kCkaTolerance = 1e-4;
constexpr double kErfCorrelation = 0.999, kErfSumTolerance = 0.01, kErfRatioTolerance = 0.01;

const CaseFolder& cases() {
  static const CaseFolder folder("folder_stats_cases");
  return folder;
}

const nlohmann::json& case_named(const std::string& name) {
  for (const auto& entry : cases().cases()["cases"])
    if (entry["name"] == name) return entry;
  throw std::runtime_error("no case " + name);
}

// `attnscope COMMAND` on a case's model and folder as the reference ran them; returns the output folder.
fs::path run_case(const TestFolder& folder, const nlohmann::json& entry, const std::string& command) {
  const CaseFolder& data = cases();
  const nlohmann::json& model = data.cases()["models"][entry["model"].get<std::string>()];
  const fs::path out = folder.path() / "out";
  std::string arguments = command + " --model '" + data.dir() + model["file"].get<std::string>() +
                          "' --resize none --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --device cpu --out '" +
                          out.string() + "'";
  if (entry.contains("image"))
    arguments += " --image '" + data.dir() + entry["image"].get<std::string>() + "'";
  else
    arguments += " --images '" + data.dir() + model["folder"].get<std::string>() + "'";
  if (!model["heads"].is_null()) arguments += " --arch heads=" + std::to_string(model["heads"].get<int>());
  if (entry.contains("compare"))
    arguments += " --compare-model '" + data.dir() +
                 data.cases()["models"][entry["compare"].get<std::string>()]["file"].get<std::string>() + "'";
  if (entry.contains("masks_folder"))
    arguments += " --masks '" + data.dir() + entry["masks_folder"].get<std::string>() + "'";
  for (const auto& argument : entry["args"]) arguments += " '" + argument.get<std::string>() + "'";
  const CommandRun run = run_attnscope(arguments, folder.path());
  EXPECT_EQ(run.exit_code, 0) << arguments << "\n" << run.err;
  return out;
}

// head_stats.csv's rows: layer, head, mean_distance, entropy.
std::vector<std::vector<double>> read_head_stats(const fs::path& path) {
  std::string header;
  std::vector<std::vector<double>> rows = read_numeric_csv(path, &header);
  EXPECT_EQ(header.rfind("layer,head,mean_distance,entropy", 0), 0u) << header;
  return rows;
}

double relative_error(double got, double expected) {
  return std::abs(got - expected) / std::max(std::abs(expected), 1e-12);
}

// Each analysis's cases in one test: a process and a model load fewer per case keep the suite fast.
const std::vector<std::string> kModels = {"fs_vit", "fs_flatten", "fs_dinov2_reg", "fs_swin"};

void check_head_stats(const std::string& model) {
  SCOPED_TRACE(model);
  TestFolder folder("folder-stats");
  const nlohmann::json& entry = case_named(model + "_headstats");
  const fs::path out = run_case(folder, entry, "analyze --analysis headstats");
  const auto rows = read_head_stats(out / "head_stats.csv");
  const auto& expected = entry["stats"];
  ASSERT_EQ(rows.size(), expected.size());
  double worst_distance = 0, worst_entropy = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 4u);
    EXPECT_EQ(rows[i][0], expected[i][0].get<double>());
    EXPECT_EQ(rows[i][1], expected[i][1].get<double>());
    worst_distance = std::max(worst_distance, relative_error(rows[i][2], expected[i][2].get<double>()));
    worst_entropy = std::max(worst_entropy, relative_error(rows[i][3], expected[i][3].get<double>()));
  }
  EXPECT_LE(worst_distance, kStatisticTolerance);
  EXPECT_LE(worst_entropy, kStatisticTolerance);
  std::cout << model << ": mean distance max rel. error " << worst_distance << ", entropy " << worst_entropy << "\n";

  // The comparison tells the contract from two plausible misreadings of it on the last layer (by several
  // times the tolerance): prefix queries kept (only prefix keys dropped), and the patch rows renormalised.
  if (!entry.contains("wrong_last_layer")) return;
  const size_t heads = entry["wrong_last_layer"]["prefix_rows_kept"].size();
  for (const char* reading : {"prefix_rows_kept", "rows_renormalised"}) {
    double farthest = 0;
    for (size_t h = 0; h < heads; ++h) {
      const double got = rows[rows.size() - heads + h][2];
      const double error = relative_error(got, entry["wrong_last_layer"][reading][h].get<double>());
      farthest = std::max(farthest, error);
    }
    EXPECT_GT(farthest, 5 * kStatisticTolerance) << reading << " would pass the comparison";
  }
}

TEST(FolderStats, HeadStatsMatchProbingVitsOverTheFolder) {
  for (const std::string& model : kModels) check_head_stats(model);
}

void check_dino_masks(const std::string& model) {
  SCOPED_TRACE(model);
  TestFolder folder("folder-stats");
  const nlohmann::json& entry = case_named(model + "_dino_masks");
  const fs::path out = run_case(folder, entry, "analyze --analysis dino-masks");
  const torch::Tensor got = read_npy((out / "dino_masks.npy").string());
  const torch::Tensor expected = cases().array(entry["expected"], "masks");
  EXPECT_EQ(got.scalar_type(), torch::kUInt8);
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(got, expected))
      << "masks differ in " << got.ne(expected).sum().item<int64_t>() << " patches";
  // Neither empty nor full, so the comparison sees the cut.
  EXPECT_GT(expected.sum().item<int64_t>(), 0);
  EXPECT_LT(expected.sum().item<int64_t>(), expected.numel());
}

TEST(FolderStats, DinoMasksEqualVisualizeAttentionsThresholdedMasks) {
  for (const char* model : {"fs_vit", "fs_flatten", "fs_dinov2_reg"}) check_dino_masks(model);
}

void check_dino_jaccard(const std::string& model) {
  SCOPED_TRACE(model);
  TestFolder folder("folder-stats");
  const nlohmann::json& entry = case_named(model + "_dino_eval");
  const fs::path out = run_case(folder, entry, "eval --methods dino-masks");
  const nlohmann::json report = read_json_file(out / "eval.json");
  EXPECT_EQ(report.at("schema_kind"), "eval-dino-masks");
  const auto& expected = entry["jaccard_per_head"];
  ASSERT_EQ(report.at("jaccard_per_head").size(), expected.size());
  double worst = std::abs(report.at("jaccard").get<double>() - entry["jaccard"].get<double>());
  for (size_t h = 0; h < expected.size(); ++h)
    worst = std::max(worst, std::abs(report["jaccard_per_head"][h].get<double>() - expected[h].get<double>()));
  EXPECT_LE(worst, kJaccardTolerance);
  std::cout << model << ": Jaccard max error " << worst << "\n";
}

TEST(FolderStats, DinoJaccardEqualsDinoIssue54sFigure) {
  for (const char* model : {"fs_vit", "fs_dinov2_reg"}) check_dino_jaccard(model);
}

TEST(FolderStats, DinoMasksOfASwinSayItHasNoClassToken) {
  TestFolder folder("folder-stats");
  const CaseFolder& data = cases();
  const std::string arguments =
      "analyze --analysis dino-masks --model '" + data.dir() + "fs_swin.safetensors' --image '" + data.dir() +
      "fs_swin_images/img_0.png' --resize none --device cpu --out '" + folder.file("out") + "'";
  const CommandRun run = run_attnscope(arguments, folder.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_NE(run.err.find("class token"), std::string::npos) << run.err;
}

void check_erf(const std::string& model) {
  SCOPED_TRACE(model);
  TestFolder folder("folder-stats");
  const nlohmann::json& entry = case_named(model + "_erf");
  const fs::path out = run_case(folder, entry, "analyze --analysis erf");
  const torch::Tensor got = read_npy((out / "erf.npy").string()).to(torch::kDouble);
  const torch::Tensor expected = cases().array(entry["expected"], "erf").to(torch::kDouble);
  ASSERT_EQ(got.sizes(), expected.sizes());
  const torch::Tensor a = got.flatten() - got.mean(), b = expected.flatten() - expected.mean();
  const double correlation = (a.dot(b) / (a.norm() * b.norm())).item<double>();
  const double sum_error = std::abs(got.sum().item<double>() / expected.sum().item<double>() - 1.0);
  EXPECT_GE(correlation, kErfCorrelation);
  EXPECT_LE(sum_error, kErfSumTolerance);

  std::ifstream csv(out / "erf_ratios.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "threshold,area_ratio");
  double worst_ratio = 0;
  for (const auto& ratio : entry["ratios"]) {
    ASSERT_TRUE(std::getline(csv, line));
    const std::string value = line.substr(line.find(',') + 1);
    if (ratio.is_null()) {
      EXPECT_EQ(value, "nan") << line;
      continue;
    }
    const double error = std::abs(std::stod(value) - ratio.get<double>());
    worst_ratio = std::max(worst_ratio, error);
    EXPECT_LE(error, kErfRatioTolerance) << line;
  }
  std::cout << model << ": ERF correlation " << correlation << ", sum error " << sum_error << ", ratio max error "
            << worst_ratio << "\n";
}

TEST(FolderStats, ErfMatchesRepLKNetsInputGradient) {
  for (const std::string& model : kModels) check_erf(model);
}

void check_cka(const std::string& pair) {
  SCOPED_TRACE(pair);
  TestFolder folder("folder-stats");
  const nlohmann::json& entry = case_named(pair + "_cka");
  const fs::path out = run_case(folder, entry, "analyze --analysis cka");
  const torch::Tensor got = read_npy((out / "cka.npy").string()).to(torch::kDouble);
  const torch::Tensor expected = cases().array(entry["expected"], "cka").to(torch::kDouble);
  ASSERT_EQ(got.sizes(), expected.sizes());
  const double worst = (got - expected).abs().max().item<double>();
  EXPECT_LE(worst, kCkaTolerance);
  if (entry["model"] == entry["compare"]) {
    EXPECT_LE((torch::diagonal(got) - 1.0).abs().max().item<double>(), kCkaTolerance);
  }
  std::cout << pair << ": CKA max error " << worst << "\n";
}

TEST(FolderStats, CkaMatchesTheRepresentationSimilarityDemo) {
  for (const char* pair :
       {"fs_vit_fs_flatten", "fs_dinov2_reg_fs_dinov2_reg", "fs_swin_fs_swin", "fs_vit_fs_flatten_minibatch"})
    check_cka(pair);
}

// The math on exact inputs: get_rectangle's squares, the demo's CKA on known matrices, the masks' cut.
// A folder job's result names the settings it ran with (the workbench's sliders move on while it
// runs): the variant and every knob away from its default; the defaults add nothing.
TEST(FolderStatsMath, ModelLabelsNameTheSettingsTheyRanWith) {
  AttentionSettings settings;
  EXPECT_EQ(model_label("models/softmax.safetensors", settings), "softmax");
  EXPECT_EQ(model_label("hub/vit_small/model.safetensors", settings), "vit_small");
  settings.variant = Variant::Focused;
  settings.p = 4;
  EXPECT_EQ(model_label("models/softmax.safetensors", settings), "softmax (focused p=4)");
  settings.variant = Variant::Native;
  settings.p = 3;
  settings.window = 7;
  EXPECT_EQ(model_label("models/softmax.safetensors", settings), "softmax (native window=7)");
}

TEST(FolderStatsMath, ErfAreaRatiosFollowGetRectangle) {
  // A map whose log10(x + 1) is 1 on the centre pixel and 0 elsewhere: the first square (side 3)
  // holds everything.
  torch::Tensor map = torch::zeros({21, 21}, torch::kDouble);
  map[10][10] = 9.0;
  for (const ErfArea& area : erf_area_ratios(map)) {
    EXPECT_EQ(area.side, 3);
    EXPECT_NEAR(area.ratio, 9.0 / 441.0, 1e-12);
  }
  // A uniform map: the share of side 2i + 1 is (2i + 1)^2 / 441; the largest square tried (i = 9,
  // side 19) holds 361 / 441 < 0.99, so 0.99 is not reached.
  const std::vector<ErfArea> uniform = erf_area_ratios(torch::ones({21, 21}, torch::kDouble));
  EXPECT_EQ(uniform[0].side, 11);  // 121 / 441 = 0.274 > 0.2
  EXPECT_EQ(uniform[2].side, 15);  // 225 / 441 = 0.510 > 0.5
  EXPECT_EQ(uniform[3].side, 0);
  EXPECT_TRUE(std::isnan(uniform[3].ratio));
}

TEST(FolderStatsMath, LinearCkaIsInvariantToRotationAndScale) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({10, 6}, torch::kDouble);
  const auto [q, r] = torch::linalg_qr(torch::randn({6, 6}, torch::kDouble));
  EXPECT_NEAR(linear_cka(gram_linear(x), gram_linear(torch::matmul(x, q) * 3.0)), 1.0, 1e-12);
  const torch::Tensor y = torch::randn({10, 4}, torch::kDouble);
  const double value = linear_cka(gram_linear(x), gram_linear(y));
  EXPECT_GT(value, 0.0);
  EXPECT_LT(value, 1.0);
}

}  // namespace test_folder_stats
}  // namespace attnscope
