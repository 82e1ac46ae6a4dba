// SAE features on a model (analysis/sae_features.h, models/sparse_autoencoder.h): the hook points
// read what the residual-stream record keeps, an empty intervention leaves the model exactly as it
// was, switching a feature off or adding one changes the stream by exactly its decoder row, the
// folder pass keeps each feature's top images and goes on from what it saved, and the command line
// writes the files and refuses what does not fit.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/sae_features.h"
#include "core/assets.h"
#include "core/image.h"
#include "core/npy.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "models/sae_training.h"
#include "tests/cli_process.h"
#include "tests/random_vit.h"

namespace attnscope {
namespace test_sae_features {

namespace fs = std::filesystem;

fs::path scratch(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("attnscope-sae-features-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A random TopK SAE on the random ViT's width 64, written as SAELens writes one, reading `hook`.
std::string random_sae(const fs::path& dir, const std::string& hook, uint64_t seed) {
  torch::manual_seed(seed);
  SparseAutoencoder sae;
  sae.activation = SaeActivation::TopK;
  sae.kind = "topk";
  sae.d_in = 64;
  sae.d_sae = 128;
  sae.k = 6;
  sae.W_enc = torch::randn({64, 128}) * 0.3;
  sae.b_enc = torch::randn({128}) * 0.1;
  sae.W_dec = torch::randn({128, 64});
  sae.W_dec = sae.W_dec / sae.W_dec.norm(2, 1, true);
  sae.b_dec = torch::randn({64}) * 0.1;
  save_saelens_folder(sae, dir.string(), {{"hook_name", hook}});
  return dir.string();
}

torch::Tensor random_image(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn({1, 3, 32, 32});
}

// Probes at every point of every block: what each saw.
std::map<std::string, torch::Tensor> probe_everything(VisionTransformerImpl& model, const torch::Tensor& image,
                                                      const AttentionSettings& settings,
                                                      const StreamRecording& recording, ResidualStreamRecord* record) {
  std::map<std::string, torch::Tensor> seen;
  StreamEdits probes;
  for (int layer = 0; layer < model.arch().depth; ++layer)
    for (StreamSite site :
         {StreamSite::ResidPre, StreamSite::AttnOut, StreamSite::ResidMid, StreamSite::MlpOut, StreamSite::ResidPost}) {
      const StreamPoint point{layer, site};
      probes.transforms.push_back({point, [&seen, point](const torch::Tensor& value) {
                                     seen[stream_point_name(point)] = value.clone();
                                     return value;
                                   }});
    }
  model.forward_with_streams(image, settings, {}, probes, recording, record);
  return seen;
}

TEST(SaeFeatures, HookPointsReadWhatTheResidualRecordKeeps) {
  c10::InferenceMode inference_mode;
  VisionTransformer model = random_vit(4, 7);
  StreamRecording recording;
  recording.resid_pre = true;
  recording.components = true;
  ResidualStreamRecord record;
  const auto seen = probe_everything(*model, random_image(1), {}, recording, &record);
  ASSERT_EQ(seen.size(), 10u);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string block = "blocks." + std::to_string(layer) + ".";
    EXPECT_TRUE(torch::equal(seen.at(block + "hook_resid_pre"), record.resid_pre[size_t(layer)]));
    EXPECT_TRUE(torch::equal(seen.at(block + "hook_attn_out"), record.attn_out[size_t(layer)]));
    EXPECT_TRUE(torch::equal(seen.at(block + "hook_mlp_out"), record.mlp_out[size_t(layer)]));
    EXPECT_TRUE(torch::allclose(seen.at(block + "hook_resid_mid"),
                                record.resid_pre[size_t(layer)] + record.attn_out[size_t(layer)], 0, 1e-6));
  }
  EXPECT_TRUE(torch::equal(seen.at("blocks.0.hook_resid_post"), record.resid_pre[1]));
  EXPECT_TRUE(torch::equal(seen.at("blocks.1.hook_resid_post"), record.resid_final));
  // The same points by name, as SAE files and --sae-hook give them.
  EXPECT_EQ(parse_stream_point("blocks.1").site, StreamSite::ResidPost);
  EXPECT_EQ(parse_stream_point("blocks.12.hook_mlp_out").layer, 12);
  EXPECT_THROW(parse_stream_point("blocks.1.ln2.hook_normalized"), std::invalid_argument);
  EXPECT_THROW(parse_stream_point("blocks.x.hook_resid_post"), std::invalid_argument);
}

TEST(SaeFeatures, InterventionsChangeTheStreamByExactlyTheirDecoderRows) {
  c10::InferenceMode inference_mode;
  const fs::path dir = scratch("intervene");
  VisionTransformer model = random_vit(4, 7);
  const torch::Tensor image = random_image(2);
  AttentionSettings settings;
  settings.sae.file = random_sae(dir, "blocks.0.hook_resid_post", 3);
  const auto sae = open_sparse_autoencoder(settings.sae.file);
  const auto plain = probe_everything(*model, image, {}, {}, nullptr);
  const torch::Tensor plain_logits = model->forward(image, {}).logits;

  // An empty intervention, applied as a transform: the model exactly as it was.
  StreamEdits empty;
  empty.transforms.push_back(sae_intervention(settings.sae, 2, 64));
  EXPECT_TRUE(torch::equal(model->forward_with_streams(image, {}, {}, empty, {}, nullptr).logits, plain_logits));

  // A feature that fires: switched off, the next block's input loses exactly f_i W_dec[i].
  const torch::Tensor x = plain.at("blocks.0.hook_resid_post")[0];
  const torch::Tensor features = sae->encode(x);
  const int feature = int((features > 0).sum(0).argmax().item<int64_t>());
  ASSERT_GT((features.select(1, feature) > 0).sum().item<int64_t>(), 0);
  settings.sae.off = {feature};
  const auto off = probe_everything(*model, image, settings, {}, nullptr);
  const torch::Tensor expected = x - features.select(1, feature).unsqueeze(1) * sae->W_dec[feature].unsqueeze(0);
  EXPECT_LE((off.at("blocks.1.hook_resid_pre")[0] - expected).abs().max().item<double>(), 1e-5);
  // The probe at the SAE's own point sees the stream before the intervention there.
  EXPECT_TRUE(torch::equal(off.at("blocks.0.hook_resid_post"), plain.at("blocks.0.hook_resid_post")));
  EXPECT_FALSE(torch::equal(model->forward(image, settings).logits, plain_logits));

  // Added with a scale: every token moves by scale x W_dec[i].
  settings.sae.off.clear();
  settings.sae.add = {{feature, 2.5}};
  const auto added = probe_everything(*model, image, settings, {}, nullptr);
  const torch::Tensor moved = added.at("blocks.1.hook_resid_pre")[0] - x;
  EXPECT_LE((moved - 2.5 * sae->W_dec[feature].unsqueeze(0)).abs().max().item<double>(), 1e-5);
  fs::remove_all(dir);
}

TEST(SaeFeatures, ImageReportFollowsItsDefinitions) {
  c10::InferenceMode inference_mode;
  const fs::path dir = scratch("report");
  VisionTransformer model = random_vit(4, 7);
  const auto sae = open_sparse_autoencoder(random_sae(dir, "blocks.1.hook_mlp_out", 4));
  const torch::Tensor image = random_image(5);
  const SaeImageReport report = sae_image_report(*model, *sae, "", image, {});
  EXPECT_EQ(stream_point_name(report.point), "blocks.1.hook_mlp_out");
  const auto plain = probe_everything(*model, image, {}, {}, nullptr);
  const torch::Tensor x = plain.at("blocks.1.hook_mlp_out")[0];
  EXPECT_TRUE(torch::equal(report.activations, x));
  EXPECT_TRUE(torch::equal(report.features, sae->encode(x)));
  const torch::Tensor x64 = x.to(torch::kDouble), x_hat = sae->decode(sae->encode(x), x).to(torch::kDouble);
  const double nmse = ((x64 - x_hat).pow(2).sum() / (x64 - x64.mean(0, true)).pow(2).sum()).item<double>();
  EXPECT_NEAR(report.normalised_mse, nmse, 1e-9 * (1 + nmse));
  EXPECT_LE(report.l0, 6.0);  // TopK with k = 6: at most six per token
  EXPECT_GT(report.l0, 0.0);
  const TokenTopFeatures top = top_features_per_token(report.features, 3);
  EXPECT_EQ(top.indices.sizes(), (std::vector<int64_t>{report.layout.total_tokens(), 3}));
  EXPECT_TRUE(torch::equal(report.features.gather(1, top.indices), top.values));
  // --sae-hook that disagrees with the file is refused; a point past the model's blocks too.
  EXPECT_THROW(sae_image_report(*model, *sae, "blocks.0.hook_mlp_out", image, {}), std::invalid_argument);
  fs::remove_all(dir);
}

// Synthetic images' features: the pass against a brute-force sort, and a pass stopped and resumed
// from its saved folder against one that ran through.
TEST(SaeFeatures, FolderPassKeepsEachFeaturesTopImagesAndGoesOnFromWhatItSaved) {
  SparseAutoencoder sae;
  sae.d_sae = 12;
  TokenLayout layout;
  layout.has_class_token = true;
  layout.grid_h = layout.grid_w = 3;
  torch::manual_seed(9);
  std::vector<SaeImageReport> reports(10);
  for (SaeImageReport& report : reports) {
    report.layout = layout;
    report.features = torch::relu(torch::randn({10, 12}));
    report.activations = torch::randn({10, 4});
    report.reconstruction = report.activations + 0.1 * torch::randn({10, 4});
  }
  const int k = 3;
  SaeFolderPass whole;
  whole.top.start(12, k);
  for (size_t i = 0; i < reports.size(); ++i) whole.add(int64_t(i), reports[i], sae);
  // Brute force: each feature's peak over the patch tokens (1..9) of each image, the k largest.
  torch::Tensor peaks = torch::empty({10, 12});
  for (int i = 0; i < 10; ++i) peaks[i] = std::get<0>(reports[size_t(i)].features.slice(0, 1).max(0));
  const auto [values, images] = peaks.t().topk(k, 1);
  EXPECT_TRUE(torch::equal(whole.top.values, values));
  EXPECT_TRUE(torch::equal(whole.top.images, images));
  EXPECT_EQ(whole.top.images_done, 10);

  const fs::path dir = scratch("pass");
  SaeFolderPass first;
  first.top.start(12, k);
  for (int i = 0; i < 6; ++i) first.add(i, reports[size_t(i)], sae);
  first.save(dir.string(), "key A");
  SaeFolderPass other;
  other.top.start(12, k);
  EXPECT_FALSE(other.load(dir.string(), "key B"));  // another pass's progress is not taken
  SaeFolderPass resumed;
  resumed.top.start(12, k);
  ASSERT_TRUE(resumed.load(dir.string(), "key A"));
  ASSERT_EQ(resumed.top.images_done, 6);
  for (int i = 6; i < 10; ++i) resumed.add(i, reports[size_t(i)], sae);
  EXPECT_TRUE(torch::equal(resumed.top.values, whole.top.values));
  EXPECT_TRUE(torch::equal(resumed.top.images, whole.top.images));
  EXPECT_TRUE(torch::equal(resumed.top.tokens, whole.top.tokens));
  EXPECT_TRUE(torch::equal(resumed.top.image_counts, whole.top.image_counts));
  EXPECT_DOUBLE_EQ(resumed.normalised_mse(), whole.normalised_mse());
  EXPECT_DOUBLE_EQ(resumed.l0(), whole.l0());
  // A damaged progress file starts over.
  std::ofstream(dir / "progress.json") << "{\"key\": \"key A\", \"done\": ";
  SaeFolderPass damaged;
  damaged.top.start(12, k);
  EXPECT_FALSE(damaged.load(dir.string(), "key A"));
  fs::remove_all(dir);
}

const std::string kBundledSae = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/sae/demo";

nlohmann::json summary_of(const fs::path& out) {
  std::ifstream in(out / "summary.json");
  return nlohmann::json::parse(in);
}

TEST(SaeFeatures, AnalyzeWritesTheFeaturesOfTheBundledSae) {
  const fs::path out = scratch("analyze");
  fs::remove_all(out);
  ASSERT_EQ(testing::run_cli_process({{"analyze", "--analysis", "sae", "--sae", kBundledSae, "--feature", "5", "--top",
                                       "4", "--out", out.string()}})
                .exit_code,
            0);
  const auto summary = summary_of(out);
  EXPECT_EQ(summary.at("sae").at("format"), "SAELens");
  EXPECT_EQ(summary.at("sae").at("hook"), "blocks.2.hook_resid_post");
  const torch::Tensor indices = read_npy((out / "sae_topk_indices.npy").string());
  const torch::Tensor values = read_npy((out / "sae_topk_values.npy").string());
  const torch::Tensor feature = read_npy((out / "sae_feature_5.npy").string());
  EXPECT_EQ(indices.sizes(), (std::vector<int64_t>{145, 4}));
  EXPECT_EQ(feature.sizes(), (std::vector<int64_t>{145}));
  // The same numbers in-process: the bundled model and SAE on the bundled image.
  LoadedModel model = load_model(default_model_path(), {}, torch::kCPU);
  const auto sae = open_sparse_autoencoder(kBundledSae);
  c10::InferenceMode inference_mode;
  configure_input(model, {});
  const RgbImage prepared = prepare_model_input(load_image_rgb(default_image_path(), kDefaultMaxPixels), {}, model);
  const SaeImageReport report =
      sae_image_report(model.vit(), *sae, "", image_to_tensor(prepared, model.normalization), {});
  EXPECT_LE((report.features.select(1, 5) - feature).abs().max().item<double>(), 1e-5);
  EXPECT_LE((std::get<0>(report.features.topk(4, 1)) - values).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(report.features.gather(1, indices) > 0, values > 0));
  EXPECT_NEAR(summary.at("reconstruction").at("normalised_mse").get<double>(), report.normalised_mse, 1e-4);
  EXPECT_TRUE(fs::exists(out / "sae.png"));
  fs::remove_all(out);
}

TEST(SaeFeatures, RunWithAFeatureOffWritesTheOutputWithoutIt) {
  const fs::path out = scratch("run");
  fs::remove_all(out);
  ASSERT_EQ(
      testing::run_cli_process({{"run", "--sae", kBundledSae, "--sae-off", "262,3", "--out", out.string()}}).exit_code,
      0);
  const auto summary = summary_of(out);
  ASSERT_TRUE(summary.contains("sae_intervention"));
  EXPECT_EQ(summary.at("sae_intervention").at("off"), "262,3");
  const torch::Tensor with = read_npy((out / "logits.npy").string());
  const torch::Tensor without = read_npy((out / "logits_without_sae.npy").string());
  EXPECT_GT((with - without).abs().max().item<double>(), 0.0);
  const fs::path plain = scratch("plain");
  fs::remove_all(plain);
  ASSERT_EQ(testing::run_cli_process({{"run", "--out", plain.string()}}).exit_code, 0);
  // Two processes may pick different GEMM backends (timed at start, models/token_linear.cpp): equal
  // up to float32 rounding through four blocks, far below what switching the features off moves.
  const torch::Tensor plain_logits = read_npy((plain / "logits.npy").string());
  const double rounding = 1e-4 * std::max(1.0, plain_logits.abs().max().item<double>());
  EXPECT_LE((plain_logits - without).abs().max().item<double>(), rounding);
  EXPECT_GT((with - without).abs().max().item<double>(), 100 * rounding);
  fs::remove_all(out);
  fs::remove_all(plain);
}

TEST(SaeFeatures, AnalyzeOverAFolderKeepsEachFeaturesTopImages) {
  const fs::path images = scratch("images"), out = scratch("folder");
  fs::remove_all(out);
  ASSERT_EQ(testing::run_cli_process({{"glyphs", "--out", images.string(), "--count", "12", "--seed", "77"}}).exit_code,
            0);
  ASSERT_EQ(testing::run_cli_process({{"analyze", "--analysis", "sae", "--sae", kBundledSae, "--images",
                                       images.string(), "--top", "3", "--feature", "320", "--out", out.string()}})
                .exit_code,
            0);
  const torch::Tensor values = read_npy((out / "sae_top_values.npy").string());
  const torch::Tensor top_images = read_npy((out / "sae_top_images.npy").string());
  EXPECT_EQ(values.sizes(), (std::vector<int64_t>{384, 3}));  // features x k, whatever the folder
  EXPECT_TRUE(torch::all(top_images < 12).item<bool>());
  EXPECT_TRUE(torch::all(values.slice(1, 0, 2) >= values.slice(1, 1, 3)).item<bool>());
  const auto summary = summary_of(out);
  EXPECT_EQ(summary.at("images"), 12);
  EXPECT_EQ(summary.at("feature").at("index"), 320);
  EXPECT_TRUE(fs::exists(out / "sae_feature_320_top.csv"));
  EXPECT_TRUE(fs::exists(out / "sae_feature_320_top.png"));
  EXPECT_FALSE(fs::exists(out / ".sae-folder-pass"));
  fs::remove_all(images);
  fs::remove_all(out);
}

std::string refusal(const std::vector<std::string>& args, const fs::path& err) {
  testing::CliRequest request(args, "/dev/null", err.string());
  const int code = testing::run_cli_process(request).exit_code;
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  return code == 0 ? "(exit 0)" : text.str();
}

TEST(SaeFeatures, WhatDoesNotFitIsRefusedWithTheReason) {
  const fs::path dir = scratch("refuse"), err = dir / "err.txt";
  const std::string out = (dir / "out").string();
  EXPECT_NE(refusal({"analyze", "--analysis", "sae", "--out", out}, err).find("needs --sae FILE"), std::string::npos);
  EXPECT_NE(refusal({"analyze", "--analysis", "sae", "--sae", kBundledSae, "--sae-hook", "blocks.1.hook_mlp_out",
                     "--out", out},
                    err)
                .find("the SAE file says it reads"),
            std::string::npos);
  EXPECT_NE(refusal({"analyze", "--analysis", "sae", "--sae", kBundledSae, "--feature", "384", "--out", out}, err)
                .find("the SAE has features 0..383"),
            std::string::npos);
  EXPECT_NE(refusal({"run", "--sae", kBundledSae, "--sae-off", "3,3", "--out", out}, err).find("listed twice"),
            std::string::npos);
  EXPECT_NE(refusal({"run", "--sae", kBundledSae, "--sae-add", "3:inf", "--out", out}, err).find("sae-add"),
            std::string::npos);
  // An SAE of another model's width.
  const std::string other = random_sae(dir / "other", "blocks.0.hook_resid_post", 1);
  EXPECT_NE(refusal({"run", "--sae", other, "--sae-off", "1", "--out", out}, err).find("trained on another model"),
            std::string::npos);
  // A hierarchical model has no one residual stream.
  EXPECT_NE(refusal({"run", "--model", std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/flatten_swin.safetensors",
                     "--sae", kBundledSae, "--sae-off", "1", "--out", out},
                    err)
                .find("no single residual stream"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace test_sae_features
}  // namespace attnscope
