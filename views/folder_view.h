// The data every statistics view over a folder keeps (views/folder_statistics.h runs the passes):
// which folder and how many of its images, why there is nothing to show, and per panel its label
// and why its pass failed.
#pragma once

#include <string>

#include "views/view_model.h"

namespace attnscope {

struct FolderViewData : AnalysisViewData {
  std::string folder;
  int images = 0;
  std::string error;  // no folder set, none of its images readable, or the analysis does not apply
  double milliseconds = 0.0;
  void describe(nlohmann::json& about) const override;  // "folder", "folder_images", "folder_error"
};

// One panel's pass over the folder, as a view shows it.
struct PanelPass {
  std::string label;  // "panel 2: linear"
  std::string error;  // why this panel has nothing (the others still show)
};

}  // namespace attnscope
