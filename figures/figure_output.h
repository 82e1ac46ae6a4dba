// How a figure file is written (format, size, style, layout), apart from drawing it: the session's
// options name these, so they need neither cairo nor OpenCV (the engine-only build keeps them).
#pragma once

#include <string>
#include <vector>

#include "core/enum_names.h"

namespace attnscope {

enum class FigureFormat { Png, Svg, Pdf };
template <>
struct EnumTable<FigureFormat> {
  static const std::vector<EnumEntry<FigureFormat>>& entries();
};
FigureFormat parse_figure_format(const std::string& name);  // "png" | "svg" | "pdf"; throws
std::string to_string(FigureFormat format);                 // also the file extension

struct FigureStyle {
  double panel_width = 110.0;  // points (1/72 inch) per heatmap panel; plots are 1.3x as wide
  double font_size = 8.0;      // points
  double dpi = 200.0;          // PNG only: pixels per inch
  int png_width = 0;           // PNG only: exact width in pixels, overriding dpi when > 0
  bool transparent = false;    // no background fill
};

// Body text sizes, in points: journals ask for 7 or more; a figure fitted to a width goes down to 6
// only where its labels leave no other way (tick labels then 5.25, nothing under 5), and says so.
constexpr double kJournalFont = 7.0;
constexpr double kSmallestFont = 6.0;
// What a figure set in `style` tells its user about its text: empty at kJournalFont or more.
std::string small_text_note(const FigureStyle& style);

// How a figure is written: the layout its manifest names, its format and drawing style, and whether
// existing files may be replaced.
struct FigureOutput {
  std::string layout;
  FigureFormat format = FigureFormat::Png;
  FigureStyle style;
  bool overwrite = false;
  // The figure's width in points (a journal column: 234 or 486); 0: from the panel size. The bundle
  // writer fits the style to it (figures/bundle.h), whatever made the figure.
  double width_pt = 0;
};

}  // namespace attnscope
