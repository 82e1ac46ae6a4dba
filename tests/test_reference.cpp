// What the documentation generated from the tables says is what the binary says: docs/commands.md is
// `attnscope reference` and docs/analysis_outputs.md `attnscope reference --outputs` (regenerate
// with scripts/update_docs.sh), and every command takes the bundled model and image when none is
// given, as the reference's usage lines say.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_folder.h"

namespace attnscope {
namespace test_reference {

std::string source_file(const std::string& relative) {
  return read_file_contents(std::string(ATTNSCOPE_SOURCE_DIR) + "/" + relative);
}

TEST(Reference, CommandPageIsCurrent) {
  TestFolder folder("reference");
  const CommandRun reference = run_attnscope("reference", folder.path());
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  EXPECT_EQ(reference.out, source_file("docs/commands.md")) << "docs/commands.md is stale: run scripts/update_docs.sh";
  // Every option of every command's syntax is on it, with its help.
  EXPECT_NE(reference.out.find("| `--p` | P | FLatten focusing factor"), std::string::npos);
  EXPECT_NE(reference.out.find("## `attnscope analyze`"), std::string::npos);
}

TEST(Reference, AnalysisOutputsPageIsCurrent) {
  TestFolder folder("reference");
  const CommandRun outputs = run_attnscope("reference --outputs", folder.path());
  ASSERT_EQ(outputs.exit_code, 0) << outputs.err;
  EXPECT_EQ(outputs.out, source_file("docs/analysis_outputs.md"))
      << "docs/analysis_outputs.md is stale: run scripts/update_docs.sh";
  EXPECT_NE(outputs.out.find("## `analyze-gradcam`: summary.json, schema 1"), std::string::npos);
}

// analyze and export, like run, open the bundled demo model and image when none is given.
TEST(Reference, CommandsTakeTheBundledModelAndImage) {
  TestFolder folder("defaults");
  const CommandRun analyze =
      run_attnscope("analyze --analysis gradcam --device cpu --out " + folder.file("gradcam"), folder.path());
  ASSERT_EQ(analyze.exit_code, 0) << analyze.err;
  const nlohmann::json summary = read_json_file(folder.path() / "gradcam" / "summary.json");
  EXPECT_NE(summary.at("model").get<std::string>().find("flatten.safetensors"), std::string::npos);
  EXPECT_NE(summary.at("image").get<std::string>().find("sign_4.png"), std::string::npos);
  const CommandRun exported =
      run_attnscope("export --layout grid-heads --device cpu --out " + folder.file("figures"), folder.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(std::filesystem::exists(folder.path() / "figures" / "sign_4_grid-heads.png"));
}

}  // namespace test_reference
}  // namespace attnscope
