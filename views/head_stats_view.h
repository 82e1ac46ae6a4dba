// The head statistics view's data (analysis "headstats", views/analysis_headstats.cpp): each
// panel's model's mean attention distance and entropy per layer and head over a folder, and where
// each head is drawn in the scatter, which the workbench's panel (viewer/panels/head_stats_panel.cpp)
// reads to show the head under the pointer.
#pragma once

#include <string>
#include <vector>

#include "analysis/head_statistics.h"
#include "core/enum_names.h"
#include "views/folder_view.h"

namespace attnscope {

// How heads spread within their layer's column of the scatter: by index, or sorted by a statistic.
enum class HeadOrder { Index, Distance, Entropy };
template <>
struct EnumTable<HeadOrder> {
  static const std::vector<EnumEntry<HeadOrder>>& entries();
};
HeadOrder parse_head_order(const std::string& name);
std::string to_string(HeadOrder order);

struct HeadStatsModel : PanelPass {
  std::vector<LayerHeadStatistics> layers;
};

struct HeadStatsViewData : FolderViewData {
  HeadOrder order = HeadOrder::Index;
  std::vector<HeadStatsModel> models;  // one per panel (or --model and --compare-model)
};

// One head's point of the scatter.
struct HeadPoint {
  size_t layer = 0;  // index into HeadStatsModel::layers
  int head = 0;
  double x = 0.0;  // its layer, spread within [layer - 0.3, layer + 0.3] by its rank in the order
  HeadStatistic statistic;
};
// The points of one model, in the order of the figure's series.
std::vector<HeadPoint> head_points(const HeadStatsModel& model, HeadOrder order);

}  // namespace attnscope
