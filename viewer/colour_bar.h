// The workbench's colour bar: the scale's colour table with round tick values under it (decades on
// a log scale; the same ticks the exported figures' bars have) and a caption that names the
// colour map and the scale mode. Drawn with ImGui by the views that show a colour scale.
#pragma once

#include <imgui.h>

#include <string>

#include "core/value_scale.h"

namespace attnscope {

class Workbench;

// Draws at the cursor a bar `width` pixels wide, its ticks below it and `caption` after them;
// leaves the cursor under it.
void draw_colour_bar(Workbench& bench, const ValueScale& scale, float width, const std::string& caption);

// "viridis, 0..max" or "rdbu, 0..max, diverging, centred at 0": the map and the mode, as the bar says.
std::string scale_caption(const ValueScale& scale);

}  // namespace attnscope
