// Models named as researchers name them, resolved offline in the caches they already have
// (models/model_source.h): Hugging Face caches built here in both layouts (snapshot links into
// blobs/, and copies), several revisions, torch.hub's checkpoints, and the refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/npy.h"
#include "models/model_loader.h"
#include "models/model_source.h"
#include "session/app_state.h"
#include "tests/cli_process.h"
#include "tests/numeric_bounds.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_model_source {

namespace fs = std::filesystem;

const std::string kCases = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/eva_cases/";
const std::string kMain = "1111111111111111111111111111111111111111";
const std::string kV1 = "2222222222222222222222222222222222222222";

// A Hugging Face cache: models--timm--tiny_dinov3 with refs/main (DINOv3 S) and refs/v1 (DINOv3 S+),
// snapshots linked into blobs/ (`links`) or holding copies.
struct HubCache {
  fs::path root;
  explicit HubCache(bool links) {
    root = fs::temp_directory_path() / (links ? "attnscope_hub_links" : "attnscope_hub_copies");
    fs::remove_all(root);
    const fs::path repo = root / "models--timm--tiny_dinov3";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    add_snapshot(repo, kMain, kCases + "dinov3_s16", links);
    add_snapshot(repo, kV1, kCases + "dinov3_splus16", links);
    std::ofstream(repo / "refs" / "main") << kMain;
    std::ofstream(repo / "refs" / "v1") << kV1 << "\n";
  }
  ~HubCache() { fs::remove_all(root); }
  static void add_snapshot(const fs::path& repo, const std::string& commit, const std::string& from, bool links) {
    const fs::path snapshot = repo / "snapshots" / commit;
    fs::create_directories(snapshot);
    for (const char* name : {"model.safetensors", "config.json"}) {
      if (!links) {
        fs::copy_file(fs::path(from) / name, snapshot / name);
        continue;
      }
      const std::string blob =
          commit.substr(0, 8) + std::string(name == std::string("config.json") ? "c" : "w") + std::string(56, 'a');
      fs::copy_file(fs::path(from) / name, repo / "blobs" / blob);
      fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, snapshot / name);
    }
  }
};

// HF_HUB_CACHE for the length of a scope.
struct ScopedEnvironment {
  std::string name;
  std::optional<std::string> before;  // restored, so that scopes nest
  ScopedEnvironment(const std::string& key, const std::string& value) : name(key) {
    if (const char* old = std::getenv(key.c_str())) before = old;
    setenv(key.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (before)
      setenv(name.c_str(), before->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

torch::Tensor output_of(LoadedModel& model) {
  c10::InferenceMode inference_mode;
  torch::manual_seed(3);
  return model.forward(torch::randn({1, 3, 48, 64}), AttentionSettings{}).logits;
}

TEST(ModelSource, HubNamesResolveToTheSnapshotTheirRevisionNames) {
  for (const bool links : {true, false}) {
    SCOPED_TRACE(links ? "linked snapshots" : "copied snapshots");
    HubCache cache(links);
    ScopedEnvironment hub("HF_HUB_CACHE", cache.root.string());
    LoadedModel by_path = load_model(kCases + "dinov3_s16", {}, torch::kCPU);
    LoadedModel main = load_model("hf-hub:timm/tiny_dinov3", {}, torch::kCPU);
    EXPECT_EQ(max_abs_difference(output_of(main), output_of(by_path)), 0.0) << "the same file, the same output";
    EXPECT_EQ(main.source.commit, kMain);
    EXPECT_EQ(main.source.revision, "main");
    EXPECT_EQ(main.source.repo, "timm/tiny_dinov3");
    EXPECT_EQ(main.architecture, "vit_small_patch16_dinov3") << "config.json beside the snapshot's weights";
    ASSERT_EQ(main.source.files.size(), 2u);
    for (const auto& file : main.source.files) {
      EXPECT_GT(file.size, 0u);
      EXPECT_EQ(file.blob.empty(), !links) << file.name;
    }
    LoadedModel splus = load_model("hf-hub:timm/tiny_dinov3@v1", {}, torch::kCPU);
    EXPECT_EQ(splus.source.commit, kV1);
    EXPECT_EQ(splus.vit_arch().blocks.front().gate, MlpGate::Separate) << "v1 is the S+ snapshot";
    LoadedModel by_commit = load_model("hf-hub:timm/tiny_dinov3@" + kV1, {}, torch::kCPU);
    EXPECT_EQ(max_abs_difference(output_of(by_commit), output_of(splus)), 0.0);
    LoadedModel bare = load_model("timm/tiny_dinov3", {}, torch::kCPU);
    EXPECT_EQ(bare.source.kind, "hf-hub");
    bool said = false;
    for (const auto& note : bare.report.notes) said = said || note.find("is no path here") != std::string::npos;
    EXPECT_TRUE(said) << "a bare ORG/NAME read from the cache is said";
    LoadedModel local = load_model("local-dir:" + kCases + "dinov3_s16", {}, torch::kCPU);
    EXPECT_EQ(local.source.kind, "local-dir");
    EXPECT_EQ(max_abs_difference(output_of(local), output_of(by_path)), 0.0);
  }
}

void expect_refusal(const std::string& name, const std::string& words) {
  try {
    load_model(name, {}, torch::kCPU);
    ADD_FAILURE() << name << " loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << name << ": " << e.what() << "\nlooked for: " << words;
  }
}

TEST(ModelSource, WhatTheCacheLacksIsRefusedNamingWhereItLooked) {
  HubCache cache(true);
  ScopedEnvironment hub("HF_HUB_CACHE", cache.root.string());
  expect_refusal("hf-hub:timm/absent_model", cache.root.string());
  {
    // A cache on a disk that is gone, or a variable naming a file: said as such, with its origin.
    ScopedEnvironment vanished("HF_HUB_CACHE", (cache.root / "unmounted").string());
    expect_refusal("hf-hub:timm/tiny_dinov3",
                   "no Hugging Face cache folder at " + (cache.root / "unmounted").string() + " (from HF_HUB_CACHE");
  }
  expect_refusal("hf-hub:timm/tiny_dinov3@v9", "neither a ref");
  expect_refusal("hf-hub:timm/../tiny_dinov3", "not a Hugging Face repo id");
  expect_refusal("hf-hub:timm/tiny_dinov3@../../x", "revision");
  const fs::path repo = cache.root / "models--timm--tiny_dinov3";
  std::ofstream(repo / "refs" / "gone") << std::string(40, '3');
  expect_refusal("hf-hub:timm/tiny_dinov3@gone", "is not in the cache");
  // A link whose blob is missing: an incomplete download.
  for (const auto& entry : fs::directory_iterator(repo / "blobs"))
    if (entry.path().filename().string().rfind(kMain.substr(0, 8) + "w", 0) == 0) fs::remove(entry.path());
  expect_refusal("hf-hub:timm/tiny_dinov3", "broken link");
}

TEST(ModelSource, TorchHubCheckpointsAreFoundByName) {
  const fs::path home = fs::temp_directory_path() / "attnscope_torch_home";
  fs::remove_all(home);
  fs::create_directories(home / "hub" / "checkpoints");
  fs::copy_file(kCases + "meta_dinov3.pth", home / "hub" / "checkpoints" / "dinov3_tiny_pretrain.pth");
  {
    ScopedEnvironment torch_home("TORCH_HOME", home.string());
    LoadedModel model = load_model("dinov3_tiny_pretrain.pth", {}, torch::kCPU);
    EXPECT_EQ(model.source.kind, "torch-hub");
    EXPECT_EQ(to_string(model.vit_arch().source_layout), "dinov3");
  }
  fs::remove_all(home);
}

TEST(ModelSource, RunRecordsTheRevisionThatMadeItsOutputs) {
  HubCache cache(true);
  const fs::path out = fs::temp_directory_path() / "attnscope_source_run";
  fs::remove_all(out);
  testing::CliRequest request({"run", "--model", "hf-hub:timm/tiny_dinov3@v1", "--image",
                               std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--out", out.string()});
  request.environment = {"HF_HUB_CACHE=" + cache.root.string()};
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  const auto& source = summary.at("model_source");
  EXPECT_EQ(source.at("given"), "hf-hub:timm/tiny_dinov3@v1");
  EXPECT_EQ(source.at("commit"), kV1);
  EXPECT_EQ(source.at("files").size(), 2u);
  EXPECT_EQ(summary.at("model"), "hf-hub:timm/tiny_dinov3@v1");

  // A figure bundle's session reopens the same commit and records what it was.
  testing::CliRequest figure({"export", "--model", "hf-hub:timm/tiny_dinov3@v1", "--image",
                              std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png", "--layout", "grid-heads",
                              "--out", (out / "figure").string()});
  figure.environment = request.environment;
  ASSERT_EQ(testing::run_cli_process(figure).exit_code, 0);
  std::ifstream session_file(out / "figure" / "sign_4_grid-heads.png.session.json");
  const auto session = nlohmann::json::parse(session_file);
  const std::string pinned = "hf-hub:timm/tiny_dinov3@" + kV1;
  EXPECT_EQ(session.at("model"), pinned);
  EXPECT_EQ(session.at(kModelSourcesKey).at(pinned).at("commit"), kV1);
  EXPECT_EQ(session.at(kModelSourcesKey).at(pinned).at("files").size(), 2u);
  testing::CliRequest again({"export", "--session", (out / "figure" / "sign_4_grid-heads.png.session.json").string(),
                             "--out", (out / "again").string()},
                            (out / "again.log").string(), (out / "again.log").string());
  again.environment = request.environment;
  const int reopened = testing::run_cli_process(again).exit_code;
  std::ifstream log(out / "again.log");
  EXPECT_EQ(reopened, 0) << log.rdbuf();
  EXPECT_TRUE(fs::exists(out / "again" / "sign_4_grid-heads.png"));
  fs::remove_all(out);
}

TEST(ModelSource, SessionsAndFiguresPinTheCommitTheyWereMadeWith) {
  HubCache cache(true);
  ScopedEnvironment hub("HF_HUB_CACHE", cache.root.string());
  AppState state;
  set_option(state, "model", "hf-hub:timm/tiny_dinov3");
  const nlohmann::json written = to_session_file_json(state);
  EXPECT_EQ(written.at("model"), "hf-hub:timm/tiny_dinov3@" + kMain);
  // What the pinned name resolved to is recorded beside it: repo, revision, commit, files and blobs.
  const nlohmann::json& recorded = written.at(kModelSourcesKey).at("hf-hub:timm/tiny_dinov3@" + kMain);
  EXPECT_EQ(recorded.at("repo"), "timm/tiny_dinov3");
  EXPECT_EQ(recorded.at("commit"), kMain);
  ASSERT_EQ(recorded.at("files").size(), 2u) << recorded.dump();
  for (const auto& file : recorded.at("files")) {
    EXPECT_GT(file.at("size").get<int64_t>(), 0) << file.dump();
    const fs::path blob = cache.root / "models--timm--tiny_dinov3" / "blobs" / file.at("blob").get<std::string>();
    EXPECT_EQ(fs::file_size(blob), file.at("size").get<std::uintmax_t>()) << file.dump();
  }
  EXPECT_EQ(to_json(state).at("model"), "hf-hub:timm/tiny_dinov3") << "the state itself keeps what was given";
  // refs/main moves on; the session still opens the commit it was written with.
  std::ofstream(cache.root / "models--timm--tiny_dinov3" / "refs" / "main") << kV1;
  AppState reopened;
  apply_json(reopened, written);
  EXPECT_EQ(load_model(reopened.model, {}, torch::kCPU).source.commit, kMain);
  EXPECT_EQ(load_model("hf-hub:timm/tiny_dinov3", {}, torch::kCPU).source.commit, kV1);
  AppState local;
  set_option(local, "model", kCases + "dinov3_s16");
  EXPECT_EQ(to_session_file_json(local).at("model"), kCases + "dinov3_s16") << "a path stays as given";
  // A panel's own model is pinned as the session's is.
  apply_json(local, {{"compare", {{{"model", "hf-hub:timm/tiny_dinov3@v1"}, {"variant", "softmax"}}}}});
  const nlohmann::json panels = to_session_file_json(local).at("compare");
  ASSERT_EQ(panels.size(), 1u);
  EXPECT_EQ(panels[0].at("model"), "hf-hub:timm/tiny_dinov3@" + kV1);
  // The same in --compare's text form, whose ':' separates keys.
  set_option(local, "compare", "softmax:model=hf-hub:timm/tiny_dinov3@v1:p=2");
  const nlohmann::json typed = to_session_file_json(local).at("compare");
  ASSERT_EQ(typed.size(), 1u);
  EXPECT_EQ(typed[0].at("model"), "hf-hub:timm/tiny_dinov3@" + kV1);
  EXPECT_EQ(load_model(local.compare.front().model, {}, torch::kCPU).source.commit, kV1);
}

TEST(ModelSource, ModelsListsTheCachesAndWhatEachOpensAs) {
  HubCache cache(true);
  const fs::path repo = cache.root / "models--someone--not_a_vit";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / kMain);
  save_safetensors((repo / "snapshots" / kMain / "model.safetensors").string(), {{"weight", torch::zeros({2, 2})}});
  std::ofstream(repo / "refs" / "main") << kMain;
  const fs::path orphan = cache.root / "models--someone--no_snapshot";
  fs::create_directories(orphan / "refs");
  std::ofstream(orphan / "refs" / "main") << kV1;
  // A snapshot without refs/main is listed by its commit, which opens; a broken link is said as
  // --model says it.
  const fs::path unreferenced = cache.root / "models--someone--unreferenced" / "snapshots" / kMain;
  fs::create_directories(unreferenced);
  for (const char* name : {"model.safetensors", "config.json"})
    fs::copy_file(kCases + "dinov3_s16/" + name, unreferenced / name);
  const fs::path broken = cache.root / "models--someone--broken";
  fs::create_directories(broken / "refs");
  fs::create_directories(broken / "snapshots" / kMain);
  std::ofstream(broken / "refs" / "main") << kMain;
  fs::create_symlink(fs::path("..") / ".." / "blobs" / "absent", broken / "snapshots" / kMain / "model.safetensors");
  const fs::path home = fs::temp_directory_path() / "attnscope_models_torch_home";
  fs::remove_all(home);
  fs::create_directories(home / "hub" / "checkpoints");
  fs::copy_file(kCases + "meta_dinov3.pth", home / "hub" / "checkpoints" / "dinov3_tiny.pth");
  const fs::path out = fs::temp_directory_path() / "attnscope_models.json";
  testing::CliRequest request({"models", "--json"}, out.string());
  request.environment = {"HF_HUB_CACHE=" + cache.root.string(), "TORCH_HOME=" + home.string()};
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  std::ifstream in(out);
  const auto listed = nlohmann::json::parse(in);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& model : listed.at("models")) by_name[model.at("name")] = model;
  ASSERT_EQ(by_name.size(), 6u) << listed.dump();
  const std::string pinned = "hf-hub:someone/unreferenced@" + kMain;
  ASSERT_TRUE(by_name.count(pinned)) << listed.dump();
  EXPECT_FALSE(by_name.at(pinned).at("opens").is_null()) << by_name.at(pinned).dump();
  {
    ScopedEnvironment hub("HF_HUB_CACHE", cache.root.string());
    EXPECT_EQ(load_model(pinned, {}, torch::kCPU).source.commit, kMain);
  }
  EXPECT_NE(by_name.at("hf-hub:someone/broken").at("why_not").get<std::string>().find("broken link"), std::string::npos)
      << by_name.at("hf-hub:someone/broken").dump();
  EXPECT_EQ(listed.at("hf_hub_cache_from"), "HF_HUB_CACHE");
  EXPECT_FALSE(listed.contains("hf_hub_cache_problem"));
  const auto& dinov3 = by_name.at("hf-hub:timm/tiny_dinov3");
  EXPECT_EQ(dinov3.at("refs").at("v1"), kV1);
  EXPECT_EQ(dinov3.at("snapshots").size(), 2u);
  EXPECT_NE(dinov3.at("opens").get<std::string>().find("vit_small_patch16_dinov3"), std::string::npos);
  EXPECT_GT(dinov3.at("bytes").get<int64_t>(), 0);
  EXPECT_TRUE(by_name.at("hf-hub:someone/not_a_vit").at("opens").is_null());
  EXPECT_NE(by_name.at("hf-hub:someone/not_a_vit").at("why_not").get<std::string>().find("unsupported"),
            std::string::npos)
      << by_name.at("hf-hub:someone/not_a_vit").dump();
  EXPECT_NE(by_name.at("hf-hub:someone/no_snapshot").at("why_not").get<std::string>().find("is not in the cache"),
            std::string::npos)
      << by_name.at("hf-hub:someone/no_snapshot").dump();
  EXPECT_EQ(by_name.at("dinov3_tiny.pth").at("kind"), "torch-hub");

  // A cache on a disk that is gone is said, not listed as an empty cache.
  request.environment = {"HF_HUB_CACHE=" + (cache.root / "unmounted").string(), "TORCH_HOME=" + home.string()};
  ASSERT_EQ(testing::run_cli_process(request).exit_code, 0);
  std::ifstream again(out);
  EXPECT_EQ(nlohmann::json::parse(again).at("hf_hub_cache_problem"), "no such folder");
  fs::remove_all(home);
  fs::remove(out);
}

}  // namespace test_model_source
}  // namespace attnscope
