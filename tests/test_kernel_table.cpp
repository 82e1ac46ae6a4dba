// The kernel table: every kernel and mode has one row whose name parsing, to_string and help
// texts read; every kernel's output, rows and factors are one matrix.
#include <gtest/gtest.h>

#include "core/number_text.h"

#include <set>

#include "models/attention.h"
#include "session/app_state.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_kernel_table {

const std::string kDataDir = std::string(ATTNSCOPE_TEST_DATA_DIR);

TEST(KernelTable, EveryKernelHasOneRowAndOneName) {
  std::set<std::string> names;
  std::set<int> kernels;
  for (const KernelSpec& spec : kernel_table()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_TRUE(kernels.insert(int(spec.kernel)).second) << spec.name;
    EXPECT_EQ(&kernel_spec(spec.kernel), &spec);
    EXPECT_EQ(to_string(spec.kernel), spec.name);
    EXPECT_TRUE(spec.features && spec.rows && spec.attend) << spec.name;
  }
}

TEST(KernelTable, ModeNamesRoundTripAndHelpListsThem) {
  std::string listed;
  for (const auto& spec : enum_entries<Variant>()) {
    EXPECT_EQ(parse_variant(spec.name), spec.value);
    EXPECT_EQ(to_string(spec.value), spec.name);
    EXPECT_NE(variant_choices().find(spec.name), std::string::npos) << spec.name;
  }
  EXPECT_EQ(variant_choices(),
            "native, softmax, linear, focused, enhanced, window, anchor, agent, inline, mlla or pola");
  EXPECT_EQ(variant_names().size(), enum_entries<Variant>().size() - 1) << "every swap, without native";
  for (const auto& spec : enum_entries<FocusNorm>()) {
    EXPECT_EQ(parse_focus_norm(spec.name), spec.value);
    EXPECT_EQ(to_string(spec.value), spec.name);
    EXPECT_NE(focus_norm_choices().find(spec.name), std::string::npos) << spec.name;
    EXPECT_NE(focus_norm_help().find(spec.description), std::string::npos) << spec.name;
  }
  EXPECT_EQ(focus_norm_choices(), "all|head");
  ASSERT_NE(find_option("variant"), nullptr);
  EXPECT_EQ(find_option("variant")->help, variant_choices());
  ASSERT_NE(find_option("norm"), nullptr);
  EXPECT_EQ(find_option("norm")->value_name, focus_norm_choices());
  try {
    parse_variant("cosine");
    ADD_FAILURE() << "an unknown variant parsed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(variant_choices()), std::string::npos) << e.what();
  }
}

// Random per-head features of a kernel on a 1 x 5 x 6 grid with a class token.
struct KernelCase {
  ResolvedAttention resolved;
  TokenLayout layout;
  KernelFeatures features;
  torch::Tensor v;
};
KernelCase kernel_case(Kernel kernel) {
  KernelCase c;
  c.layout.has_class_token = true;
  c.layout.grid_h = 5;
  c.layout.grid_w = 6;
  c.resolved.kernel = kernel;
  c.resolved.anchors = 7;
  torch::manual_seed(11);
  const int64_t tokens = c.layout.total_tokens();
  auto q = torch::randn({2, 3, tokens, 8}, torch::kDouble);
  auto k = torch::randn({2, 3, tokens, 8}, torch::kDouble);
  c.v = torch::randn({2, 3, tokens, 8}, torch::kDouble);
  c.features = kernel_features(c.resolved, q, k, {}, c.layout);
  return c;
}

// What the forward computes, what the views show and what the rank reads are one matrix, for
// every kernel the table has (a new one included).
// Anchors 0 means every learned anchor, or the default count pooled from K, for a ViT and a
// hierarchical family's layer alike: one resolution serves both.
TEST(KernelTable, AnchorCountResolvesOnceForEveryFamily) {
  AttentionSettings settings;
  settings.variant = Variant::Anchor;
  KernelParameters learned;
  learned.anchors = torch::zeros({12, 8});
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, learned, false, 196).anchors, 12);
  EXPECT_TRUE(resolve_for_layer(settings, NativeAttention::Softmax, learned, false, 196).learned_anchors);
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, {}, false, 196).anchors, kDefaultPooledAnchors);
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, {}, false, 16).anchors, 16) << "at most the keys";
  settings.anchors = 5;
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, learned, false, 196).anchors, 5);
  settings.anchors = 40;
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, learned, false, 196).anchors, 12);
  // More than there are is adjusted and said where the attention is described (titles, summary.json).
  EXPECT_EQ(resolve_for_layer(settings, NativeAttention::Softmax, learned, false, 196).describe(),
            "anchor anchors=12 (learned) (40 asked: at most the learned anchors) [swapped]");
  settings.anchors = 500;
  EXPECT_NE(resolve_for_layer(settings, NativeAttention::Softmax, {}, false, 144)
                .describe()
                .find("anchors=144 (pooled from K) (500 asked: at most the patches)"),
            std::string::npos);
  settings.anchors = 40;

  // A ViT attention module resolves through the same function and adds only its window.
  AttentionArch arch;
  arch.dim = 16;
  arch.heads = 2;
  arch.native = NativeAttention::Anchor;
  arch.anchors = 12;
  Attention attention(arch);
  settings.anchors = 0;
  settings.window = 3;
  TokenLayout layout;
  layout.has_class_token = true;
  layout.grid_h = layout.grid_w = 14;
  const ResolvedAttention resolved = attention->resolve(settings, layout);
  EXPECT_EQ(resolved.anchors, 12);
  EXPECT_EQ(resolved.window, 0) << "anchors are global";
}

TEST(KernelTable, EveryKernelsOutputRowsAndFactorsAreOneMatrix) {
  for (const KernelSpec& spec : kernel_table()) {
    SCOPED_TRACE(spec.name);
    const KernelCase c = kernel_case(spec.kernel);
    const int64_t tokens = c.layout.total_tokens();
    const auto all = torch::arange(tokens, torch::kLong);
    const torch::Tensor rows = equivalent_rows(spec.kernel, c.features, all, {});
    ASSERT_EQ(rows.sizes(), torch::IntArrayRef({2, 3, tokens, tokens}));
    // The output from the matrices: one for every value channel, or (a second matrix: PolaFormer)
    // the first for the first half of each head's channels and the second for the rest.
    auto through_rows = [&](const torch::Tensor& matrix) {
      if (!spec.second_rows) return torch::matmul(matrix, c.v);
      const auto halves = c.v.chunk(2, -1);
      return torch::cat(
          {torch::matmul(matrix, halves[0]), torch::matmul(spec.second_rows(spec, c.features, all), halves[1])}, -1);
    };
    EXPECT_TRUE(torch::allclose(attend(spec.kernel, c.features, c.v, {}), through_rows(rows), 1e-9, 1e-9));
    // A window mask: the masked rows are the exact computation, and masked keys get nothing
    // (kernels global by construction ignore it).
    const auto allowed = window_mask(c.layout, 2, torch::kCPU);
    const torch::Tensor masked = equivalent_rows(spec.kernel, c.features, all, allowed);
    EXPECT_TRUE(torch::allclose(attend(spec.kernel, c.features, c.v, allowed), through_rows(masked), 1e-9, 1e-9));
    if (!spec.global_only) {
      EXPECT_EQ(masked.masked_select(allowed.logical_not()).abs().max().item<double>(), 0.0);
    }
    const auto factors = equivalent_factors(spec.kernel, c.features, 1, 2);
    EXPECT_EQ(factors.has_value(), spec.factors != nullptr);
    if (factors) {
      EXPECT_TRUE(torch::allclose(torch::matmul(factors->left, factors->right.t()), rows[1][2], 1e-9, 1e-9));
    }
  }
}

// Every numeric knob refuses inf and NaN (the option parser's root: no setting means anything by them),
// and p beyond the range where f_p keeps more than one channel (issue 60: --p 200, 1e308 or inf gave
// all-zero matrices with exit 0).
TEST(KernelTable, KnobsRefuseNonFiniteAndOutOfRangeValues) {
  for (const AttentionKnob& knob : attention_knobs()) {
    if (!knob.number || knob.control == KnobControl::Switch || knob.control == KnobControl::Choice) continue;
    SCOPED_TRACE(knob.name);
    AttentionSettings settings;
    for (const char* bad : {"inf", "-inf", "nan", "1e400"})
      EXPECT_THROW(knob.set(settings, bad), std::invalid_argument) << bad;
  }
  AttentionSettings settings;
  const AttentionKnob* p = find_attention_knob("p");
  ASSERT_NE(p, nullptr);
  for (const char* bad : {"200", "1e308", "32.5", "0", "-1"})
    EXPECT_THROW(p->set(settings, bad), std::invalid_argument) << bad;
  EXPECT_NO_THROW(p->set(settings, "32"));
  EXPECT_DOUBLE_EQ(settings.p, 32.0);
  EXPECT_THROW(parse_double_option("opacity", "inf"), std::invalid_argument);
}

}  // namespace test_kernel_table
}  // namespace attnscope
