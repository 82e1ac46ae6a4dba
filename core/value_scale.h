// How numbers become colours, shared by the workbench's shader, the PNG and figure exports and every
// colour bar: the scale modes a researcher picks (0..max, min..max, fixed, log, x uniform), the
// diverging map a map with negative values gets, and the overlay opacity that follows the value.
#pragma once

#include "core/enum_names.h"

#include <string>

#include "core/colormap.h"

namespace attnscope {

enum class ScaleMode {
  ZeroMax,  // 0 .. the largest value (attention weights: 0 is "no attention")
  MinMax,   // the smallest .. the largest value (full contrast, even on a near-uniform map)
  Fixed,    // a range the user gives
  Log,      // decades below the largest value
  Uniform,  // weights times the number of keys: 1 is a uniform row, 0 .. the largest
};

struct ScaleSpec {
  ScaleMode mode = ScaleMode::ZeroMax;
  double low = 0.0, high = 1.0;  // Fixed only
  bool operator==(const ScaleSpec& other) const {
    return mode == other.mode && (mode != ScaleMode::Fixed || (low == other.low && high == other.high));
  }
};

// "zero-max", "min-max", "fixed:A,B" (A < B), "log" or "uniform"; throws std::invalid_argument.
ScaleSpec parse_scale_spec(const std::string& text);
std::string to_string(const ScaleSpec& spec);

// How an overlay blends: "value" (opacity times the value's place on the scale, so low weights
// leave the image visible) or "constant" (the same opacity everywhere).
enum class OverlayAlpha { Value, Constant };
template <>
struct EnumTable<OverlayAlpha> {
  static const std::vector<EnumEntry<OverlayAlpha>>& entries();
};
OverlayAlpha parse_overlay_alpha(const std::string& text);
std::string to_string(OverlayAlpha alpha);

// Values a scale mode shows: the weights times `keys` in Uniform mode (1 = uniform over the keys),
// otherwise the weights themselves.
double display_factor(const ScaleSpec& spec, int keys);

// The range of the values one scale covers, in display units.
struct ValueRange {
  double low = 0.0, high = 0.0;
  double smallest_positive = 0.0;  // 0: no positive value
  bool empty = true;
  void include(double value);
  void include(const float* values, size_t count);
};

// A resolved scale: where each display value lies on the colour table.
struct ValueScale {
  Colormap colormap = Colormap::Viridis;
  double vmin = 0.0, vmax = 1.0;  // display units; both > 0 on a log scale
  bool log = false;
  bool diverging = false;  // the colour map is the diverging one, white at 0
  std::string label;       // names the mode next to the colour bar: "0..max", "log", "diverging, centred at 0"

  // [0, 1] along the colour table (clamped; values <= 0 are at 0 on a log scale).
  double position(double value) const;
  // round(position * 255): the same entry the shader picks.
  int table_index(double value) const { return int(position(value) * 255.0 + 0.5); }
  // The overlay's weight of the colour over the image: Value mode makes it follow the value (on a
  // diverging map, the distance from 0), Constant mode is `opacity` everywhere.
  double alpha(double value, double opacity, OverlayAlpha mode) const;
};

// The scale `spec` gives values in `range` (display units). A range with negative values gets the
// diverging map centred at 0 (except on a log scale and a fixed range, which are shown as given).
ValueScale resolve_value_scale(const ScaleSpec& spec, Colormap colormap, const ValueRange& range);

}  // namespace attnscope
