// An analysis's view as its figure, as export writes it, re-rendered when the result, the
// selections or the width change: what the analysis column draws for analyses without a panel of
// their own, and what a panel of its own can draw and add to (the DLA panel's clicks on heads).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "figures/figure.h"
#include "figures/render.h"
#include "viewer/workbench.h"

namespace attnscope {

struct AnalysisEntry;

struct FigureView {
  PlotImage picture;
  Figure shown;
  FigureGeometry geometry;
  // The heatmap cell under the pointer this frame (its panel's index in `shown`), -1: none.
  struct Cell {
    int panel = -1, row = -1, col = -1;
  } hovered_cell;

  // The analysis's options, then its figure; a value under the pointer in a tooltip, and a click on
  // a heatmap of the selected layer's patch grid picks the query.
  void draw(Workbench& bench, const AnalysisEntry& entry);
  void report(nlohmann::json& shown_numbers) const;
};

}  // namespace attnscope
