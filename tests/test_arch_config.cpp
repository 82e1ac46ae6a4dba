// What the weights cannot show, read where researchers keep it (models/arch_config.h): every family
// at a size no released model has, opened from its weights plus a timm-hub config.json (model_args in
// the authors' names), from --arch lists, from FLatten's yaml, and at released sizes from a
// registered name alone; each checked against the independent Python references. Without any of
// them the default is refused where it does not fit, and listed as assumed where it cannot be checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/reference_cases.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

using namespace testing_cases;
namespace fs = std::filesystem;

const std::string kDataDir = std::string(ATTNSCOPE_TEST_DATA_DIR);

// FLatten's '4111' form of a per-stage list.
std::string digits(const nlohmann::json& list) {
  std::string text;
  for (const auto& item : list) text += item.dump();
  return text;
}

// The constructor's keyword arguments of a reference case's model, in the authors' names (timm's
// PyramidVisionTransformerV2 and SwinTransformer, FLatten's CSWinTransformer, L2ViT, CARENets).
nlohmann::json authors_model_args(const nlohmann::json& arch) {
  const std::string family = arch.at("family");
  nlohmann::json args = {{"num_classes", arch.at("num_classes")}};
  if (family == "pvt_v2" || family == "flatten_pvt_v2") {
    args.update({{"depths", arch["depths"]},
                 {"embed_dims", arch["embed_dims"]},
                 {"num_heads", arch["heads"]},
                 {"mlp_ratios", arch["mlp_ratios"]},
                 {"sr_ratios", arch["sr_ratios"]},
                 {"linear", arch["linear"]}});
    if (family == "flatten_pvt_v2")
      args.update({{"attn_type", arch["attn_type"]},
                   {"la_sr_ratios", digits(arch["la_sr_ratios"])},
                   {"focusing_factor", arch["focusing_factor"]},
                   {"kernel_size", arch["kernel_size"]}});
  } else if (family == "swin" || family == "flatten_swin") {
    args.update({{"embed_dim", arch["embed_dims"][0]},
                 {"depths", arch["depths"]},
                 {"num_heads", arch["heads"]},
                 {"window_size", arch["window"]},
                 {"img_size", arch["img_size"]}});
    if (family == "flatten_swin")
      args.update({{"attn_type", arch["attn_type"]},
                   {"focusing_factor", arch["focusing_factor"]},
                   {"kernel_size", arch["kernel_size"]}});
  } else if (family == "flatten_cswin") {
    std::string la_split;  // the authors' '56-28-14-7' form
    for (const auto& side : arch["la_split_size"]) la_split += (la_split.empty() ? "" : "-") + side.dump();
    args.update({{"img_size", arch["img_size"]},
                 {"embed_dim", arch["embed_dims"][0]},
                 {"depth", arch["depths"]},
                 {"split_size", arch["split_size"]},
                 {"la_split_size", la_split},
                 {"num_heads", arch["heads"]},
                 {"attn_type", arch["attn_type"]},
                 {"focusing_factor", arch["focusing_factor"]},
                 {"kernel_size", arch["kernel_size"]}});
  } else if (family == "l2vit") {
    args.update({{"depths", arch["depths"]},
                 {"dims", arch["embed_dims"]},
                 {"num_heads", arch["heads"]},
                 {"window_size", arch["window"]},
                 {"block_type", arch["block_type"]},
                 {"conv_stem", true}});
  } else if (family == "care") {
    args.update({{"depths", arch["depths"]},
                 {"feat_dims", arch["feat_dims"]},
                 {"mem_dims", arch["mem_dims"]},
                 {"att_head_dim", arch["att_head_dim"]},
                 {"cls_dim", arch["cls_dim"]}});
  }
  return args;
}

// A case of the hierarchical generators: its folder and its cases.json entry.
struct ReferenceCase {
  std::string folder;
  nlohmann::json entry;
};

ReferenceCase reference_case(const std::string& folder_name, const std::string& name) {
  const std::string folder = kDataDir + "/" + folder_name + "/";
  for (const auto& c : cached_cases(folder))
    if (c.at("name") == name) return {folder, c};
  throw std::runtime_error("no case " + name + " in " + folder);
}

// The weights of case `c` as a researcher has them: no attnscope metadata, no .arch.json sidecar.
// Returns the weights file's path in `into`.
std::string bare_weights(const ReferenceCase& c, const fs::path& into) {
  fs::create_directories(into);
  const std::string source = c.folder + c.entry.at("model").get<std::string>();
  const fs::path target = into / fs::path(source).filename();
  if (source.size() > 12 && source.compare(source.size() - 12, 12, ".safetensors") == 0)
    save_safetensors(target.string(), load_checkpoint(source).tensors, {{"format", "pt"}});
  else
    fs::copy_file(source, target, fs::copy_options::overwrite_existing);
  return target.string();
}

void write_json(const fs::path& path, const nlohmann::json& json) { std::ofstream(path) << json.dump(1); }

// The case's logits and every reference row from `model`.
void expect_matches_reference(LoadedModel& model, const ReferenceCase& c) {
  double worst = 0;
  c10::InferenceMode inference_mode;
  const ForwardOutput output = forward_and_check_logits(model, c.folder, c.entry, kParityTolerance, worst);
  for_each_reference_layer(output, c.entry, [&](const AttentionCapture& capture, const nlohmann::json& reference) {
    ASSERT_EQ(capture.heads, reference.at("heads").get<int>());
    if (reference.at("rows").is_null()) return;  // CARE's strip-conv layers have no attention
    const torch::Tensor expected = read_npy(c.folder + reference.at("rows").get<std::string>());
    auto rows_of = [&](int head, const std::vector<int64_t>& at) { return capture.rows(0, head, at); };
    expect_rows_match(capture, reference, reference_queries(capture, reference), expected, rows_of, kParityTolerance);
  });
}

bool assumes(const LoadedModel& model, const std::string& key) {
  for (const auto& assumed : model.report.assumed)
    if (assumed.key == key) return true;
  return false;
}

std::string refusal(const std::string& path, const ArchOverrides& overrides = {}) {
  try {
    load_model(path, overrides, torch::kCPU);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(loaded)";
}

// One model of every family, at sizes no released model has; the first case of each.
const std::vector<std::pair<std::string, std::string>> kFamilyCases = {
    {"hier_cases", "swin_64"},       {"hier_cases", "swin_64@ms"},     {"hier_cases", "fswin_224@ms"},
    {"hier_cases", "pvt_128"},       {"hier_cases", "pvt_128@orig"},   {"hier_cases", "pvt_li_96"},
    {"hier_cases", "fpvt_128@orig"}, {"part2_cases", "cswin_128"},     {"part2_cases", "cswin_s_64@model"},
    {"part2_cases", "l2vit_112"},    {"part2_cases", "care_128@timm"},
};

TEST(ArchConfig, EveryFamilyOpensFromConfigJsonModelArgs) {
  configure_threads(2);
  TestFolder scratch("arch-config");
  for (const auto& [folder, name] : kFamilyCases) {
    SCOPED_TRACE(name);
    const ReferenceCase c = reference_case(folder, name);
    const fs::path dir = scratch.path() / name;
    const std::string weights = bare_weights(c, dir);
    write_json(dir / "config.json", {{"num_classes", c.entry["arch"]["num_classes"]},
                                     {"model_args", authors_model_args(c.entry.at("arch"))}});
    LoadedModel model = load_model(weights, {}, torch::kCPU);
    for (const char* key : {"heads", "att_head_dim", "window", "split_size"})
      EXPECT_FALSE(assumes(model, key)) << key << " was given by config.json";
    expect_matches_reference(model, c);
  }
}

// Without a config: PVT v2's released 5 heads do not divide a width of 48, CSwin's released head
// width does not split 16 channels into two branches, CARE's released head width 32 does not divide
// 16 attention channels: each refused with what to give, never "1 heads do not split". Where the
// released values fit (CARETrans_S0's own weights, L2ViT's window) they are used and listed as assumed.
TEST(ArchConfig, WithoutAConfigTheDefaultIsRefusedOrListedAsAssumed) {
  configure_threads(2);
  TestFolder scratch("arch-config");
  for (const auto& [folder, name, key] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"hier_cases", "pvt_128", "num_heads"},
                                                                      {"hier_cases", "pvt_li_96", "num_heads"},
                                                                      {"part2_cases", "cswin_s_64", "num_heads"},
                                                                      {"part2_cases", "care_128", "att_head_dim"}}) {
    SCOPED_TRACE(name);
    const std::string message = refusal(bare_weights(reference_case(folder, name), scratch.path() / name));
    EXPECT_NE(message.find("do not show"), std::string::npos) << message;
    EXPECT_NE(message.find("config.json model_args " + key + ", --config FILE or --arch "), std::string::npos)
        << message;
    EXPECT_EQ(message.find("1 heads"), std::string::npos) << message;
  }

  const std::string released = kDataDir + "/config_cases/";
  const std::string weights = scratch.file("care_s0.safetensors");
  fs::copy_file(released + "CARETrans_S0/model.safetensors", weights);
  LoadedModel care = load_model(weights, {}, torch::kCPU);
  ASSERT_TRUE(assumes(care, "att_head_dim"));
  for (const auto& assumed : care.report.assumed)
    if (assumed.key == "att_head_dim") {
      EXPECT_EQ(assumed.value, nlohmann::json({1, 1, 16, 32}));
      EXPECT_NE(assumed.describe().find("--arch att_head_dim="), std::string::npos) << assumed.describe();
    }
  LoadedModel l2vit =
      load_model(bare_weights(reference_case("part2_cases", "l2vit_112"), scratch.path() / "l2vit"), {}, torch::kCPU);
  EXPECT_TRUE(assumes(l2vit, "window"));
  EXPECT_FALSE(assumes(l2vit, "heads")) << "every L2ViT stage here has a global block, whose temperature shows them";
}

TEST(ArchConfig, PerStageListsOnTheCommandLine) {
  configure_threads(2);
  TestFolder scratch("arch-config");
  const std::vector<std::tuple<std::string, std::string, std::string>> given = {
      {"hier_cases", "pvt_128", "heads=1/2/2/4"},
      {"part2_cases", "care_128", "att_head_dim=1/1/8/8"},
      {"part2_cases", "cswin_128", "heads=2/2/4/4,split_size=1/2/4/4,la_split_size=32/16/8/4,img_size=128"},
  };
  for (const auto& [folder, name, arch] : given) {
    SCOPED_TRACE(name + " --arch " + arch);
    const ReferenceCase c = reference_case(folder, name);
    LoadedModel model = load_model(bare_weights(c, scratch.path() / name), ArchOverrides::parse(arch), torch::kCPU);
    expect_matches_reference(model, c);
  }
  EXPECT_EQ(ArchOverrides::parse("heads=1/2/5/8").values.at("heads"), nlohmann::json({1, 2, 5, 8}));
  EXPECT_EQ(ArchOverrides::parse("num_heads=6").values.at("heads"), 6) << "the authors' names are accepted too";
  EXPECT_EQ(ArchOverrides::parse("la_split_size=56/28/14/7,attn_type=LLSS").values.at("attn_type"), "LLSS");
  for (const char* bad : {"heads=1/x/3", "heads=1,2", "heads=0/1", "window=7/", "focusing_factor=p", "colour=3"})
    EXPECT_THROW(ArchOverrides::parse(bad), std::invalid_argument) << bad;
  // The authors' "56-28-14-7" strings, whole parts only.
  EXPECT_EQ(stage_counts({{"la_split_size", "56-28-14-7"}}, "la_split_size", 4), (std::vector<int>{56, 28, 14, 7}));
  for (const char* bad : {"56-28-14-", "-56-28-14-7", "56--14-7", "", "56-28-14-7a"})
    EXPECT_THROW(stage_counts({{"la_split_size", bad}}, "la_split_size", 4), CheckpointError) << bad;
  // A list for a model with another number of stages is refused with both counts.
  const ReferenceCase pvt = reference_case("hier_cases", "pvt_128");
  const std::string message = refusal(bare_weights(pvt, scratch.path() / "pvt3"), ArchOverrides::parse("heads=1/2/2"));
  EXPECT_NE(message.find("gives 3 stage(s), the weights have 4"), std::string::npos) << message;
}

// The order of sources: --arch over --config over the file's metadata over config.json's
// model_args over a yaml beside the weights over the registered name's released values.
TEST(ArchConfig, HigherSourcesWinAndSaySo) {
  configure_threads(2);
  TestFolder scratch("arch-config");
  const ReferenceCase c = reference_case("hier_cases", "pvt_128");
  const std::string weights = bare_weights(c, scratch.path());
  nlohmann::json args = authors_model_args(c.entry.at("arch"));
  args["num_heads"] = {1, 2, 4, 4};  // wrong, and overridden below
  write_json(scratch.path() / "config.json", {{"architecture", "pvt_v2_b0"}, {"model_args", args}});
  LoadedModel model = load_model(weights, ArchOverrides::parse("heads=1/2/2/4"), torch::kCPU);
  expect_matches_reference(model, c);
  EXPECT_EQ(model.architecture, "pvt_v2_b0");
  bool noted = false;
  for (const auto& note : model.report.notes)
    noted =
        noted || note.find("--arch gives heads = 1/2/2/4 over config.json model_args's 1/2/4/4") != std::string::npos;
  EXPECT_TRUE(noted);

  // --config with the right values beats the wrong config.json beside the weights.
  args["num_heads"] = c.entry["arch"]["heads"];
  write_json(scratch.path() / "elsewhere.json", {{"model_args", args}});
  LoadedModel configured =
      load_model(weights, ArchOverrides::parse("", (scratch.path() / "elsewhere.json").string()), torch::kCPU);
  expect_matches_reference(configured, c);

  // A registered name of another family is refused: the config belongs to another file.
  write_json(scratch.path() / "config.json", {{"architecture", "swin_tiny_patch4_window7_224"}});
  const std::string message = refusal(weights);
  EXPECT_NE(message.find("'swin_tiny_patch4_window7_224', a Swin, Swin V2, FLatten-Swin, Agent-Swin, InLine-Swin, "
                         "PolaFormer-Swin model"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("PVT v2"), std::string::npos) << message;
}

// What a config says of the blocks is checked against the weights, not noted and ignored: an
// attn_type the blocks contradict is refused naming what they are; a focusing factor outside --p's
// range is refused, another than 3 is noted with the --p that reproduces the model.
TEST(ArchConfig, AttnTypeAndFocusingFactorAreCheckedNotIgnored) {
  const std::string demo = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/flatten_swin.safetensors";
  EXPECT_NE(refusal(demo, ArchOverrides::parse("attn_type=XYZ")).find("does not say what the weights' blocks are: LSS"),
            std::string::npos);
  EXPECT_NE(refusal(demo, ArchOverrides::parse("attn_type=LLS")).find("give LSS"), std::string::npos);
  EXPECT_EQ(refusal(demo, ArchOverrides::parse("attn_type=LSS")), "(loaded)");
  EXPECT_NE(refusal(demo, ArchOverrides::parse("focusing_factor=-1")).find("not in (0, 32]"), std::string::npos);
  const LoadedModel trained_at_4 = load_model(demo, ArchOverrides::parse("focusing_factor=4"), torch::kCPU);
  bool noted = false;
  for (const auto& note : trained_at_4.report.notes) noted = noted || note.find("pass --p 4") != std::string::npos;
  EXPECT_TRUE(noted);

  // Counts written as floats (JSON's 3.0, YAML's 1e9) are the whole numbers they are; past int's range
  // they are out of range, not "not a whole number".
  TestFolder scratch("arch-floats");
  fs::copy_file(std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/softmax.safetensors",
                scratch.path() / "model.safetensors");
  write_json(scratch.path() / "config.json", {{"model_args", {{"num_heads", 3.0}}}});
  EXPECT_EQ(load_model(scratch.path().string(), {}, torch::kCPU).vit_arch().heads, 3);
  write_json(scratch.path() / "config.json", {{"model_args", {{"num_heads", 1e20}}}});
  EXPECT_NE(refusal(scratch.path().string()).find("heads 1e+20 is out of range for a count"), std::string::npos);
  write_json(scratch.path() / "config.json", {{"model_args", {{"num_heads", 2.5}}}});
  EXPECT_NE(refusal(scratch.path().string()).find("is not a whole number"), std::string::npos);
}

// FLatten's training yaml (cfgs/flatten_swin_t.yaml's form, read with yaml-cpp) beside the weights
// or given with --config.
TEST(ArchConfig, FlattenYamlBesideTheWeightsOrGivenWithConfig) {
  configure_threads(2);
  TestFolder scratch("arch-config");
  const ReferenceCase c = reference_case("hier_cases", "fswin_w8_64@ms");
  const nlohmann::json& arch = c.entry.at("arch");
  const std::string weights = bare_weights(c, scratch.path() / "beside");
  const std::string yaml =
      "DATA:\n  IMG_SIZE: " + arch["img_size"].dump() +
      "\n  BATCH_SIZE: 128\nMODEL:\n  TYPE: flatten_swin\n  NAME: flatten_swin_tiny_patch4_64\n  SWIN:\n"
      "    EMBED_DIM: " +
      arch["embed_dims"][0].dump() + "\n    DEPTHS: " + arch["depths"].dump() +
      "\n    NUM_HEADS: " + arch["heads"].dump() + "\n    WINDOW_SIZE: " + arch["window"].dump() +
      "\n  LA:\n    ATTN_TYPE: " + arch["attn_type"].get<std::string>() +
      "\n    KERNEL_SIZE: " + arch["kernel_size"].dump() + "\n";
  const std::string& yaml_text = yaml;
  write_file_contents(scratch.path() / "beside" / "flatten_swin_t.yaml", yaml_text);
  LoadedModel model = load_model(weights, {}, torch::kCPU);
  EXPECT_EQ(model.architecture, "flatten_swin");
  EXPECT_TRUE(model.report.assumed.empty()) << model.report.assumed.front().describe();
  EXPECT_EQ(model.backbone->input_geometry().native_height, arch["img_size"].get<int>());
  expect_matches_reference(model, c);

  // The same yaml elsewhere, given with --config; a yaml whose heads contradict the weights is refused.
  const std::string elsewhere = (scratch.path() / "cfg.yaml").string();
  write_file_contents(elsewhere, yaml_text);
  const std::string bare = bare_weights(c, scratch.path() / "bare");
  LoadedModel configured = load_model(bare, ArchOverrides::parse("", elsewhere), torch::kCPU);
  expect_matches_reference(configured, c);
  std::string wrong = yaml_text;
  wrong.replace(wrong.find("NUM_HEADS: [1"), 13, "NUM_HEADS: [2");
  write_file_contents(elsewhere, wrong);
  EXPECT_NE(refusal(bare, ArchOverrides::parse("", elsewhere)).find("the config is not this model's"),
            std::string::npos);
  write_file_contents(elsewhere, "MODEL: [unclosed\n");
  EXPECT_NE(refusal(bare, ArchOverrides::parse("", elsewhere)).find("is not valid YAML"), std::string::npos);
  // Beside the weights a yaml that is no training config (a conda environment) or does not parse is
  // said in the notes; the file still opens, with what it then assumes listed.
  for (const std::string& text : {std::string("name: env\ndependencies: [python=3.10]\n"), std::string("a: [b\n")}) {
    write_file_contents(scratch.path() / "bare" / "environment.yaml", text);
    LoadedModel opened = load_model(bare, {}, torch::kCPU);
    bool said = false;
    for (const auto& note : opened.report.notes) said = said || note.find("environment.yaml") != std::string::npos;
    EXPECT_TRUE(said) << text;
    EXPECT_FALSE(opened.report.assumed.empty()) << "img_size and the like are assumed again";
  }
  EXPECT_NE(refusal(bare, ArchOverrides::parse("", elsewhere + ".missing")).find("no such file"), std::string::npos);

  // FLatten-CSwin's yaml names a released size: its 2/4/8/16 heads contradict this smaller model's
  // focused blocks, and that is said, not guessed around.
  const ReferenceCase cswin = reference_case("part2_cases", "cswin_128");
  const std::string cswin_weights = bare_weights(cswin, scratch.path() / "cswin");
  write_file_contents(scratch.path() / "cswin" / "flatten_cswin_t.yaml",
                      "DATA:\n  IMG_SIZE: 224\nMODEL:\n  TYPE: FLatten_CSWin_64_24181_tiny_224\n  LA:\n"
                      "    ATTN_TYPE: LLSS\n");
  const std::string message = refusal(cswin_weights);
  EXPECT_NE(message.find("implies 2 heads, the arch metadata says 4"), std::string::npos) << message;
}

// A config.json that says only "architecture": the released size opens exactly.
TEST(ArchConfig, RegisteredNameAloneOpensTheReleasedSize) {
  configure_threads(2);
  const std::string folder = kDataDir + "/config_cases/";
  const auto& cases = cached_cases(folder);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    LoadedModel model = load_model(
        folder + c.at("folder").get<std::string>() + "/" + c.at("weights").get<std::string>(), {}, torch::kCPU);
    EXPECT_EQ(model.architecture, c.at("architecture"));
    EXPECT_FALSE(assumes(model, "heads"));
    EXPECT_FALSE(assumes(model, "att_head_dim"));
    EXPECT_FALSE(assumes(model, "img_size"));
    c10::InferenceMode inference_mode;
    const torch::Tensor input = read_npy(folder + c.at("input").get<std::string>());
    EXPECT_LT(max_abs_difference(model.forward(input, {}).logits, read_npy(folder + c.at("logits").get<std::string>())),
              kParityTolerance);
  }
  const BackboneFamily* family = nullptr;
  for (const char* name : {"vit_small_patch14_reg4_dinov2", "deit_base_distilled_patch16_384", "pvt_v2_b5",
                           "swin_base_patch4_window12_384", "FLatten_CSWin_64_24181_tiny_224", "flatten_pvt_v2_b0",
                           "L2ViT_Base_384", "CARETrans_S2"})
    EXPECT_NE(find_released(name, &family), nullptr) << name;
  EXPECT_EQ(find_released("pvt_v2_b9"), nullptr);
}

// A ViT's heads from config.json (timm's VisionTransformer num_heads): the same model as --arch.
TEST(ArchConfig, VitHeadsFromConfigJson) {
  TestFolder scratch("arch-config");
  const std::string source = kDataDir + "/parity_cases/vit_softmax.safetensors";
  const std::string weights = scratch.file("vit.safetensors");
  save_safetensors(weights, load_checkpoint(source).tensors, {{"format", "pt"}});
  LoadedModel by_default = load_model(weights, {}, torch::kCPU);
  EXPECT_TRUE(assumes(by_default, "heads"));
  write_json(scratch.path() / "config.json", {{"architecture", "vit_custom"}, {"model_args", {{"num_heads", 2}}}});
  LoadedModel configured = load_model(weights, {}, torch::kCPU);
  LoadedModel given = load_model(source, ArchOverrides::parse("heads=2"), torch::kCPU);
  EXPECT_FALSE(assumes(configured, "heads"));
  EXPECT_EQ(configured.vit_arch().heads, 2);
  bool noted = false;
  for (const auto& note : configured.report.notes)
    noted = noted || note.find("'vit_custom' is not in attnscope's table") != std::string::npos;
  EXPECT_TRUE(noted);
  c10::InferenceMode inference_mode;
  const torch::Tensor input = torch::randn({1, 3, given.vit_arch().native_height(), given.vit_arch().native_width()});
  EXPECT_EQ(max_abs_difference(configured.forward(input, {}).logits, given.forward(input, {}).logits), 0.0);
}

// What was assumed reaches summary.json (key, value, why, how) and `info`; --config clears it.
TEST(ArchConfig, RunAndInfoSayWhatWasAssumed) {
  TestFolder scratch("arch-config");
  const std::string weights = scratch.file("care_s0.safetensors");
  fs::copy_file(kDataDir + "/config_cases/CARETrans_S0/model.safetensors", weights);
  const std::string image = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png";
  const CommandRun run = run_attnscope(
      "run --model '" + weights + "' --image '" + image + "' --out '" + scratch.file("out") + "' --layer 10",
      scratch.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json summary = read_json_file(scratch.path() / "out" / "summary.json");
  EXPECT_EQ(summary.at("schema"), 2);
  std::set<std::string> keys;
  for (const auto& assumed : summary.at("assumed")) {
    keys.insert(assumed.at("key").get<std::string>());
    EXPECT_FALSE(assumed.at("why").get<std::string>().empty());
    EXPECT_NE(assumed.at("how").get<std::string>().find("--arch " + assumed.at("key").get<std::string>() + "="),
              std::string::npos);
  }
  EXPECT_EQ(keys, (std::set<std::string>{"att_head_dim", "img_size"}));
  EXPECT_EQ(summary["assumed"][0]["value"], nlohmann::json({1, 1, 16, 32}));

  const CommandRun info = run_attnscope("info --model '" + weights + "'", scratch.path());
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("assumed: att_head_dim = 1/1/16/32 (the released models' head widths"), std::string::npos)
      << info.out;

  write_file_contents(scratch.path() / "care.json",
                      R"({"architecture": "CARETrans_S0", "model_args": {"att_head_dim": [1, 1, 16, 32]}})");
  const CommandRun configured = run_attnscope(
      "info --json --model '" + weights + "' --config '" + scratch.file("care.json") + "'", scratch.path());
  ASSERT_EQ(configured.exit_code, 0) << configured.err;
  const nlohmann::json described = nlohmann::json::parse(configured.out);
  EXPECT_TRUE(described.at("assumed").empty()) << described["assumed"].dump();
  EXPECT_EQ(described.at("registered_name"), "CARETrans_S0");
}

}  // namespace
}  // namespace attnscope
