// The workbench's folder jobs under Xvfb (viewer/folder_jobs.h): statistics over a folder run beside
// the panels, and a model change while one runs asks to keep or cancel it (issue 58).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/assets.h"

#include "gui_fixture.h"

namespace attnscope {
namespace test_gui {

// `session` on the bundled FLatten demo with ERF over `count` glyphs generated into `folder`.
nlohmann::json erf_over_glyphs(nlohmann::json session, const fs::path& folder, int count) {
  const std::string command = std::string(ATTNSCOPE_CLI) + " glyphs --count " + std::to_string(count) + " --out '" +
                              folder.string() + "' > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  session["model"] = asset_path("models/flatten.safetensors");
  session.erase("arch");
  session["analysis"] = "erf";
  session["images"] = folder.string();
  return session;
}

// A folder job (ERF over a folder) does not hold the panels back: they arrive first, as a result of
// their own, and the job's view follows with the same request (issue 58: a model change waited
// 15.6 s for the folder job to re-run).
TEST_F(GuiTest, AFolderJobsPanelsArriveBeforeTheJob) {
  nlohmann::json session = erf_over_glyphs(base_session(), folder_ / "glyphs", 6);
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  const nlohmann::json with_folder = shot_info();
  EXPECT_EQ(with_folder["error"], "") << with_folder.dump();
  EXPECT_EQ(with_folder["results"], 2) << "the panels, then the folder's view: " << with_folder.dump();
  session["analysis"] = "gradcam";  // no folder: one result
  ASSERT_EQ(run_gui(session, 3), 0) << log();
  EXPECT_EQ(shot_info()["results"], 1) << shot_info().dump();
}

// Opening another model while a folder job runs asks to keep or cancel the job (issue 58). Kept,
// it runs to its end on the first model beside the new one, and its result opens in a window of its
// own naming the model it was computed with; the analysis view shows the new model's job, naming its.
TEST_F(GuiTest, AFolderJobKeptThroughAModelChangeNamesItsModel) {
  // Enough images that the job is still running when the panels have settled (about 25 ms each).
  const nlohmann::json session = erf_over_glyphs(base_session(), folder_ / "glyphs", 240);
  const std::string other = asset_path("models/softmax.safetensors");
  const fs::path exported = folder_ / "kept";
  ASSERT_EQ(
      run_gui(session, 3, "--open-model '" + other + "' --job-choice keep --export-kept '" + exported.string() + "'"),
      0)
      << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "") << info.dump();
  EXPECT_EQ(info["model"], other);
  const nlohmann::json& kept = info["folder_jobs"]["kept"];
  ASSERT_EQ(kept.size(), 1u) << info["folder_jobs"].dump();
  EXPECT_EQ(kept[0]["model"], asset_path("models/flatten.safetensors"));
  EXPECT_EQ(kept[0]["description"], "erf over glyphs with flatten");
  EXPECT_EQ(kept[0]["running"], false);
  EXPECT_EQ(kept[0]["view"]["folder_images"], 240);
  EXPECT_GT(kept[0]["figure_px"][0].get<int>(), 100) << "the kept result is drawn";
  EXPECT_EQ(info["job"]["computed_with"], "erf over glyphs with softmax") << info.dump();
  EXPECT_EQ(info["folder_images"], 240);
  EXPECT_EQ(info["folder_jobs"]["runs_stopped"], 0) << "kept, not stopped";
  // Its "Export figure" writes the kept view (the first model's ERF), not the one on screen.
  const fs::path figure = exported / "chelsea_erf-view.png";
  ASSERT_TRUE(fs::exists(figure)) << info["info"] << "\n" << log();
  std::ifstream written_file(exported / "chelsea_erf-view.png.json");
  const std::string written((std::istreambuf_iterator<char>(written_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(written.find("panel 1: flatten"), std::string::npos) << written.substr(0, 2000);
  EXPECT_EQ(written.find("softmax"), std::string::npos) << "the kept job's figure names its own model only";
  std::ifstream session_file(exported / "chelsea_erf-view.png.session.json");
  EXPECT_EQ(nlohmann::json::parse(session_file).value("model", ""), asset_path("models/flatten.safetensors"));
}

// Cancelled instead, the first model's job stops and only the new model's runs.
TEST_F(GuiTest, AFolderJobCancelledOnAModelChange) {
  const nlohmann::json session = erf_over_glyphs(base_session(), folder_ / "glyphs", 240);
  ASSERT_EQ(run_gui(session, 3, "--open-model '" + asset_path("models/softmax.safetensors") + "' --job-choice cancel"),
            0)
      << log();
  const nlohmann::json info = shot_info();
  EXPECT_EQ(info["error"], "") << info.dump();
  EXPECT_EQ(info["folder_jobs"]["kept"].size(), 0u) << info["folder_jobs"].dump();
  EXPECT_GE(info["folder_jobs"]["runs_stopped"].get<int>(), 1) << "the first model's job stopped mid-way";
  EXPECT_EQ(info["job"]["computed_with"], "erf over glyphs with softmax") << info.dump();
  EXPECT_EQ(info["folder_images"], 240);
}

}  // namespace test_gui
}  // namespace attnscope
