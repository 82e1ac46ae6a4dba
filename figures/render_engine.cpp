// The engine-only build's figures/render.h: it has no cairo, so it draws no figure (the analyses
// write the numbers behind them; figures/bundle.cpp asks figures_are_drawn first).
#include <stdexcept>
#include <string>

#include "figures/render.h"

namespace attnscope {

namespace {

[[noreturn]] void no_figures() { throw std::logic_error(std::string("cannot draw a figure: ") + kNoFigures); }

}  // namespace

bool figures_are_drawn() { return false; }

FigureGeometry layout_figure(const Figure&, const FigureStyle&) { no_figures(); }

std::vector<FigureText> figure_texts(const Figure&, const FigureStyle&) { no_figures(); }

FigureStyle style_for_width(const Figure&, FigureStyle, double) { no_figures(); }

std::string render_figure(const Figure&, const FigureStyle&, FigureFormat) { no_figures(); }

}  // namespace attnscope
