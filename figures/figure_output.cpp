#include "figures/figure_output.h"

#include <cstdio>

namespace attnscope {

const std::vector<EnumEntry<FigureFormat>>& EnumTable<FigureFormat>::entries() {
  static const std::vector<EnumEntry<FigureFormat>> table = {
      {FigureFormat::Png, "png"}, {FigureFormat::Svg, "svg"}, {FigureFormat::Pdf, "pdf"}};
  return table;
}

FigureFormat parse_figure_format(const std::string& name) {
  return parse_enum_named<FigureFormat>("figure format", name);
}

std::string to_string(FigureFormat format) { return enum_name(format); }

std::string small_text_note(const FigureStyle& style) {
  if (style.font_size >= kJournalFont - 1e-9) return "";
  char size[32];
  std::snprintf(size, sizeof size, "%.1f", style.font_size);
  return std::string("text set at ") + size + " pt to fit the width, under the 7 pt journals ask for: fewer columns " +
         "or a wider figure (--width-pt double) keeps it larger";
}

}  // namespace attnscope
