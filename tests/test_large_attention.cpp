// Attention at many tokens without O(N^3) work or N x N per head kept: the randomised leading
// spectrum against the full SVD, and rows read from the captured Q and K against the full matrix.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/singular_values.h"
#include "analysis/spectrum.h"
#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/attention.h"
#include "models/demo_models.h"
#include "models/model_loader.h"
#include "tests/random_vit.h"
#include "tests/test_folder.h"
#include "views/panel_maps.h"
#include "views/request_runner.h"

namespace attnscope {
namespace {

// A softmax attention matrix of `tokens` rows from random q, k of width 64 (scores scaled so that
// rows are neither uniform nor one-hot: a spectrum that decays, as trained heads' do).
torch::Tensor softmax_attention(int64_t tokens, uint64_t seed) {
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor q = at::randn({tokens, 64}, generator, options), k = at::randn({tokens, 64}, generator, options);
  return torch::softmax(q.matmul(k.transpose(0, 1)) * (2.0 / 8.0), -1);
}

// The bounds are a posteriori: they hold for any matrix. What float32 products can add to them is
// the rounding of a 1000-term dot product, well under 1e-5 of the largest value.
TEST(LeadingSpectrum, BracketsTheFullSvdOnAThousandTokens) {
  const torch::Tensor matrix = softmax_attention(1000, 7);
  const Spectrum full = matrix_spectrum(matrix);
  const torch::Tensor exact = full.singular_values.to(torch::kDouble);
  const LeadingSpectrum leading = leading_spectrum(matrix, 24);
  ASSERT_EQ(leading.singular_values.size(0), 24);
  const double rounding = 1e-5 * exact[0].item<double>();
  for (int64_t i = 0; i < 24; ++i) {
    const double sigma = exact[i].item<double>();
    EXPECT_LE(leading.singular_values[i].item<double>(), sigma + rounding) << "value " << i;
    EXPECT_GE(leading.upper_bounds[i].item<double>(), sigma - rounding) << "value " << i;
  }
  // The largest value converges as (sigma_{l+1} / sigma_1)^(2(2q+1)) with l = 36 vectors kept and
  // q = 4 iterations (Halko et al. section 10.4): the ratio is about 0.4 for such matrices, so 1e-7.
  EXPECT_NEAR(leading.singular_values[0].item<double>(), exact[0].item<double>(), 1e-4 * exact[0].item<double>());
  EXPECT_GE(full.numerical_rank, leading.rank_at_least);
  EXPECT_LE(full.numerical_rank, leading.rank_at_most);
  // As in the run test below: the float32 SVD's own error on exp(entropy), n^1.5 eps.
  const double slack = std::pow(1000.0, 1.5) * 1.2e-7 / 2;
  EXPECT_GE(full.effective_rank, leading.effective_rank_low * (1 - slack));
  EXPECT_LE(full.effective_rank, leading.effective_rank_high * (1 + slack));
  // Without power iterations the values are lower bounds still, but no longer all but exact.
  const LeadingSpectrum rough = leading_spectrum(matrix, 24, 0);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_LE(rough.singular_values[i].item<double>(), exact[i].item<double>() + rounding);
  EXPECT_GT(rough.residual, leading.residual);
}

// The panel-by-panel reduction gives LAPACK's values: both are backward stable, each value within
// about n eps sigma_1 of the true one (Demmel, Applied Numerical Linear Algebra, 5.4), which is the
// numerical-rank tolerance, so the two agree on every rank but one a value sits on the tolerance.
TEST(ExactSingularValues, EqualLapacksSvdOnEveryShape) {
  ASSERT_TRUE(singular_values_can_stop()) << "this build's LAPACK lacks sgebrd's parts";
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1000, 1000}, {700, 260}, {260, 700}, {161, 161}, {90, 120}};
  for (const auto& [rows, cols] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    torch::Generator generator = at::detail::createCPUGenerator(uint64_t(rows * 7 + cols));
    const torch::Tensor scores = at::randn({rows, 64}, generator).matmul(at::randn({64, cols}, generator)) * 0.25;
    const torch::Tensor matrix = torch::softmax(scores, -1);
    const torch::Tensor expected = torch::linalg_svdvals(matrix, c10::nullopt).to(torch::kDouble);
    int reports = 0;
    double last = -1.0;
    SvdProgress progress;
    progress.report = [&](double fraction) {
      EXPECT_GE(fraction, last);
      last = fraction;
      ++reports;
    };
    const torch::Tensor values = exact_singular_values(matrix.clone(), progress).to(torch::kDouble);
    ASSERT_EQ(values.numel(), std::min(rows, cols));
    const double tolerance = double(std::max(rows, cols)) * 1.2e-7 * expected[0].item<double>();
    EXPECT_LT((values - expected).abs().max().item<double>(), tolerance);
    EXPECT_EQ(last, 1.0);
    EXPECT_GE(reports, 1);
  }
}

// A stop asked for mid-way ends the reduction at the next panel of 32 columns.
TEST(ExactSingularValues, StopsAtTheNextPanelWhenCancelled) {
  const torch::Tensor matrix = softmax_attention(1000, 11);
  int reports = 0;
  SvdProgress progress;
  progress.report = [&](double) { ++reports; };
  progress.cancelled = [&] { return reports >= 3; };
  EXPECT_THROW(exact_singular_values(matrix, progress), Cancelled);
  EXPECT_EQ(reports, 3) << "one report a panel, and none after the stop";
}

// A captured layer's rows from q and k against its full matrix, and the attention the patch
// queries give the class token from the forward's row normalisers, from rows, and from the matrix.
void expect_rows_and_prefix_mass_match(const AttentionCapture& capture) {
  ASSERT_EQ(capture.layout.total_tokens(), 1025);
  EXPECT_EQ(capture.q.size(2), 1025);
  ASSERT_TRUE(capture.row_log_normalizer.defined()) << "softmax over all keys keeps each row's normaliser";
  AttentionCapture without_normalizers = capture;
  without_normalizers.row_log_normalizer = torch::Tensor();
  for (int64_t head = 0; head < capture.heads; ++head) {
    const torch::Tensor full = capture.matrix(0, head);
    for (int64_t query : {0, 1, 517, 1024})
      EXPECT_LT((capture.row(0, head, query) - full[query]).abs().max().item<double>(), 1e-6)
          << "head " << head << " query " << query;
    // What the patch queries give the class token: from the normalisers, from rows, from the matrix.
    const torch::Tensor expected = full.slice(0, 1).slice(1, 0, 1).mean(0);
    EXPECT_LT((prefix_received(capture, int(head)) - expected).abs().max().item<double>(), 1e-6) << "head " << head;
    EXPECT_LT((prefix_received(without_normalizers, int(head)) - expected).abs().max().item<double>(), 1e-6);
  }
}

// The workbench and `run` read a query's row from the layer's captured q and k; it is the full
// matrix's row, on a ViT with 1,025 tokens.
TEST(LeadingSpectrum, RowsFromCapturedQueriesAndKeysAreTheFullMatrixRows) {
  VisionTransformer model = random_vit(32, 3);
  c10::InferenceMode inference_mode;
  const torch::Tensor image = torch::randn({1, 3, 256, 256});
  // One core runs whole images per core, two split the queries: both keep the row normalisers.
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " thread(s)");
    configure_threads(threads);
    expect_rows_and_prefix_mass_match(model->forward(image, {}).layers.back());
  }
}

// `run` on 1,025 tokens: nothing O(T^3) unless asked. By default no full SVD and no T x T file;
// --ranks leading gives bounds that bracket --ranks exact's full-SVD ranks.
TEST(LeadingSpectrum, RunComputesFullSpectraOnlyWhenAsked) {
  TestFolder scratch("large-attention");
  const std::string weights = save_random_vit(scratch.file("vit1025.safetensors"), 32, 5);
  const std::string image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  std::string messages;  // the last run's stderr
  auto run = [&](const std::string& name, const std::string& flags) {
    const CommandRun result = run_attnscope(
        "run --model '" + weights + "' --image '" + image + "' --out '" + scratch.file(name) + "' " + flags,
        scratch.path());
    EXPECT_EQ(result.exit_code, 0) << result.err;
    messages = result.err;
    return read_json_file(scratch.path() / name / "summary.json");
  };
  const nlohmann::json automatic = run("auto", "");
  EXPECT_EQ(automatic.at("ranks_mode"), "auto");
  EXPECT_TRUE(automatic["layers"][1].at("ranks").empty()) << "softmax over 1,025 tokens: a full SVD, not by default";
  EXPECT_NE(automatic.at("layers_note").get<std::string>().find("--ranks exact"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(scratch.path() / "auto" / "matrix_l1_h0.npy"));

  const nlohmann::json leading = run("leading", "--ranks leading --matrix on");
  const nlohmann::json exact = run("exact", "--ranks exact");
  // Outside a terminal the progress bar is a line a head.
  EXPECT_NE(messages.find("[4/4] exact spectrum of layer 1 (1025 tokens), head 3"), std::string::npos) << messages;
  EXPECT_TRUE(std::filesystem::exists(scratch.path() / "leading" / "matrix_l1_h0.npy"));
  ASSERT_EQ(leading["layers"][1]["ranks"].size(), 4u);
  ASSERT_EQ(exact["layers"][1]["ranks"].size(), 4u);
  for (size_t head = 0; head < 4; ++head) {
    const nlohmann::json& bounds = leading["layers"][1]["ranks"][head];
    const nlohmann::json& full = exact["layers"][1]["ranks"][head];
    EXPECT_EQ(full.at("method"), "full SVD");
    EXPECT_EQ(bounds.at("singular_values").size(), 32u);
    EXPECT_GE(full.at("rank").get<int>(), bounds.at("rank_at_least").get<int>());
    EXPECT_LE(full.at("rank").get<int>(), bounds.at("rank_at_most").get<int>());
    // The exact side is a float32 SVD: each of the n values is off by up to about sqrt(n) eps sigma_1
    // (LAPACK's backward error), which moves exp(entropy) of their distribution by up to n^1.5 eps.
    const double slack = std::pow(1025.0, 1.5) * 1.2e-7 / 2;
    EXPECT_GE(full.at("effective_rank").get<double>(), bounds.at("effective_rank_low").get<double>() * (1 - slack));
    EXPECT_LE(full.at("effective_rank").get<double>(), bounds.at("effective_rank_high").get<double>() * (1 + slack));
  }
}

// `analyze --analysis spectrum` honours --ranks too: leading values with bounds that bracket the
// exact run's rank, the upper bounds in their own NPY; none is refused before anything is loaded.
TEST(LeadingSpectrum, AnalyzeSpectrumGivesLeadingValuesWhenAsked) {
  TestFolder scratch("analyze-leading");
  const std::string weights = save_random_vit(scratch.file("vit1025.safetensors"), 32, 17);
  const std::string image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  auto analyze = [&](const std::string& name, const std::string& ranks) {
    return run_attnscope("analyze --analysis spectrum --head 2 --model '" + weights + "' --image '" + image +
                             "' --out '" + scratch.file(name) + "' --ranks " + ranks,
                         scratch.path());
  };
  ASSERT_EQ(analyze("exact", "exact").exit_code, 0);
  const CommandRun leading_run = analyze("leading", "leading");
  ASSERT_EQ(leading_run.exit_code, 0) << leading_run.err;
  const nlohmann::json exact = read_json_file(scratch.path() / "exact" / "summary.json")["variants"][0]["matrix"];
  const nlohmann::json leading = read_json_file(scratch.path() / "leading" / "summary.json")["variants"][0]["matrix"];
  EXPECT_EQ(exact.at("method"), "full SVD");
  EXPECT_NE(leading.at("method").get<std::string>().find("leading 32"), std::string::npos);
  EXPECT_FALSE(leading.contains("rank"));
  EXPECT_GE(exact.at("rank").get<int>(), leading.at("rank_at_least").get<int>());
  EXPECT_LE(exact.at("rank").get<int>(), leading.at("rank_at_most").get<int>());
  const torch::Tensor lower = read_npy((scratch.path() / "leading" / "singular_values_native.npy").string());
  const torch::Tensor upper =
      read_npy((scratch.path() / "leading" / "singular_value_upper_bounds_native.npy").string());
  const torch::Tensor all = read_npy((scratch.path() / "exact" / "singular_values_native.npy").string());
  ASSERT_EQ(lower.numel(), 32);
  ASSERT_EQ(upper.numel(), 32);
  // The bounds hold for any matrix; float32 products add at most 1e-5 of the largest value.
  const double rounding = 1e-5 * all[0].item<double>();
  EXPECT_TRUE((lower <= all.slice(0, 0, 32) + rounding).all().item<bool>());
  EXPECT_TRUE((upper >= all.slice(0, 0, 32) - rounding).all().item<bool>());
  const CommandRun none = analyze("none", "none");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("--ranks none"), std::string::npos) << none.err;
  EXPECT_FALSE(std::filesystem::exists(scratch.path() / "none" / "summary.json"));
}

// The matrix view above kMatrixTexels tokens: block means from rows in chunks equal the full
// matrix's (avg_pool2d over the blocks, the last ones partial), and no entry is lost to them.
TEST(LargeAttentionWorkbench, MatrixOverviewIsTheBlockMeansOfTheFullMatrix) {
  VisionTransformer model = random_vit(32, 9);
  c10::InferenceMode inference_mode;
  const AttentionCapture capture = model->forward(torch::randn({1, 3, 256, 256}), {}).layers.back();
  const MatrixOverview overview = matrix_overview(capture, 1, false);
  ASSERT_EQ(overview.block, 2) << "1,025 tokens > 1,024 texels";
  ASSERT_EQ(overview.means.size(0), 513);
  const torch::Tensor full = capture.matrix(0, 1).to(torch::kDouble);
  const torch::Tensor expected =
      torch::avg_pool2d(full.unsqueeze(0), {2, 2}, {2, 2}, {0, 0}, /*ceil_mode=*/true, /*count_include_pad=*/false)[0];
  // float32 entries summed in float64: the means differ from avg_pool2d's only by float32 rounding.
  EXPECT_LT((overview.means.to(torch::kDouble) - expected).abs().max().item<double>(), 1e-7);
  EXPECT_NEAR(overview.means[512][512].item<double>(), full[1024][1024].item<double>(), 1e-7) << "a lone corner entry";
  // What the cursor reads: the exact row, the same as the full matrix's.
  EXPECT_LT((shown_matrix_rows(capture, 1, false, {700})[0] - full[700].to(torch::kFloat)).abs().max().item<double>(),
            1e-6);
}

// A cancelled spectrum leaves the workbench responsive. The worker's run (views/request_runner.h)
// is asked for every head's exact spectrum (a full SVD each) and a newer request arrives while the
// second head's SVD runs: the run stops at its next panel of 32 columns, with no further progress.
// The newer request, a click on another query, is then answered from the same forward, and the
// head whose spectrum finished before the stop is not computed again.
TEST(LargeAttentionWorkbench, ACancelledSpectrumStopsWithinAPanelAndTheNextClickIsAnswered) {
  TestFolder scratch("cancelled-spectrum");
  const std::string weights = save_random_vit(scratch.file("vit1025.safetensors"), 32, 13);
  InferenceRequest request;
  request.model = weights;
  request.image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  request.analysis = "spectrum";
  request.ranks = RankMode::Exact;
  request.panels = {{weights, AttentionSettings{}}};
  RunCache cache;

  uint64_t latest = 1;  // the worker's latest request; 2 arrives during head 1's SVD
  int reports_after_newer = 0;
  const auto cancelled = [&] { return latest != 1; };
  const auto progress = [&](int done, int total) {
    if (latest != 1) ++reports_after_newer;
    if (total > 0 && done * 8 > total * 3) latest = 2;  // past 3/8: head 1 of 4, half way
  };
  InferenceOutcome stopped;
  EXPECT_THROW(run_request(request, cache, cancelled, stopped, progress), Cancelled);
  EXPECT_EQ(latest, 2u);
  EXPECT_EQ(reports_after_newer, 0) << "the SVD went on after the newer request arrived";

  request.query = QuerySpec::parse("5,9");
  int first_report = -1;
  InferenceOutcome click;
  run_request(
      request, cache, [] { return false; }, click,
      [&](int done, int) {
        if (first_report < 0) first_report = done;
      });
  ASSERT_TRUE(click.error.empty()) << click.error;
  EXPECT_TRUE(click.forward_reused) << "a click needs no forward";
  ASSERT_EQ(click.panels.size(), 1u);
  const auto* matrix_views = analysis_result<std::vector<PanelMatrix>>(click);
  ASSERT_NE(matrix_views, nullptr);
  const PanelMatrix& panel = matrix_views->front();
  ASSERT_EQ(panel.spectra.size(), 4u);
  for (const HeadSpectrum& spectrum : panel.spectra) {
    EXPECT_TRUE(spectrum.exact());
    EXPECT_EQ(spectrum.method, "full SVD");
    EXPECT_EQ(spectrum.singular_values.size(), 1025u);
  }
  EXPECT_GE(first_report, 250) << "head 0's spectrum, finished before the stop, was computed again";
  EXPECT_EQ(panel.block, 2);
  ASSERT_TRUE(bool(panel.row));
  EXPECT_EQ(panel.row(3).size(), 1025u);
}

}  // namespace
}  // namespace attnscope
