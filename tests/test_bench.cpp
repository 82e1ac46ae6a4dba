// `attnscope bench` on the shapes researchers run: a ViT-B/16 at 384 px goes through both sides at
// its own input size, and every row carries its token count and its ratio to the GEMM limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "app/bench_tools.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

// A reference that fails says how, on one line (it lands in a table cell): the exit status when it
// printed nothing (an empty reason before), the shell's words without their line break.
TEST(BenchTools, AFailedReferenceSaysHowOnOneLine) {
  std::string error;
  EXPECT_TRUE(run_python_json("exit 3", error).is_null());
  EXPECT_EQ(error,
            "PyTorch reference failed: it exited with status 3 and printed nothing (does --python name a "
            "Python with torch?)");
  error.clear();
  run_python_json("printf 'first line\\nsecond line\\n'; exit 1", error);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_NE(error.find("first line second line"), std::string::npos) << error;
}

TEST(Bench, ViTBaseAt384RunsBothSidesAtItsSizeAgainstTheGemmLimit) {
  TestFolder folder("bench");
  const CommandRun run =
      run_attnscope("bench --sizes vit-b16-384 --variants softmax --runs 1 --warmup 0 --rounds 1", folder.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("BLAS"), std::string::npos) << run.out;  // the machine line
  EXPECT_NE(run.out.find("GEMM limit"), std::string::npos) << run.out;
  const auto row = run.out.find("vit-b16-384");
  ASSERT_NE(row, std::string::npos) << run.out;
  // model, variant, tokens (24 x 24 patches + class), runs, no-capture, capture, overhead, GEMM lim, eager at
  // PyTorch's defaults, eager under attnscope's OpenMP policy, ratio to the faster
  std::istringstream fields(run.out.substr(row, run.out.find('\n', row) - row));
  std::string model, variant, no_capture, capture, overhead, gemm, eager, eager_policy, ratio;
  int tokens = 0, runs = 0;
  fields >> model >> variant >> tokens >> runs >> no_capture >> capture >> overhead >> gemm >> eager >> eager_policy >>
      ratio;
  EXPECT_EQ(tokens, 577) << run.out;
  EXPECT_EQ(runs, 1) << run.out;
  ASSERT_NE(eager.find("ms"), std::string::npos) << "no eager time: " << run.out;  // PyTorch ran at 384
  ASSERT_NE(eager_policy.find("ms"), std::string::npos) << "no second eager time: " << run.out;
  // The ratio divides by the faster eager time.
  const double faster = std::min(std::stod(eager), std::stod(eager_policy));
  EXPECT_NEAR(std::stod(ratio), std::stod(capture) / faster, 0.006) << run.out;
  EXPECT_NE(run.out.find("eager/P: the same under attnscope's"), std::string::npos) << run.out;
  // A forward made of matrix products cannot beat them at the machine's GEMM rate by much.
  EXPECT_GT(std::stod(gemm), 0.5) << run.out;
}

TEST(Bench, UnknownShapesAndAnalysesAwayFrom224AreRefusedWithTheChoices) {
  TestFolder folder("bench-refused");
  const CommandRun unknown = run_attnscope("bench --sizes vit-h14 --python none", folder.path());
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("vit-l14-518"), std::string::npos) << unknown.err;
  const CommandRun analysis = run_attnscope("bench --analysis --sizes vit-b16-384 --python none", folder.path());
  EXPECT_NE(analysis.exit_code, 0);
  EXPECT_NE(analysis.err.find("224"), std::string::npos) << analysis.err;
}

// The work one forward's matrix products do, by hand for DeiT-Small (197 tokens, width 384, 12
// blocks of 6 heads): 12 T d^2 multiply-adds in qkv, proj and the MLP, and the attention's.
TEST(Bench, ForwardWorkCountsEachVariantsAttentionProducts) {
  const double T = 197, d = 384, L = 12, h = 6;
  const double layers = 12 * T * d * d;
  AttentionSettings settings;
  EXPECT_DOUBLE_EQ(vit_forward_gflop(T, d, L, h, settings), 2 * L * (layers + 2 * T * T * d) / 1e9);
  settings.variant = Variant::Linear;
  EXPECT_DOUBLE_EQ(vit_forward_gflop(T, d, L, h, settings), 2 * L * (layers + 2 * T * d * (d / h)) / 1e9);
  settings.variant = Variant::Window;  // 7 x 7 windows by default
  EXPECT_DOUBLE_EQ(vit_forward_gflop(T, d, L, h, settings), 2 * L * (layers + 2 * T * 49 * d) / 1e9);
  settings.variant = Variant::Anchor;
  settings.anchors = 30;
  EXPECT_DOUBLE_EQ(vit_forward_gflop(T, d, L, h, settings), 2 * L * (layers + 4 * T * 30 * d) / 1e9);
}

// The eager side counts the matrix products of the forward it runs (bench/eager_baseline.py's
// GemmCounter); for Swin-T and PVT-v2-b2 at 224 that count equals the closed form by stage, and the
// native row of `bench --family` and a swapped kernel's carry their ratios to eager and to the GEMM
// limit; a variant the eager side cannot swap says so.
TEST(Bench, HierarchicalFamiliesCountTheirMatrixProductsAsTheClosedFormDoes) {
  // Swin-T: patch embedding, then per stage (dims 96-384-768 doubling, depths 2-2-6-2, 7 x 7
  // windows): patch merging 4C -> 2C, and per block 12 N C^2 (qkv, proj, MLP) + 2 x 49 N C.
  double swin = 56.0 * 56 * 96 * 48 + 768 * 1000;
  const int swin_dims[] = {96, 192, 384, 768}, swin_depths[] = {2, 2, 6, 2};
  for (int s = 0; s < 4; ++s) {
    const double n = std::pow(56 >> s, 2), c = swin_dims[s];
    if (s > 0) swin += n * 4 * swin_dims[s - 1] * c;
    swin += swin_depths[s] * (12 * n * c * c + 2 * 49 * n * c);
  }
  // PVT-v2-b2: 7 x 7 stem, 3 x 3 downsampling, per block q, spatial-reduction conv (sr 8-4-2-1),
  // kv on the N / sr^2 reduced tokens, the two attention products, proj and the MLP (ratios 8-8-4-4).
  double pvt = 56.0 * 56 * 64 * 3 * 49 + 512 * 1000;
  const int dims[] = {64, 128, 320, 512}, depths[] = {3, 4, 6, 3}, srs[] = {8, 4, 2, 1}, ratios[] = {8, 8, 4, 4};
  for (int s = 0; s < 4; ++s) {
    const int side = 56 >> s;
    const double n = double(side) * side, c = dims[s], reduced = std::pow(side / srs[s], 2);
    if (s > 0) pvt += n * dims[s - 1] * 9 * c;
    const double reduction = srs[s] > 1 ? reduced * c * c * srs[s] * srs[s] : 0;
    pvt +=
        depths[s] * (2 * n * c * c + reduction + 2 * reduced * c * c + 2 * n * reduced * c + 2 * n * c * ratios[s] * c);
  }
  // Each family with a swapped kernel the eager side has and one it has not.
  const std::vector<std::tuple<std::string, double, std::string>> benches{{"swin", swin, "linear"},
                                                                          {"pvt", pvt, "focused"}};
  TestFolder folder("bench-family");
  for (const auto& [family, multiply_adds, swapped] : benches) {
    SCOPED_TRACE(family);
    const CommandRun run =
        run_attnscope("bench --family " + family + " --variants " + swapped + ",anchor --runs 1 --warmup 0 --rounds 1",
                      folder.path());
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    // variant, capture, GEMM lim, GFLOP, eager, eager/P, ratio
    auto row_fields = [&](const std::string& variant) {
      // A row starts with the variant's name in a column of 10 ("linear layers: ..." is no row).
      const auto row = run.out.find("\n" + variant + std::string(10 - variant.size(), ' '));
      EXPECT_NE(row, std::string::npos) << variant << ":\n" << run.out;
      std::vector<std::string> fields;
      if (row == std::string::npos) return fields;
      std::istringstream line(run.out.substr(row + 1, run.out.find('\n', row + 1) - row - 1));
      for (std::string field; line >> field;) fields.push_back(field);
      return fields;
    };
    for (const std::string& variant : {std::string("native"), swapped}) {
      const std::vector<std::string> fields = row_fields(variant);
      ASSERT_EQ(fields.size(), 7u) << variant << ":\n" << run.out;
      EXPECT_NE(fields[4].find("ms"), std::string::npos) << run.out;  // eager ran this kernel, at both settings
      EXPECT_NE(fields[5].find("ms"), std::string::npos) << run.out;
      EXPECT_GT(std::stod(fields[2]), 0.5) << run.out;
      // The eager side's count, printed to 4 decimals: a missing classifier head (0.0015) shows.
      EXPECT_NEAR(std::stod(fields[3]), 2 * multiply_adds / 1e9, 1e-4) << variant << ":\n" << run.out;
    }
    const std::vector<std::string> anchor = row_fields("anchor");
    ASSERT_GE(anchor.size(), 5u) << run.out;
    EXPECT_EQ(anchor[2] + " " + anchor[3] + " " + anchor[4], "(no eager reference:") << run.out;
  }
  const CommandRun unknown = run_attnscope("bench --family vit --runs 1 --warmup 0 --rounds 1", folder.path());
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("--family vit: no such bench family (swin, pvt, agent_swin_tiny"), std::string::npos)
      << unknown.err;
}

// Each eager baseline runs twice: once with the OpenMP wait settings removed from its environment
// (PyTorch's defaults, as users run it) and once under this process's; a ratio divides by the faster.
TEST(Bench, EagerBaselinesRunAtPyTorchsDefaultsAndUnderAttnscopesPolicy) {
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  setenv("GOMP_SPINCOUNT", "0", 1);
  const std::string probe =
      "python3 -c 'import json, os; print(json.dumps({\"policy\": os.environ.get(\"OMP_WAIT_POLICY\", \"unset\"), "
      "\"spin\": os.environ.get(\"GOMP_SPINCOUNT\", \"unset\")}))'";
  std::string error;
  const nlohmann::json defaults = run_eager_json(probe, EagerThreading::PyTorchDefaults, error);
  const nlohmann::json ours = run_eager_json(probe, EagerThreading::Attnscope, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(defaults, nlohmann::json({{"policy", "unset"}, {"spin", "unset"}}));
  EXPECT_EQ(ours, nlohmann::json({{"policy", "PASSIVE"}, {"spin", "0"}}));
  unsetenv("GOMP_SPINCOUNT");

  EagerTimes times;
  for (const double ms : {30.0, 20.0, 25.0}) times.add(EagerThreading::PyTorchDefaults, ms);
  for (const double ms : {40.0, 35.0, 50.0}) times.add(EagerThreading::Attnscope, ms);
  EXPECT_DOUBLE_EQ(times.median(EagerThreading::PyTorchDefaults), 25.0);
  EXPECT_DOUBLE_EQ(times.faster(), 25.0);
  EXPECT_NE(eager_columns(20.0, times).find("0.80x"), std::string::npos) << eager_columns(20.0, times);
  EagerTimes policy_only;  // a baseline that ran under one setting only still has a ratio
  policy_only.add(EagerThreading::Attnscope, 10.0);
  EXPECT_DOUBLE_EQ(policy_only.faster(), 10.0);
  EXPECT_NE(eager_columns(5.0, policy_only).find("0.50x"), std::string::npos);
}

}  // namespace
}  // namespace attnscope
