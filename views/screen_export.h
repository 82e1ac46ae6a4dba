// "Export what is on screen" for the analysis view: its registry entry's figure, built from the
// very outcome the workbench draws (no second computation), written as a figure bundle with the
// numbers behind every panel (figures/export.h).
#pragma once

#include <string>

#include "figures/bundle.h"
#include "views/view_model.h"

namespace attnscope {

// The figure of `state.analysis`'s view from `outcome`; throws std::invalid_argument when the
// analysis has no view or no figure.
Figure analysis_view_figure(const InferenceOutcome& outcome, const AppState& state);

// Writes it to out_dir as "<image stem>_<analysis>-view.<format>" with its data folder.
ExportedFigure export_analysis_view(const InferenceOutcome& outcome, const AppState& state, const std::string& out_dir);

}  // namespace attnscope
