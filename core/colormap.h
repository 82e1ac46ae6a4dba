// The colour maps by name and their 256-entry RGB tables (the same tables feed the GUI's shader,
// every export and the engine-only build's overlays).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

// RdBu is diverging (blue, white at the middle, red): maps with negative values get it, centred at 0.
enum class Colormap { Viridis, Magma, Inferno, Turbo, Jet, Gray, RdBu };

Colormap parse_colormap(const std::string& name);  // throws std::invalid_argument
std::string to_string(Colormap colormap);
std::vector<std::string> colormap_names();

// Entry i is the RGB colour of value i / 255.
using ColourTable = std::array<std::array<uint8_t, 3>, 256>;
const ColourTable& colour_table(Colormap colormap);

}  // namespace attnscope
