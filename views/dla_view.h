// The direct logit attribution view's data (analysis "dla", views/analysis_dla.cpp), which the
// workbench's DLA panel (viewer/panels/dla_panel.cpp) reads to turn a click on a head into its
// ablation.
#pragma once

#include <string>

#include "analysis/residual_stream.h"
#include "views/analysis_registry.h"

namespace attnscope {

// One image's attribution, as `analyze dla` writes it and the view draws it.
struct DlaReport {
  LogitAttribution attribution;
  ReadoutTarget target;
  std::string target_name;  // "class 3 (four)", "the output norm"
  int layers = 0, heads = 0;
  HeadAblationSetting ablation;  // the heads the model ran without
};

// The view: the report, or why there is none (a hierarchical model).
using DlaView = PanelRunView<DlaReport>;

}  // namespace attnscope
