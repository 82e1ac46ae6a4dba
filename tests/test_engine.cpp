// Engine behaviour the parity cases do not pin down: settings that change between runs of one
// loaded model, gradients through the captured activations, layouts, masks and anchor regions.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/assets.h"
#include "core/image.h"
#include "core/npy.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "models/token_linear.h"
#include "session/app_state.h"
#include "tests/random_vit.h"

namespace attnscope {
namespace test_engine {

const std::string kCaseDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/";

LoadedModel load_case_model(const std::string& file, int heads = 0) {
  ArchOverrides overrides;
  if (heads > 0) overrides.values["heads"] = heads;
  return load_model(kCaseDir + file, overrides, torch::kCPU);
}

TEST(Engine, SettingsChangeBetweenRunsWithoutReloading) {
  LoadedModel model = load_case_model("vit_softmax.safetensors", 2);
  const auto input = read_npy(kCaseDir + "softmax_cls.input.npy");
  c10::InferenceMode inference_mode;
  auto run = [&](Variant variant, double p = 3, int window = 0, int anchors = 0) {
    AttentionSettings settings;
    settings.variant = variant;
    settings.p = p;
    settings.window = window;
    settings.anchors = anchors;
    return model.vit().forward(input, settings).logits;
  };
  const auto softmax = run(Variant::Softmax);
  const std::vector<torch::Tensor> others = {run(Variant::Linear),          run(Variant::Focused, 2),
                                             run(Variant::Focused, 5),      run(Variant::Window, 3, 3),
                                             run(Variant::Anchor, 3, 0, 5), run(Variant::Anchor, 3, 0, 7)};
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_GT((others[i] - softmax).abs().max().item<double>(), 1e-4) << "setting " << i;
    for (size_t j = 0; j < i; ++j)
      EXPECT_GT((others[i] - others[j]).abs().max().item<double>(), 1e-5) << i << " vs " << j;
  }
  EXPECT_TRUE(torch::equal(run(Variant::Softmax), softmax));  // back to where it started, bit for bit
}

// A parity-case model (heads: 0 = from the file) seen through a variant.
struct Case {
  std::string file;
  int heads;
  Variant variant;
};

// Rows read from a batched capture belong to their own image: item 1 of a batch of two equals the
// same image run alone, for every native kernel and for swapped ones (per-head parameters such as
// L2ViT's temperature broadcast over the batch).
TEST(Engine, CapturedRowsOfEveryBatchItemMatchASingleImageRun) {
  const std::vector<Case> cases = {
      {"vit_softmax.safetensors", 2, Variant::Native},       {"vit_softmax.safetensors", 2, Variant::Linear},
      {"vit_softmax.safetensors", 2, Variant::Anchor},       {"vit_enhanced_lcm.safetensors", 0, Variant::Native},
      {"vit_focused_pe_n.safetensors", 0, Variant::Native},  {"vit_anchor.safetensors", 0, Variant::Native},
      {"vit_enhanced_lcm.safetensors", 0, Variant::Softmax},
  };
  for (const Case& item : cases) {
    SCOPED_TRACE(item.file + " as variant " + std::to_string(int(item.variant)));
    LoadedModel model = load_case_model(item.file, item.heads);
    torch::manual_seed(7);
    const auto images = torch::randn({2, 3, model.vit_arch().native_height(), model.vit_arch().native_width()});
    AttentionSettings settings;
    settings.variant = item.variant;
    c10::InferenceMode inference_mode;
    const ForwardOutput batched = model.vit().forward(images, settings);
    const ForwardOutput alone = model.vit().forward(images.slice(0, 1, 2), settings);
    const std::vector<int64_t> queries = {0, 3, batched.layout.total_tokens() - 1};
    for (size_t layer = 0; layer < batched.layers.size(); ++layer)
      for (int head = 0; head < batched.layers[layer].heads; ++head) {
        const auto from_batch = batched.layers[layer].rows(1, head, queries);
        const auto single = alone.layers[layer].rows(0, head, queries);
        EXPECT_LT((from_batch - single).abs().max().item<double>(), 1e-5) << "layer " << layer << " head " << head;
      }
  }
}

// Without autograd on a multi-core CPU each block runs as chunks of token rows, one per core, with
// oneDNN's GEMMs; with autograd it is the plain graph. Both compute the same thing, prefix tokens,
// windows, L2ViT's grid convolution and batches included.
TEST(Engine, RowChunkedForwardEqualsThePlainGraph) {
  configure_threads(2);
  ASSERT_EQ(configured_threads(), 2);
  const std::vector<Case> cases = {
      {"vit_softmax.safetensors", 2, Variant::Native},      {"vit_softmax.safetensors", 2, Variant::Window},
      {"vit_softmax.safetensors", 2, Variant::Linear},      {"vit_enhanced_lcm.safetensors", 0, Variant::Native},
      {"vit_focused_pe_n.safetensors", 0, Variant::Native}, {"vit_anchor.safetensors", 0, Variant::Native},
  };
  for (const Case& item : cases) {
    SCOPED_TRACE(item.file + " as variant " + std::to_string(int(item.variant)));
    LoadedModel model = load_case_model(item.file, item.heads);
    torch::manual_seed(11);
    const auto images = torch::randn({2, 3, model.vit_arch().native_height(), model.vit_arch().native_width()});
    AttentionSettings settings;
    settings.variant = item.variant;
    settings.window = 3;
    ForwardOutput plain;
    {
      torch::AutoGradMode with_graph(true);
      plain = model.vit().forward(images, settings);
      ASSERT_TRUE(plain.logits.requires_grad());
    }
    c10::InferenceMode inference_mode;
    const ForwardOutput chunked = model.vit().forward(images, settings);
    const double scale = plain.logits.abs().max().item<double>();
    EXPECT_LT((chunked.logits - plain.logits.detach()).abs().max().item<double>(), 1e-5 * (1 + scale));
    const std::vector<int64_t> queries = {0, 5, chunked.layout.total_tokens() - 1};
    for (size_t layer = 0; layer < chunked.layers.size(); ++layer) {
      const auto& normed = chunked.layers[layer].normed_input;
      EXPECT_LT((normed - plain.layers[layer].normed_input.detach()).abs().max().item<double>(), 1e-4);
      for (int64_t batch = 0; batch < 2; ++batch)
        for (int head = 0; head < chunked.layers[layer].heads; ++head) {
          const auto difference =
              chunked.layers[layer].rows(batch, head, queries) - plain.layers[layer].rows(batch, head, queries);
          EXPECT_LT(difference.abs().max().item<double>(), 1e-5) << "layer " << layer << " head " << head;
        }
    }
  }
}

// At 4,097 tokens (4 heads) each core walks its 2,048 queries in blocks of 16 MB of scores, 256
// rows: the blocked softmax, its exponentials in place and divided after A V, equals the plain
// graph's softmax, and the captured rows (redrawn from each row's log-sum-exp) equal the plain
// graph's rows, at the blocks' edges too.
TEST(Engine, BlockedSoftmaxOverManyTokensEqualsThePlainGraph) {
  configure_threads(2);
  VisionTransformer model = random_vit(/*grid=*/64, /*seed=*/3);
  torch::manual_seed(12);
  const auto image = torch::randn({1, 3, 512, 512});
  const AttentionSettings settings;
  ForwardOutput plain;
  {
    torch::AutoGradMode with_graph(true);
    plain = model->forward(image, settings);
  }
  c10::InferenceMode inference_mode;
  const ForwardOutput blocked = model->forward(image, settings);
  ASSERT_EQ(blocked.layout.total_tokens(), 4097);
  // Float32 sums over 4,097 keys in another order: a few units in the 6th digit.
  const double scale = plain.logits.abs().max().item<double>();
  EXPECT_LT((blocked.logits - plain.logits.detach()).abs().max().item<double>(), 1e-5 * (1 + scale));
  const std::vector<int64_t> queries = {0, 1, 255, 256, 257, 2047, 2048, 2049, 2303, 2304, 4096};
  for (size_t layer = 0; layer < blocked.layers.size(); ++layer)
    for (int head = 0; head < blocked.layers[layer].heads; ++head) {
      const auto ours = blocked.layers[layer].rows(0, head, queries);
      const auto reference = plain.layers[layer].rows(0, head, queries).detach();
      // Rows of 4,097 probabilities: compared relative to the row's largest.
      EXPECT_LT(((ours - reference).abs().amax(-1) / reference.amax(-1)).max().item<double>(), 1e-5)
          << "layer " << layer << " head " << head;
      EXPECT_LT((ours.sum(-1) - 1).abs().max().item<double>(), 1e-5);
    }
}

// Windowed attention without autograd runs window by window (each query against its window and
// the class token), the plain graph through the T x T mask: on a 23 x 23 grid in 7 x 7 windows
// (edge windows of 2) every kernel that takes windows gives the mask's logits and rows.
TEST(Engine, WindowByWindowAttentionEqualsTheMask) {
  configure_threads(2);
  VisionTransformer model = random_vit(/*grid=*/23, /*seed=*/5);
  torch::manual_seed(13);
  const auto image = torch::randn({1, 3, 184, 184});
  for (const Variant variant : {Variant::Window, Variant::Linear, Variant::Focused, Variant::Enhanced}) {
    SCOPED_TRACE(to_string(variant));
    AttentionSettings settings;
    settings.variant = variant;
    settings.window = 7;
    ForwardOutput plain;
    {
      torch::AutoGradMode with_graph(true);
      plain = model->forward(image, settings);
    }
    ForwardOutput windowed;
    {
      c10::InferenceMode inference_mode;
      windowed = model->forward(image, settings);
    }
    ASSERT_EQ(windowed.layout.total_tokens(), 530);
    // The same terms but for the masked keys' exact zeros, summed in another order.
    const double scale = plain.logits.abs().max().item<double>();
    EXPECT_LT((windowed.logits - plain.logits.detach()).abs().max().item<double>(), 1e-5 * (1 + scale));
    for (size_t layer = 0; layer < windowed.layers.size(); ++layer) {
      // The next layer's input carries this layer's attention output.
      EXPECT_LT(
          (windowed.layers[layer].normed_input - plain.layers[layer].normed_input.detach()).abs().max().item<double>(),
          1e-4)
          << "layer " << layer;
    }
  }
}

TEST(Engine, RowChunksCoverEveryRowOnceWithTheCallersModes) {
  configure_threads(2);
  c10::InferenceMode inference_mode;
  for (int64_t rows : {1, 2, 7, 197}) {
    std::vector<int> hits(size_t(rows), 0);
    std::atomic<int> chunks{0}, outside_inference_mode{0};
    for_each_row_chunk(rows, [&](int64_t begin, int64_t end) {
      ++chunks;
      if (!c10::InferenceMode::is_enabled()) ++outside_inference_mode;
      for (int64_t row = begin; row < end; ++row) ++hits[size_t(row)];
    });
    EXPECT_EQ(chunks, std::min<int64_t>(rows, 2)) << rows << " rows";
    EXPECT_EQ(outside_inference_mode, 0) << rows << " rows";
    for (int64_t row = 0; row < rows; ++row) EXPECT_EQ(hits[size_t(row)], 1) << "row " << row << " of " << rows;
  }
}

// token_linear splits a small token count's output columns across the cores, each core applying
// the epilogue to its block: the same values as the layer and the epilogue on the whole output
// (each element the same dot product over C_in, so float32's conditioning bounds the difference).
// Where the split does not pay or cannot run it is not taken, with the same result.
TEST(Engine, ColumnSplitLinearIsTheLayerWithItsEpilogue) {
  configure_threads(2);
  torch::manual_seed(31);
  torch::nn::Linear fc1(384, 1536), narrow(768, 192);
  const auto tokens = torch::randn({1, 197, 384}), wide_tokens = torch::randn({1, 197, 768});
  const auto gelu = [](const torch::Tensor& columns) { return torch::gelu(columns); };
  // |x| |W|^T + |b|: each output's sum of absolute terms, times n u for float32.
  const auto bound = [](torch::nn::Linear& layer, const torch::Tensor& x) {
    return (torch::matmul(x.abs(), layer->weight.abs().t()) + layer->bias.abs()) * (x.size(-1) * 6e-8);
  };
  torch::Tensor expected, expected_narrow, tolerance, tolerance_narrow;
  {
    torch::NoGradGuard no_graph;
    expected = torch::gelu(fc1->forward(tokens));
    expected_narrow = narrow->forward(wide_tokens);
    tolerance = bound(fc1, tokens);
    tolerance_narrow = bound(narrow, wide_tokens);
  }
  c10::InferenceMode inference_mode;
  EXPECT_TRUE(splits_by_columns(197, tokens, fc1->weight));
  const auto split = token_linear(fc1, tokens, gelu);
  ASSERT_EQ(split.sizes(), expected.sizes());
  // GELU's slope is at most 1.13.
  EXPECT_TRUE(((split - expected).abs() <= 1.13 * tolerance).all().item<bool>())
      << (split - expected).abs().max().item<double>();
  // 96 columns a core (DeiT-Tiny's fc2), more than kColumnSplitMaxRows rows, one core, or inside a
  // parallel region: all cores on whole rows, as before.
  EXPECT_FALSE(splits_by_columns(197, wide_tokens, narrow->weight));
  EXPECT_FALSE(splits_by_columns(kColumnSplitMaxRows + 1, tokens, fc1->weight));
  EXPECT_TRUE(((token_linear(narrow, wide_tokens) - expected_narrow).abs() <= tolerance_narrow).all().item<bool>());
  std::atomic<int> split_inside{0};
  for_each_row_chunk(2, [&](int64_t, int64_t) { split_inside += splits_by_columns(197, tokens, fc1->weight); });
  EXPECT_EQ(split_inside, 0);
  configure_threads(1);
  EXPECT_FALSE(splits_by_columns(197, tokens, fc1->weight));
  configure_threads(2);
}

// The linear layers' GEMM writes into the caller's memory (oneDNN's sgemm where LibTorch's oneDNN
// exports it): a block of a wider output's columns, rows given transposed or as a strided slice,
// one row, no bias, a weight given transposed. Each against a float64 reference, bounded by
// float32's conditioning; the columns around the block keep what they held.
TEST(Engine, LinearLayersWriteIntoBlocksOfTheirOutput) {
  configure_threads(2);
  torch::manual_seed(43);
  torch::nn::Linear with_bias(384, 300), without_bias(torch::nn::LinearOptions(384, 300).bias(false));
  const auto reference = [](const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
    auto exact = torch::matmul(x.to(torch::kDouble), weight.to(torch::kDouble).t());
    auto absolute = torch::matmul(x.abs().to(torch::kDouble), weight.abs().to(torch::kDouble).t());
    if (bias.defined()) {
      exact = exact + bias.to(torch::kDouble);
      absolute = absolute + bias.abs().to(torch::kDouble);
    }
    return std::make_pair(exact, absolute * (x.size(-1) * 6e-8));
  };
  const auto within = [](const torch::Tensor& got, const std::pair<torch::Tensor, torch::Tensor>& expected) {
    return ((got.to(torch::kDouble) - expected.first).abs() <= expected.second).all().item<bool>();
  };
  c10::InferenceMode inference_mode;
  const auto rows = torch::randn({197, 384});
  const auto transposed_rows = torch::randn({384, 197}).t();
  const auto strided_rows = torch::randn({197, 400}).narrow(1, 7, 384);
  const auto one_row = torch::randn({3, 384}).narrow(0, 1, 1);
  for (torch::nn::Linear* layer : {&with_bias, &without_bias}) {
    const auto& weight = (*layer)->weight;
    const auto& bias = (*layer)->bias;
    for (const torch::Tensor& x : {rows, transposed_rows, strided_rows, one_row}) {
      auto wide = torch::full({x.size(0), 310}, 7.0f);
      auto block = wide.narrow(1, 5, 300);
      rows_linear_into(block, *layer, x);
      EXPECT_TRUE(within(block, reference(x, weight, bias))) << "rows " << x.sizes() << " strides " << x.strides();
      EXPECT_TRUE(wide.narrow(1, 0, 5).eq(7.0f).all().item<bool>());
      EXPECT_TRUE(wide.narrow(1, 305, 5).eq(7.0f).all().item<bool>());
    }
  }
  // A weight given as the transpose of its [C_in, C_out] storage, split by columns.
  const auto stored = torch::randn({384, 512}) * 0.05;
  const auto weight = stored.t();
  const auto bias = torch::randn({512});
  ASSERT_TRUE(splits_by_columns(197, rows, weight));
  EXPECT_TRUE(within(token_linear(weight, bias, rows), reference(rows, weight, bias)));
  // Where LibTorch's oneDNN exports its sgemm and oneDNN was chosen, the layers take it; an output
  // that is its own input still gets the product of what the input held.
  if (linear_backend().onednn) {
    torch::nn::Linear square(384, 384);
    auto buffer = torch::randn({197, 384});
    const auto expected = reference(buffer, square->weight, square->bias);
    rows_linear_into(buffer, square, buffer);
    EXPECT_TRUE(within(buffer, expected));
    void* onednn = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (onednn && dlsym(onednn, "dnnl_sgemm")) {
      EXPECT_NE(linear_backend_line().find("oneDNN's sgemm"), std::string::npos) << linear_backend_line();
    }
    if (onednn) dlclose(onednn);
  }
}

// A ViT-S-wide model at 197 tokens runs its blocks on the column-split path (every linear layer
// split by output columns, the rest on one core) without autograd: the plain graph's logits and
// captured activations, for softmax and for a linear kernel.
TEST(Engine, BlocksSplitByColumnsGiveThePlainGraph) {
  configure_threads(2);
  torch::manual_seed(17);
  VisionTransformer model(plain_vit_arch(/*embed_dim=*/256, /*depth=*/2, /*heads=*/4, /*patch_size=*/16,
                                         /*grid=*/14, /*num_classes=*/10));
  initialise_weights(*model.get());
  model->eval();
  const auto image = torch::randn({1, 3, 224, 224});
  {
    c10::InferenceMode inference_mode;
    ASSERT_TRUE(splits_by_columns(197, image, model->blocks[0]->as<BlockImpl>()->mlp->fc2->weight));
  }
  for (const Variant variant : {Variant::Native, Variant::Focused}) {
    SCOPED_TRACE(to_string(variant));
    AttentionSettings settings;
    settings.variant = variant;
    ForwardOutput plain;
    {
      torch::AutoGradMode with_graph(true);
      plain = model->forward(image, settings);
    }
    c10::InferenceMode inference_mode;
    const ForwardOutput split = model->forward(image, settings);
    const double scale = plain.logits.abs().max().item<double>();
    EXPECT_LT((split.logits - plain.logits.detach()).abs().max().item<double>(), 1e-5 * (1 + scale));
    for (size_t layer = 0; layer < split.layers.size(); ++layer) {
      const auto reference = plain.layers[layer].normed_input.detach();
      EXPECT_LT((split.layers[layer].normed_input - reference).abs().max().item<double>(), 1e-4) << "layer " << layer;
      EXPECT_LT((split.layers[layer].q - plain.layers[layer].q.detach()).abs().max().item<double>(),
                1e-4 * (1 + plain.layers[layer].q.abs().max().item<double>()))
          << "layer " << layer;
    }
  }
}

// libgomp keeps a thread's OpenMP team after its parallel region, for the next; release_openmp_team
// ends the team's threads (an idle team would keep the panels' team from spinning between its
// regions: models/cpu_threads.h). Counted in the process's threads.
TEST(Engine, AReleasedOpenmpTeamLeavesTheProcess) {
  configure_threads(2);
  const auto process_threads = [] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) count += entry.exists() ? 1 : 0;
    return count;
  };
  int before = 0, with_team = 0, released = 0;
  std::thread master([&] {
    before = process_threads();
    for_each_row_chunk(2, [](int64_t, int64_t) {});
    with_team = process_threads();
    release_openmp_team();
    released = process_threads();
    for (int wait = 0; wait < 100 && released > before; ++wait) {  // at most 1 s for the threads to go
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      released = process_threads();
    }
    release_openmp_team();  // a thread without a team: nothing happens
  });
  master.join();
  EXPECT_EQ(with_team, before + 1);
  EXPECT_EQ(released, before);
}

TEST(Engine, GradientsReachTheCapturedTokenActivations) {
  LoadedModel model = load_case_model("vit_softmax.safetensors", 2);
  const auto input = read_npy(kCaseDir + "softmax_cls.input.npy");
  const ForwardOutput output = model.vit().forward(input, AttentionSettings{});
  const auto top_class = output.logits.argmax(1).item<int64_t>();
  for (size_t layer = 0; layer < output.layers.size(); ++layer) {
    const auto& activations = output.layers[layer].normed_input;
    ASSERT_TRUE(activations.requires_grad());
    auto gradient = torch::autograd::grad({output.logits[0][top_class]}, {activations}, {}, /*retain_graph=*/true)[0];
    ASSERT_EQ(gradient.sizes(), activations.sizes());
    // Patch tokens influence the class token through attention in every block.
    EXPECT_GT(gradient.slice(1, 1).abs().sum().item<double>(), 0.0) << "layer " << layer;
  }
}

TEST(Engine, TokenLayoutComesFromTheModelAndTheInput) {
  c10::InferenceMode inference_mode;
  LoadedModel gap = load_case_model("vit_gap_fcnorm.safetensors", 4);
  auto layout = gap.vit().forward(torch::zeros({1, 3, 48, 80}), AttentionSettings{}).layout;
  EXPECT_EQ(layout.prefix_tokens(), 0);
  EXPECT_EQ(layout.grid_h, 48 / gap.vit_arch().patch_size);
  EXPECT_EQ(layout.grid_w, 80 / gap.vit_arch().patch_size);
  LoadedModel distilled = load_case_model("deit_distilled.safetensors", 3);
  layout = distilled.vit().forward(torch::zeros({1, 3, 64, 96}), AttentionSettings{}).layout;
  EXPECT_EQ(layout.prefix_tokens(), 2);
  EXPECT_EQ(layout.token_name(1), "dist");
  EXPECT_EQ(layout.token_name(2 + layout.grid_w + 1), "patch(1,1)");
  EXPECT_THROW(distilled.vit().forward(torch::zeros({1, 3, 65, 96}), AttentionSettings{}), std::invalid_argument);
}

TEST(Engine, WindowMaskKeepsPrefixTokensGlobal) {
  TokenLayout layout;
  layout.has_class_token = true;
  layout.grid_h = 5;
  layout.grid_w = 5;
  const auto allowed = window_mask(layout, 3, torch::kCPU);
  ASSERT_EQ(allowed.sizes(), torch::IntArrayRef({26, 26}));
  EXPECT_TRUE(allowed[0].all().item<bool>());
  EXPECT_TRUE(allowed.select(1, 0).all().item<bool>());
  EXPECT_TRUE(allowed[layout.patch_token(0, 0)][layout.patch_token(2, 2)].item<bool>());
  EXPECT_FALSE(allowed[layout.patch_token(0, 0)][layout.patch_token(0, 3)].item<bool>());
  EXPECT_TRUE(allowed[layout.patch_token(4, 4)][layout.patch_token(3, 3)].item<bool>());  // edge window is 2x2
  EXPECT_FALSE(allowed[layout.patch_token(4, 4)][layout.patch_token(2, 2)].item<bool>());
  EXPECT_FALSE(window_mask(layout, 5, torch::kCPU).defined());  // a window covering the grid is global
}

TEST(Engine, AnchorRegionsTileTheGridAndAverage) {
  for (auto [h, w, m] : {std::tuple{14, 14, 30}, std::tuple{7, 7, 5}, std::tuple{4, 7, 5}, std::tuple{3, 3, 9}}) {
    const auto pooling = anchor_pooling_matrix(h, w, m);
    ASSERT_EQ(pooling.sizes(), torch::IntArrayRef({m, h * w}));
    EXPECT_TRUE(torch::allclose(pooling.sum(1), torch::ones({m})));
    EXPECT_TRUE(((pooling > 0).sum(0) >= 1).all().item<bool>()) << "every patch belongs to some region";
  }
}

TEST(Engine, VariantsResolveAgainstTheModule) {
  LoadedModel model = load_case_model("vit_softmax.safetensors", 2);
  const auto& attention = *model.vit().blocks[0]->as<BlockImpl>()->attn;
  const TokenLayout layout = model.vit_arch().layout_for(112, 112);  // 7 x 7 grid
  AttentionSettings settings;
  settings.variant = Variant::Window;
  EXPECT_EQ(attention.resolve(settings, layout).window, 0) << "the default window 7 covers a 7x7 grid";
  settings.window = 3;
  EXPECT_EQ(attention.resolve(settings, layout).window, 3);
  settings.variant = Variant::Focused;
  const auto focused = attention.resolve(settings, layout);
  EXPECT_FALSE(focused.dwc) << "no DWC weights in a softmax checkpoint";
  EXPECT_FALSE(focused.native);
  EXPECT_NE(focused.describe().find("[swapped]"), std::string::npos);
  settings.variant = Variant::Anchor;
  settings.anchors = 500;
  EXPECT_EQ(attention.resolve(settings, layout).anchors, 49) << "never more anchors than patches";
}

// f_p at any p the options allow: float32 powers of the raw features overflow to inf at p >= 49
// (NaN maps); scaled by the largest entry first they match the float64 direct formula.
TEST(Engine, FocusIsFiniteAndExactAtLargeP) {
  const torch::Tensor x = torch::rand({1, 3, 20, 16}, torch::Generator(at::detail::createCPUGenerator(3))) * 8.0 + 1e-6;
  for (const double p : {3.0, 49.0, 60.0, 100.0})
    for (const FocusNorm norm : {FocusNorm::AllChannels, FocusNorm::PerHead}) {
      SCOPED_TRACE("p " + std::to_string(p));
      const torch::Tensor ours = focus(x, p, norm);
      ASSERT_TRUE(torch::isfinite(ours).all().item<bool>());
      // The direct formula in float64 is exact here (the squares of 8^100 fit a double).
      const torch::Tensor d = x.to(torch::kDouble);
      const std::vector<int64_t> dims =
          norm == FocusNorm::AllChannels ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{3};
      const torch::Tensor direct = d.pow(p) / d.pow(p).norm(2, dims, true) * d.norm(2, dims, true);
      EXPECT_LT((ours.to(torch::kDouble) - direct).abs().max().item<double>(),
                1e-4 * direct.abs().max().item<double>());
    }
  // The bundled FLatten model at p = 60: finite logits and rows.
  LoadedModel model = load_model(default_model_path(), {}, torch::kCPU);
  AppState state;
  AttentionSettings settings;
  settings.p = 60;
  const InferenceResult result = run_inference(
      model,
      prepare_model_input(load_image_rgb(default_image_path(), kDefaultMaxPixels), state.input_settings(), model),
      settings);
  EXPECT_TRUE(torch::isfinite(result.forward.logits).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(result.forward.layers.back().matrix(0, 0)).all().item<bool>());
}

}  // namespace test_engine
}  // namespace attnscope
