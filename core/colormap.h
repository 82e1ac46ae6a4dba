// The colour maps by name; their 256-entry RGB tables and the overlays drawn with them are in
// core/colormap_image.h (OpenCV's tables, not in the engine-only build).
#pragma once

#include <string>
#include <vector>

namespace attnscope {

// RdBu is diverging (blue, white at the middle, red): maps with negative values get it, centred at 0.
enum class Colormap { Viridis, Magma, Inferno, Turbo, Jet, Gray, RdBu };

Colormap parse_colormap(const std::string& name);  // throws std::invalid_argument
std::string to_string(Colormap colormap);
std::vector<std::string> colormap_names();

}  // namespace attnscope
