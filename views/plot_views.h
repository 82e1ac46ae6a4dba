// The analysis column's plots as Figures, drawn by the same cairo code as the exported figures
// (figures/plots.h builds them, figures/render.h draws them; the workbench draws them with
// render_figure_image in screen_figure_style), so a plot on screen and in the paper
// are one drawing. No GL or ImGui here: the workbench uploads the images.
#pragma once

#include "figures/figure.h"
#include "figures/render.h"
#include "views/view_model.h"

namespace attnscope {

// The matrix view's singular spectrum: log axis with ticks, the tolerance line and the rank marker.
// One head's spectrum as a figure panel: every value with the rank and tolerance, or the leading
// values' lower and upper bounds with the rank's lower end (the screen and the export both).
Panel head_spectrum_panel(const HeadSpectrum& spectrum, const std::string& data_name);
Figure spectrum_view_figure(const HeadSpectrum& spectrum);

// The f_p view: the head's vectors before and after f_p in 2-D, the query-key similarity
// histograms, and entropy and top-k mass over p.
Figure focus_view_figure(const FocusView& focus);

// How the workbench draws a figure `width` pixels wide: text at about 13 pixels (8 points at
// 1.6 px/pt). layout_figure with it gives where each panel lands in the image.
FigureStyle screen_figure_style(const Figure& figure, int width);

}  // namespace attnscope
