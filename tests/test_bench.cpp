// `attnscope bench` on the shapes researchers run: a ViT-B/16 at 384 px goes through both sides at
// its own input size, and every row carries its token count and its ratio to the GEMM limit.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "app/bench_tools.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

TEST(Bench, ViTBaseAt384RunsBothSidesAtItsSizeAgainstTheGemmLimit) {
  TestFolder folder("bench");
  const CommandRun run =
      run_attnscope("bench --sizes vit-b16-384 --variants softmax --runs 1 --warmup 0 --rounds 1", folder.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("BLAS"), std::string::npos) << run.out;  // the machine line
  EXPECT_NE(run.out.find("GEMM limit"), std::string::npos) << run.out;
  const auto row = run.out.find("vit-b16-384");
  ASSERT_NE(row, std::string::npos) << run.out;
  // model, variant, tokens (24 x 24 patches + class), runs, no-capture, capture, overhead, eager, ratio, GEMM lim
  std::istringstream fields(run.out.substr(row, run.out.find('\n', row) - row));
  std::string model, variant, no_capture, capture, overhead, eager, ratio, gemm;
  int tokens = 0, runs = 0;
  fields >> model >> variant >> tokens >> runs >> no_capture >> capture >> overhead >> eager >> ratio >> gemm;
  EXPECT_EQ(tokens, 577) << run.out;
  EXPECT_EQ(runs, 1) << run.out;
  ASSERT_NE(eager.find("ms"), std::string::npos) << "no eager time: " << run.out;  // PyTorch ran at 384
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

}  // namespace
}  // namespace attnscope
