// What the figure tests share: a scratch folder per test (FigureTest) and a shell that returns the
// exit status.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "figures/render.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace test_figures {

namespace fs = std::filesystem;

inline const std::string kModel = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";

class FigureTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  std::vector<std::string> temporaries() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(folder_))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(entry.path());
    return found;
  }

  TestFolder scratch_{"figures"};
  const fs::path& folder_ = scratch_.path();
};

// A figure ready for print at `style`: no text under 5 pt, labels and titles at 6-9 pt, every text's
// ink inside the page and apart from every other's (0.05 pt of slack for the fonts' rounding).
inline void expect_print_ready(const Figure& figure, const FigureStyle& style) {
  const FigureGeometry page = layout_figure(figure, style);
  const std::vector<FigureText> texts = figure_texts(figure, style);
  ASSERT_FALSE(texts.empty());
  constexpr double kSlack = 0.05;
  for (size_t i = 0; i < texts.size(); ++i) {
    const FigureText& a = texts[i];
    SCOPED_TRACE("'" + a.text + "'");
    EXPECT_GE(a.size_pt, 5.0 - 1e-9);
    EXPECT_LE(a.size_pt, 9.0 + 1e-9);
    EXPECT_GE(a.box.x, -kSlack);
    EXPECT_GE(a.box.y, -kSlack);
    EXPECT_LE(a.box.x + a.box.width, page.width + kSlack);
    EXPECT_LE(a.box.y + a.box.height, page.height + kSlack);
    for (size_t j = i + 1; j < texts.size(); ++j) {
      const Rect& p = a.box;
      const Rect& q = texts[j].box;
      const bool apart = p.x + p.width <= q.x + kSlack || q.x + q.width <= p.x + kSlack ||
                         p.y + p.height <= q.y + kSlack || q.y + q.height <= p.y + kSlack;
      EXPECT_TRUE(apart) << "overlaps '" << texts[j].text << "'";
    }
  }
}

inline int shell(const std::string& command) {
  const int status = testing::cli_system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace test_figures
}  // namespace attnscope
