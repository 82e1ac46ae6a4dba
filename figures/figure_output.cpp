#include "figures/figure_output.h"

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

}  // namespace attnscope
