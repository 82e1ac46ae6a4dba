// The backbones researchers download in 2026, as timm hub folders (DINOv3 S and S+, EVA-02 S and B,
// Perception Encoder core, SigLIP 2, timm's CLIP) against an independent float64 reference written from
// timm's code: tests/python/reference_eva.py, tests/python/make_eva_cases.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/pool_attention.h"
#include "analysis/residual_stream.h"
#include "core/npy.h"
#include "models/arch_config.h"
#include "models/model_loader.h"
#include "models/rotary.h"
#include "tests/cli_process.h"
#include "tests/numeric_bounds.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_backbones_2026 {

const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/eva_cases/";

nlohmann::json read_cases() {
  std::ifstream in(kFolder + "cases.json");
  if (!in) throw std::runtime_error("missing " + kFolder + "cases.json (tests/python/make_eva_cases.py)");
  return nlohmann::json::parse(in);
}

double largest(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// A case's forward on its input against the reference's files: the output within 1e-5 of its
// largest value (float32 against float64 through a few blocks), every layer's rows of the case's
// queries and the attention pool's rows (when the case has a pool) within 2e-5.
ForwardOutput expect_case_matches(LoadedModel& model, const nlohmann::json& c) {
  const auto input = read_npy(kFolder + c.at("input").get<std::string>());
  c10::InferenceMode inference_mode;
  ForwardOutput output = model.forward(input, AttentionSettings{});
  EXPECT_EQ(output.layout.prefix_tokens(), c["prefix"].get<int>());
  const auto expected = read_npy(kFolder + c.at("output").get<std::string>());
  EXPECT_EQ(output.logits.sizes(), expected.sizes());
  if (output.logits.sizes() == expected.sizes()) {
    EXPECT_LT(max_abs_difference(output.logits, expected), 1e-5 * largest(expected)) << "output";
  }
  const auto rows = read_npy(kFolder + c.at("rows").get<std::string>());
  const auto queries = c.at("queries").get<std::vector<int64_t>>();
  EXPECT_EQ(rows.size(0), int64_t(output.layers.size()));
  for (int64_t layer = 0; layer < std::min<int64_t>(rows.size(0), int64_t(output.layers.size())); ++layer)
    for (int64_t head = 0; head < rows.size(1); ++head)
      EXPECT_LT(max_abs_difference(output.layers[size_t(layer)].rows(0, head, queries), rows[layer][head]), 2e-5)
          << "rows of layer " << layer << " head " << head;
  if (c.at("pool").is_string()) {
    EXPECT_FALSE(output.pool_attention.empty()) << "where the pooling head pools from";
    if (!output.pool_attention.empty()) {
      const torch::Tensor& pool = output.pool_attention.back().probabilities;
      EXPECT_EQ(pool.size(2), c.at("pool_tokens").get<int64_t>());
      EXPECT_LT(max_abs_difference(pool[0], read_npy(kFolder + c.at("pool").get<std::string>())), 2e-5)
          << "the pooling head's rows";
    }
  } else {
    EXPECT_TRUE(output.pool_attention.empty());
  }
  if (c.contains("class_attention")) {  // CaiT: every class-attention block's rows
    const auto expected = read_npy(kFolder + c.at("class_attention").get<std::string>());
    EXPECT_EQ(int64_t(output.pool_attention.size()), expected.size(0));
    for (int64_t block = 0; block < std::min<int64_t>(expected.size(0), int64_t(output.pool_attention.size()));
         ++block) {
      EXPECT_EQ(output.pool_attention[size_t(block)].name, "blocks_token_only." + std::to_string(block) + ".attn");
      EXPECT_LT(max_abs_difference(output.pool_attention[size_t(block)].probabilities[0], expected[block]), 2e-5)
          << "class attention of block " << block;
    }
  }
  return output;
}

TEST(Backbones2026, EveryRegisteredFamilyMatchesTimm) {
  configure_threads(2);
  const auto cases = read_cases();
  ASSERT_GE(cases.size(), 12u);
  std::set<std::string> ropes, pools;
  for (const auto& c : cases) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    const VitArch& arch = model.vit_arch();
    EXPECT_EQ(arch.heads, c.at("heads").get<int>());
    EXPECT_EQ(to_string(arch.rope.kind), c.at("rope").get<std::string>());
    EXPECT_EQ(to_string(arch.pool), c.at("global_pool").get<std::string>());
    EXPECT_DOUBLE_EQ(arch.layer_norm_eps, c.at("eps").get<double>()) << "the registered name's LayerNorm eps";
    if (c.at("architecture").is_string()) {
      EXPECT_EQ(model.architecture, c.at("architecture").get<std::string>());
    }
    ropes.insert(to_string(arch.rope.kind));
    pools.insert(to_string(arch.pool));
    const ForwardOutput output = expect_case_matches(model, c);
    EXPECT_EQ(output.layout.grid_h, c["grid"][0].get<int>());
    EXPECT_EQ(output.layout.grid_w, c["grid"][1].get<int>());
  }
  EXPECT_EQ(ropes, (std::set<std::string>{"none", "axial", "dinov3"}));
  EXPECT_EQ(pools, (std::set<std::string>{"token", "avg", "map"}));
}

// The same kinds of model in their authors' own layouts: transformers' DINOv3 (one file, and a gated
// MLP in bfloat16 split into two shards by an index), Meta's DINOv3 .pth (k-masked qkv bias, the file's
// rotary periods, SwiGLU w1/w2/w3), transformers' SiglipModel, DINOv2's fused SwiGLU (w12, w3), open_clip
// folders (its own ViT in OpenAI's keys with GELU and head_width; a timm trunk named in its config).
TEST(Backbones2026, EveryLayoutMatchesItsAuthorsForward) {
  configure_threads(2);
  std::ifstream in(kFolder + "layout_cases.json");
  ASSERT_TRUE(in) << "missing layout_cases.json";
  const auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 10u);
  std::set<std::string> layouts;
  for (const auto& c : cases) {
    if (c.value("swin", false)) continue;  // Swin V2: its own test below
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    EXPECT_EQ(to_string(model.vit_arch().source_layout), c.at("layout").get<std::string>());
    layouts.insert(to_string(model.vit_arch().source_layout));
    EXPECT_EQ(model.vit_arch().heads, c.at("heads").get<int>());
    expect_case_matches(model, c);
  }
  EXPECT_EQ(layouts, (std::set<std::string>{"hf-dinov3", "dinov3", "hf-siglip", "dinov2", "open-clip"}));
}

// Swin V2 (cosine attention, the continuous position bias, post-norm, merging then norm) against a
// reference written from timm's swin_transformer_v2.py: the output, and in every block the first
// window's rows of its first, middle and last query over the window's keys.
TEST(Backbones2026, SwinV2MatchesTimm) {
  configure_threads(2);
  std::ifstream in(kFolder + "layout_cases.json");
  const auto cases = nlohmann::json::parse(in);
  int seen = 0;
  for (const auto& c : cases) {
    if (!c.value("swin", false)) continue;
    ++seen;
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    EXPECT_EQ(model.backbone->family(), "swin-v2");
    const auto input = read_npy(kFolder + c.at("input").get<std::string>());
    c10::InferenceMode inference_mode;
    const ForwardOutput output = model.forward(input, AttentionSettings{});
    const auto expected = read_npy(kFolder + c.at("output").get<std::string>());
    ASSERT_EQ(output.logits.sizes(), expected.sizes());
    EXPECT_LT(max_abs_difference(output.logits, expected), 1e-5 * largest(expected)) << "output";
    // With a hook the blocks run whole instead of by window chunks (the path gradients take).
    ForwardOptions hooked;
    int norms_seen = 0;
    hooked.hook = [&](const HookPoint& point, torch::Tensor&) { norms_seen += point.name == "norm"; };
    EXPECT_LT(max_abs_difference(model.forward(input, AttentionSettings{}, hooked).logits, expected),
              1e-5 * largest(expected))
        << "output, whole blocks";
    EXPECT_EQ(norms_seen, 1);
    ASSERT_EQ(int64_t(output.layers.size()), c.at("blocks").get<int64_t>());
    int stage_block = 0, last_grid = 0;
    for (size_t b = 0; b < output.layers.size(); ++b) {
      const AttentionCapture& layer = output.layers[b];
      const int grid = layer.layout.grid_h, window = std::min(grid, 8);
      stage_block = grid == last_grid ? stage_block + 1 : 0;
      last_grid = grid;
      const int shift = stage_block % 2 == 1 && grid > 8 ? 4 : 0;
      // Window 0 of the rolled frame: slot (i, j) is token ((i + shift) % H, (j + shift) % W).
      std::vector<int64_t> tokens;
      for (int i = 0; i < window; ++i)
        for (int j = 0; j < window; ++j) tokens.push_back(int64_t((i + shift) % grid) * grid + (j + shift) % grid);
      const int64_t area = int64_t(tokens.size());
      const std::vector<int64_t> queries{tokens[0], tokens[size_t(area / 2)], tokens[size_t(area - 1)]};
      const auto reference = read_npy(kFolder + c.at("window_rows").get<std::string>() + std::to_string(b) + ".npy");
      const auto key_index = torch::tensor(tokens);
      for (int64_t head = 0; head < reference.size(0); ++head) {
        const torch::Tensor rows = layer.rows(0, head, queries).index_select(1, key_index);
        EXPECT_LT(max_abs_difference(rows, reference[head]), 2e-5) << "block " << b << " head " << head;
      }
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST(Backbones2026, ShardIndicesAreCheckedBeforeAnythingIsRead) {
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() / "attnscope_shards";
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  for (const auto& entry : std::filesystem::directory_iterator(kFolder + "hf_dinov3_sharded"))
    std::filesystem::copy_file(entry.path(), scratch / entry.path().filename());
  const std::string index = (scratch / "model.safetensors.index.json").string();
  nlohmann::json map;
  std::ifstream(index) >> map;
  auto expect_refusal = [&](const nlohmann::json& changed, const std::string& words) {
    std::ofstream(index) << changed.dump();
    try {
      load_model(scratch.string(), {}, torch::kCPU);
      ADD_FAILURE() << "loaded with " << words;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  nlohmann::json outside = map;
  outside["weight_map"]["norm.weight"] = "../model-00001-of-00002.safetensors";
  expect_refusal(outside, "outside the folder");
  nlohmann::json missing = map;
  missing["weight_map"]["norm.weight"] = "model-00003-of-00003.safetensors";
  expect_refusal(missing, "is missing beside it");
  nlohmann::json wrong = map;
  const std::string moved = wrong["weight_map"]["norm.weight"] == "model-00001-of-00002.safetensors"
                                ? "model-00002-of-00002.safetensors"
                                : "model-00001-of-00002.safetensors";
  wrong["weight_map"]["norm.weight"] = moved;
  expect_refusal(wrong, "is not in its shard");
  std::ofstream(index) << "{\"weight_map\": 3}";
  EXPECT_THROW(load_model(scratch.string(), {}, torch::kCPU), CheckpointError);
  std::filesystem::remove_all(scratch);
}

TEST(Backbones2026, WhatTheBareFileCannotShowIsSaid) {
  LoadedModel model = load_model(kFolder + "dinov3_s16_bare", {}, torch::kCPU);
  std::set<std::string> assumed;
  for (const ArchAssumption& one : model.report.assumed) assumed.insert(one.key);
  EXPECT_TRUE(assumed.count("rope_type")) << "DINOv3's rotary settings, taken from its keys' shape";
  EXPECT_TRUE(assumed.count("img_size")) << "no pos_embed shows the training grid";
  EXPECT_EQ(model.vit_arch().rope.kind, RotaryKind::DinoV3);
  EXPECT_DOUBLE_EQ(model.vit_arch().rope.temperature, 100.0);
  // Meta's files do not record their LayerNorm eps either: the released models' is taken, and said.
  LoadedModel meta = load_model(kFolder + "meta_dinov3.pth", {}, torch::kCPU);
  bool eps_assumed = false;
  for (const ArchAssumption& one : meta.report.assumed) eps_assumed = eps_assumed || one.key == "eps";
  EXPECT_TRUE(eps_assumed);
  EXPECT_FALSE(meta.vit_arch().rope.periods.empty()) << "the file's own rotary periods";
  LoadedModel given = load_model(kFolder + "meta_dinov3.pth", ArchOverrides::parse("eps=1e-6"), torch::kCPU);
  for (const ArchAssumption& one : given.report.assumed) EXPECT_NE(one.key, "eps") << "given, so not assumed";
}

TEST(Backbones2026, ARegisteredNameThatDisagreesWithTheWeightsIsRefused) {
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() / "attnscope_backbones_2026";
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  std::filesystem::copy_file(kFolder + "dinov3_s16/model.safetensors", scratch / "model.safetensors");
  auto write_config = [&](const nlohmann::json& config) { std::ofstream(scratch / "config.json") << config.dump(); };
  // The released S/16 is 384 wide; these weights are 64: the name is another model's.
  write_config({{"architecture", "vit_small_patch16_dinov3"}});
  try {
    load_model(scratch.string(), {}, torch::kCPU);
    ADD_FAILURE() << "loaded";
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("embed_dim 384"), std::string::npos) << message;
    EXPECT_NE(message.find("embed_dim 64"), std::string::npos) << message;
  }
  // A rotary kind attnscope does not compute is named, not run as another.
  write_config({{"architecture", "vit_small_patch16_dinov3"},
                {"model_args", {{"embed_dim", 64}, {"depth", 2}, {"num_heads", 4}, {"rope_type", "mixed"}}}});
  EXPECT_THROW(load_model(scratch.string(), {}, torch::kCPU), CheckpointError);
  // global_pool map without the attention-pool head's weights.
  write_config({{"architecture", "vit_small_patch16_dinov3"},
                {"model_args", {{"embed_dim", 64}, {"depth", 2}, {"num_heads", 4}, {"global_pool", "map"}}}});
  try {
    load_model(scratch.string(), {}, torch::kCPU);
    ADD_FAILURE() << "loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("attn_pool"), std::string::npos) << e.what();
  }
  // --arch global_pool=token reads the class token, as DINOv3's own code does: another output.
  write_config({{"architecture", "vit_small_patch16_dinov3"},
                {"model_args", {{"embed_dim", 64}, {"depth", 2}, {"num_heads", 4}}}});
  LoadedModel averaged = load_model(scratch.string(), {}, torch::kCPU);
  LoadedModel token = load_model(scratch.string(), ArchOverrides::parse("global_pool=token"), torch::kCPU);
  EXPECT_EQ(token.vit_arch().pool, GlobalPool::Token);
  const auto input = torch::randn({1, 3, 32, 48});
  c10::InferenceMode inference_mode;
  EXPECT_GT(max_abs_difference(averaged.forward(input, {}).logits, token.forward(input, {}).logits), 1e-3);
  std::filesystem::remove_all(scratch);
}

TEST(Backbones2026, KernelSwapsActOnRotatedQueriesAndKeys) {
  LoadedModel model = load_model(kFolder + "eva02_s14", {}, torch::kCPU);
  const auto input = read_npy(kFolder + "eva02_s14.70x42.input.npy");
  c10::InferenceMode inference_mode;
  AttentionSettings linear;
  linear.variant = Variant::Linear;
  const ForwardOutput swapped = model.forward(input, linear);
  const ForwardOutput native = model.forward(input, AttentionSettings{});
  ASSERT_EQ(swapped.layers.size(), native.layers.size());
  // The captured q is the rotated one: rotating the model's own q of a patch again by the table
  // would change it, and the swapped layer's q equals the native layer's (the kernel changes later).
  EXPECT_LT(max_abs_difference(swapped.layers[0].q, native.layers[0].q), 1e-6);
  const torch::Tensor row = swapped.layers[1].rows(0, 0, {5})[0];
  EXPECT_NEAR(row.sum().item<double>(), 1.0, 1e-4) << "a linear kernel's normalised row";
  EXPECT_GT(max_abs_difference(swapped.logits, native.logits), 1e-4);
}

TEST(Backbones2026, BeitsRelativeBiasRunsAtItsTrainedGridAndSaysSoElsewhere) {
  LoadedModel model = load_model(kFolder + "beitv2_b16", {}, torch::kCPU);
  ASSERT_EQ(model.vit_arch().blocks.front().attention.relative_bias_grid_h, 4);
  c10::InferenceMode inference_mode;
  try {
    model.forward(torch::randn({1, 3, 80, 64}), AttentionSettings{});
    ADD_FAILURE() << "ran BEiT's 4x4 bias table on a 5x4 grid";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("64x64"), std::string::npos) << e.what();
  }
  // A kernel without scores to bias (linear) runs without it; softmax rows carry it.
  AttentionSettings linear;
  linear.variant = Variant::Linear;
  const auto input = torch::randn({1, 3, 64, 64});
  const ForwardOutput swapped = model.forward(input, linear);
  const ForwardOutput native = model.forward(input, AttentionSettings{});
  EXPECT_FALSE(swapped.layers[0].additive.defined());
  ASSERT_TRUE(native.layers[0].additive.defined());
  EXPECT_NEAR(native.layers[0].rows(0, 1, {0})[0].sum().item<double>(), 1.0, 1e-5);
}

TEST(Backbones2026, RunWritesWhereTheAttentionPoolLooks) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_pool_run";
  std::filesystem::remove_all(out);
  testing::CliRequest request({"run", "--model", kFolder + "pe_core_s16", "--image",
                               std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--out", out.string()});
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  const torch::Tensor pool = read_npy((out / "pool_attention.npy").string());
  ASSERT_EQ(pool.sizes(), (std::vector<int64_t>{8, 17})) << "PE's 8 pool heads over its class token and 16 patches";
  EXPECT_LT(max_abs_difference(pool.sum(1), torch::ones({8})), 1e-5);
  EXPECT_TRUE(std::filesystem::exists(out / "pool_overlay.png"));
  std::ifstream in(out / "summary.json");
  EXPECT_EQ(nlohmann::json::parse(in).at("pool_attention").at("prefix_tokens_read"), 1);
  std::filesystem::remove_all(out);
}

// The pool view (analysis/pool_attention.h): each head's row on the patch grid, the prefix's share,
// and `analyze --analysis pool` writing them; a model that reads a token is refused naming why.
TEST(Backbones2026, PoolViewIsThePoolsRowsOnThePatchGrid) {
  std::ifstream in(kFolder + "cases.json");
  const auto cases = nlohmann::json::parse(in);
  std::set<int> prefixes;
  for (const auto& c : cases) {
    if (!c.at("pool").is_string()) continue;
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_model(kFolder + c.at("model").get<std::string>(), {}, torch::kCPU);
    const ForwardOutput output =
        model.forward(read_npy(kFolder + c.at("input").get<std::string>()), AttentionSettings{});
    const PoolMaps maps = pool_maps(features_pool(output.pool_attention, model.family()), output.layout);
    const torch::Tensor rows = read_npy(kFolder + c.at("pool").get<std::string>());  // [h, N], the reference's
    const int gh = c.at("grid")[0].get<int>(), gw = c.at("grid")[1].get<int>();
    const int64_t prefix = rows.size(1) - int64_t(gh) * gw;
    prefixes.insert(maps.prefix_tokens);
    EXPECT_EQ(maps.prefix_tokens, prefix);
    ASSERT_EQ(maps.heads.sizes(), (std::vector<int64_t>{rows.size(0), gh, gw}));
    EXPECT_LT(max_abs_difference(maps.heads, rows.narrow(1, prefix, int64_t(gh) * gw).reshape({-1, gh, gw})), 2e-5);
    EXPECT_LT(max_abs_difference(maps.mean, maps.heads.mean(0)), 1e-7);
    if (prefix > 0) {
      EXPECT_LT(max_abs_difference(maps.prefix_share, rows.narrow(1, 0, prefix).sum(1)), 2e-5);
    }
  }
  EXPECT_EQ(prefixes, (std::set<int>{0, 1})) << "SigLIP reads the patches alone, PE and CaiT the class token too";

  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_pool_view";
  std::filesystem::remove_all(out);
  const std::string image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  testing::CliRequest request(
      {"analyze", "--analysis", "pool", "--model", kFolder + "pe_core_s16", "--image", image, "--out", out.string()});
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  EXPECT_EQ(read_npy((out / "pool_heads.npy").string()).sizes(), (std::vector<int64_t>{8, 4, 4}));
  EXPECT_TRUE(std::filesystem::exists(out / "pool.png"));
  std::ifstream summary_file(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_file);
  EXPECT_EQ(summary.at("layer"), "attn_pool");
  EXPECT_EQ(summary.at("prefix_tokens_read"), 1);
  std::filesystem::remove_all(out);
  // An analysis's figure takes the width asked for (a journal's single column), as an export does.
  testing::CliRequest single({"analyze", "--analysis", "pool", "--model", kFolder + "pe_core_s16", "--image", image,
                              "--width-pt", "single", "--dpi", "144", "--out", out.string()});
  ASSERT_EQ(testing::run_cli_process(single).exit_code, 0);
  std::ifstream manifest_file(out / "pool.png.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  EXPECT_NEAR(manifest.at("size_pt")[0].get<double>(), 234.0, 1.0);
  EXPECT_NEAR(manifest.at("png_size_px")[0].get<double>(), 468.0, 2.0) << "144 dpi: two pixels a point";
  EXPECT_GE(manifest.at("font_pt").get<double>(), 6.0);
  std::filesystem::remove_all(out);
  const CommandRun refused = run_attnscope("analyze --analysis pool --model '" + kFolder + "dinov3_s16' --image '" +
                                               image + "' --out '" + out.string() + "'",
                                           std::filesystem::temp_directory_path());
  EXPECT_NE(refused.err.find("not by attention"), std::string::npos) << refused.err;
  std::filesystem::remove_all(out);
}

TEST(Backbones2026, RotaryTablesFollowTheirKinds) {
  RotaryArch dinov3;
  dinov3.kind = RotaryKind::DinoV3;
  dinov3.temperature = 100.0;
  const auto table = rotary_table(dinov3, 2, 3, 8, torch::kCPU);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{6, 16}));
  // Cell (0, 0) sits at (-1/2, -2/3) on [-1, 1]; the first band's period is 1.
  EXPECT_NEAR(table[0][0].item<double>(), std::sin(2 * M_PI * -0.5), 1e-6);
  EXPECT_NEAR(table[0][2].item<double>(), std::sin(2 * M_PI * (-2.0 / 3.0)), 1e-6);
  EXPECT_NEAR(table[0][4].item<double>(), table[0][0].item<double>(), 1e-7) << "the half layout tiles";
  EXPECT_THROW(rotary_table(dinov3, 2, 3, 6, torch::kCPU), std::invalid_argument);
}

TEST(Backbones2026, DirectLogitAttributionIsRefusedThroughAnAttentionPool) {
  LoadedModel siglip = load_model(kFolder + "siglip2_b16", {}, torch::kCPU);
  LoadedModel dinov3 = load_model(kFolder + "dinov3_s16", {}, torch::kCPU);
  const auto image = torch::randn({1, 3, 64, 64});
  auto attribution = [&](LoadedModel& model) {
    auto& vit = *std::dynamic_pointer_cast<VisionTransformerImpl>(model.backbone);
    const TokenLayout layout = vit.arch().layout_for(64, 64);
    const ResidualRun run = record_residual_stream(vit, image, AttentionSettings{}, readout_recording(vit, layout));
    return direct_logit_attribution(vit, run, ReadoutTarget::output_norm());
  };
  try {
    attribution(siglip);
    ADD_FAILURE() << "attributed through an attention pool";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention-pool"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(attribution(dinov3)) << "an average of the normed patches reads linearly";
}

// CaiT: its talking heads run softmax over all tokens only (a swap is refused naming them); the class
// token that its class-attention blocks compute is no linear read-out of the stream (DLA refused), and
// `run` writes every class-attention block's attention.
TEST(Backbones2026, CaitsClassAttentionIsALayerOfItsOwn) {
  LoadedModel cait = load_model(kFolder + "cait_xxs24", {}, torch::kCPU);
  EXPECT_EQ(cait.family(), "cait");
  const auto image = torch::randn({1, 3, 64, 64});
  AttentionSettings linear;
  linear.variant = Variant::Linear;
  try {
    cait.forward(image, linear);
    ADD_FAILURE() << "a kernel swap ran through talking heads";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("talking heads"), std::string::npos) << e.what();
  }
  auto& vit = *std::dynamic_pointer_cast<VisionTransformerImpl>(cait.backbone);
  const TokenLayout layout = vit.arch().layout_for(64, 64);
  EXPECT_EQ(layout.prefix_tokens(), 0) << "the blocks' stream holds the patches alone";
  const ResidualRun run = record_residual_stream(vit, image, AttentionSettings{}, readout_recording(vit, layout));
  try {
    direct_logit_attribution(vit, run, ReadoutTarget::output_norm());
    ADD_FAILURE() << "attributed through class-attention blocks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("class-attention"), std::string::npos) << e.what();
  }
  // The read-out of the last block's output is the forward's own output.
  c10::InferenceMode inference_mode;
  const ForwardOutput output = cait.forward(image, AttentionSettings{});
  EXPECT_LT(max_abs_difference(vit.read_out(run.record.resid_final, layout), output.logits), 1e-5);

  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnscope_cait_run";
  std::filesystem::remove_all(out);
  testing::CliRequest request({"run", "--model", kFolder + "cait_xxs24", "--image",
                               std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--out", out.string()});
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  const torch::Tensor all = read_npy((out / "class_attention.npy").string());
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{2, 4, 17})) << "2 blocks, 4 heads, the class token and 16 patches";
  EXPECT_LT(max_abs_difference(all[1], read_npy((out / "pool_attention.npy").string())), 1e-7);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary.at("pool_attention").at("layer"), "blocks_token_only.1.attn");
  EXPECT_EQ(summary.at("pool_attention").at("prefix_tokens_read"), 1);
  std::filesystem::remove_all(out);
}

}  // namespace test_backbones_2026
}  // namespace attnscope
