// A checkpoint per panel in the session format: panel specs (model, variant, parameters) in text and
// JSON, today's sessions read as before, the default export folder, and preprocessing options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/image.h"
#include "session/app_state.h"
#include "session/export_folder.h"
#include "views/option_catalog.h"

namespace attnscope {
namespace test_panels {

TEST(PanelSpec, TextFormNamesModelVariantAndParameters) {
  const PanelSpec spec = parse_panel_spec("focused:model=assets/models/linear.safetensors:p=8:dwc=off", "--compare");
  EXPECT_EQ(spec.model, "assets/models/linear.safetensors");
  EXPECT_EQ(spec.variant, Variant::Focused);
  EXPECT_EQ(spec.own_value("p", &AttentionSettings::p), 8.0);
  EXPECT_EQ(spec.own_value("dwc", &AttentionSettings::dwc), false);
  EXPECT_FALSE(spec.own_value("window", &AttentionSettings::window).has_value());
  EXPECT_EQ(to_string(spec), "focused:model=assets/models/linear.safetensors:p=8:dwc=off");
  EXPECT_EQ(spec.label(), "linear: focused p=8 dwc=off");
  // Keys a spec leaves out follow the session's settings.
  AttentionSettings base;
  base.p = 2;
  base.window = 5;
  const AttentionSettings settings = spec.settings(base);
  EXPECT_EQ(settings.p, 8.0);
  EXPECT_EQ(settings.window, 5);
  EXPECT_FALSE(settings.dwc);

  for (const char* bad : {"", "bogus", "focused:q=2", "focused:p=-1", "focused:p", "focused:model=", "focused:"})
    EXPECT_THROW(parse_panel_spec(bad, "--compare"), std::invalid_argument) << bad;
}

// Model names with ':' of their own (hf-hub:, local-dir:) in the text form, before other keys and
// last, and back to the same text.
TEST(PanelSpec, TextFormTakesHubAndLocalDirNames) {
  const PanelSpec hub =
      parse_panel_spec("softmax:model=hf-hub:timm/deit3_small_patch16_224.fb_in1k@v1:p=2", "--compare");
  EXPECT_EQ(hub.model, "hf-hub:timm/deit3_small_patch16_224.fb_in1k@v1");
  EXPECT_EQ(hub.variant, Variant::Softmax);
  EXPECT_EQ(hub.own_value("p", &AttentionSettings::p), 2.0);
  EXPECT_EQ(parse_panel_spec(to_string(hub), "--compare"), hub);
  const std::vector<PanelSpec> list = parse_panel_list("native,linear:model=local-dir:/data/my:model", "--compare");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].model, "local-dir:/data/my:model");
  // A part without '=' anywhere else is still refused.
  EXPECT_THROW(parse_panel_spec("focused:p=2:timm/x", "--compare"), std::invalid_argument);
}

// p = 1 next to p = 8, and softmax.safetensors next to linear.safetensors: the session keeps each
// panel's model, variant and parameters, written as objects and read back the same.
TEST(PanelSpec, SessionsKeepAPanelsModelVariantAndParameters) {
  AppState state;
  apply_json(state, {{"model", "assets/models/softmax.safetensors"},
                     {"variant", "focused"},
                     {"p", 1},
                     {"compare",
                      {{{"variant", "focused"}, {"p", 8}},
                       {{"model", "assets/models/linear.safetensors"}, {"variant", "native"}},
                       "window:window=3:model=a,b.safetensors"}}});
  ASSERT_EQ(state.compare.size(), 3u);
  const std::vector<PanelSpec> panels = state.panel_specs();
  ASSERT_EQ(panels.size(), 4u);
  EXPECT_EQ(panels[0].model, "assets/models/softmax.safetensors");
  EXPECT_EQ(panels[1].model, "assets/models/softmax.safetensors");  // panel 1's model
  EXPECT_EQ(panels[2].model, "assets/models/linear.safetensors");
  const std::vector<AttentionSettings> settings = state.panel_settings();
  EXPECT_EQ(settings[0].p, 1.0);
  EXPECT_EQ(settings[1].p, 8.0);
  EXPECT_EQ(settings[2].p, 1.0);
  EXPECT_EQ(settings[2].variant, Variant::Native);
  EXPECT_EQ(settings[3].window, 3);

  const nlohmann::json saved = to_json(state);
  ASSERT_TRUE(saved["compare"].is_array());
  EXPECT_EQ(saved["compare"][0], (nlohmann::json{{"variant", "focused"}, {"p", 8.0}}));
  EXPECT_EQ(saved["compare"][1]["model"], "assets/models/linear.safetensors");
  EXPECT_EQ(saved["compare"][2]["model"], "a,b.safetensors");  // objects keep separators in paths
  AppState restored;
  apply_json(restored, saved);
  EXPECT_EQ(to_json(restored), saved);
  EXPECT_EQ(restored.compare[2].model, "a,b.safetensors");
}

// Today's sessions: "compare" as a list of variant names, the shared p, window, dwc.
TEST(PanelSpec, TodaysSessionsReadAsBefore) {
  AppState state;
  apply_json(state, {{"variant", "softmax"}, {"compare", "linear,focused"}, {"p", 4}, {"dwc", "off"}});
  const std::vector<AttentionSettings> settings = state.panel_settings();
  ASSERT_EQ(settings.size(), 3u);
  EXPECT_EQ(settings[1].variant, Variant::Linear);
  EXPECT_EQ(settings[2].variant, Variant::Focused);
  EXPECT_EQ(settings[2].p, 4.0);
  EXPECT_FALSE(settings[2].dwc);
  for (const PanelSpec& spec : state.compare) EXPECT_TRUE(spec.model.empty());
  try {
    apply_json(state, {{"compare", "softmax,linear,focused,window"}});
    ADD_FAILURE() << "four compare panels were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--compare"), std::string::npos);
  }
}

// What a session cannot hold is named as a session key (it read "unknown option --height", an
// option gui has), with the nearest setting's name for a typo; a panel list of the wrong shape
// names the forms it takes, and a panel's variant of the wrong kind is not called missing.
TEST(PanelSpec, SessionKeysOfTheWrongKindSayWhatTheyShouldBe) {
  auto refusal = [](const nlohmann::json& session) {
    AppState state;
    try {
      apply_json(state, session);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(applied)");
  };
  EXPECT_NE(refusal({{"height", 800}}).find("session key 'height' is not a setting a session holds (a command's own"),
            std::string::npos);
  EXPECT_NE(refusal({{"layr", 2}}).find("did you mean 'layer'?"), std::string::npos);
  EXPECT_NE(refusal({{"compare", {{"model", "x"}}}}).find("is a list of panel objects"), std::string::npos);
  // In the text form a bad value names the entry it sits in, and a key given twice is refused.
  EXPECT_NE(refusal({{"compare", "softmax:p="}}).find("--compare 'softmax:p=': --p expects a finite number"),
            std::string::npos);
  EXPECT_NE(refusal({{"compare", "softmax:p=1:p=2"}}).find("gives p twice"), std::string::npos);
  EXPECT_NE(
      refusal({{"compare", {{{"variant", 5}}}}}).find("a panel's \"variant\" is a name such as \"linear\", not 5"),
      std::string::npos);
}

// export --variants takes the same specs: a row may name its checkpoint.
TEST(PanelSpec, ExportVariantsNameTheirModel) {
  AppState state;
  set_option(state, "variants", "softmax,native:model=assets/models/linear.safetensors,focused:p=8");
  const std::vector<VariantChoice> rows = variant_rows(state.figure.variants, state.attention);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].model, "");
  EXPECT_EQ(rows[1].model, "assets/models/linear.safetensors");
  EXPECT_EQ(rows[1].label, "linear: native");
  EXPECT_EQ(rows[2].settings.p, 8.0);
  EXPECT_EQ(rows[2].label, "focused p=8");
  EXPECT_EQ(to_json(state)["variants"].size(), 3u);
}

TEST(ExportFolder, BesideTheSessionElsePerUserNeverTheSourceTree) {
  const std::string session =
      ::testing::TempDir() + "/attnscope_export_folder_session_" + std::to_string(::getpid()) + ".json";
  std::ofstream(session) << "{}";
  EXPECT_EQ(default_export_folder(session),
            (std::filesystem::path(::testing::TempDir()) / "figures").lexically_normal().string());
  ::setenv("XDG_DATA_HOME", "/tmp/attnscope-xdg", 1);
  EXPECT_EQ(default_export_folder(""), "/tmp/attnscope-xdg/attnscope/figures");
  ::unsetenv("XDG_DATA_HOME");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  if (!home.empty()) {
    EXPECT_EQ(default_export_folder(""), home + "/.local/share/attnscope/figures");
  }
  EXPECT_EQ(default_export_folder("").find("figures"), default_export_folder("").size() - 7);
  std::filesystem::remove(session);
}

TEST(Preprocessing, OptionsOverrideWhatTheCheckpointDeclares) {
  DeclaredPreprocessing declared;
  declared.crop_pct = 0.9;
  declared.interpolation = Interpolation::Bilinear;
  declared.normalization.mean = {0.5f, 0.5f, 0.5f};
  declared.normalization_source = "pretrained_cfg (file metadata)";
  declared.source = "pretrained_cfg (file metadata)";
  InputSettings input;
  Preprocessing used = resolve_preprocessing(input, declared);
  EXPECT_EQ(used.resize, ResizeMode::Timm);
  EXPECT_EQ(used.crop_pct, 0.9);
  EXPECT_EQ(used.crop_source, "pretrained_cfg (file metadata)");
  EXPECT_EQ(used.interpolation, Interpolation::Bilinear);
  EXPECT_EQ(used.normalization.mean[0], 0.5f);
  input.crop = 1.0;
  input.interpolation = Interpolation::Bicubic;
  input.mean = std::array<float, 3>{0.1f, 0.2f, 0.3f};
  used = resolve_preprocessing(input, declared);
  EXPECT_EQ(used.crop_pct, 1.0);
  EXPECT_EQ(used.crop_source, "--crop");
  EXPECT_EQ(used.interpolation, Interpolation::Bicubic);
  EXPECT_FLOAT_EQ(used.normalization.mean[2], 0.3f);
  EXPECT_EQ(used.normalization_source, "--mean");
  // Nothing declared: timm's defaults and ImageNet.
  used = resolve_preprocessing(InputSettings{}, DeclaredPreprocessing{});
  EXPECT_EQ(used.crop_pct, 0.875);
  EXPECT_EQ(used.crop_source, "default");
  EXPECT_FLOAT_EQ(used.normalization.std[0], 0.229f);

  AppState state;
  for (const auto& [option, value] : std::vector<std::pair<std::string, std::string>>{
           {"crop", "0"}, {"crop", "1.5"}, {"interpolation", "lanczos"}, {"mean", "0.5,0.5"}, {"std", "0,1,1"}})
    EXPECT_THROW(set_option(state, option, value), std::invalid_argument) << option << " " << value;
}

}  // namespace test_panels
}  // namespace attnscope
