#include "core/colormap.h"

#include "core/excerpt.h"

#include <stdexcept>

namespace attnscope {

namespace {
struct ColormapName {
  Colormap colormap;
  const char* name;
};
constexpr ColormapName kColormaps[] = {
    {Colormap::Viridis, "viridis"}, {Colormap::Magma, "magma"}, {Colormap::Inferno, "inferno"},
    {Colormap::Turbo, "turbo"},     {Colormap::Jet, "jet"},     {Colormap::Gray, "gray"},
    {Colormap::RdBu, "rdbu"},
};
}  // namespace

Colormap parse_colormap(const std::string& name) {
  for (const auto& entry : kColormaps)
    if (name == entry.name) return entry.colormap;
  throw std::invalid_argument("unknown colour map '" + excerpt(name) +
                              "' (expected viridis, magma, inferno, turbo, jet, gray or rdbu)");
}

std::string to_string(Colormap colormap) {
  for (const auto& entry : kColormaps)
    if (colormap == entry.colormap) return entry.name;
  return "?";
}

std::vector<std::string> colormap_names() {
  std::vector<std::string> names;
  for (const auto& entry : kColormaps) names.push_back(entry.name);
  return names;
}

}  // namespace attnscope
