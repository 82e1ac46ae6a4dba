#include "core/value_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace attnscope {

namespace {

// A log scale shows this many decades below its largest value (smaller values sit at the bottom).
constexpr double kLogDecades = 4.0;

double parse_number(const std::string& text, const std::string& spec) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--scale fixed:A,B expects two numbers, got '" + spec.substr(0, 80) + "'");
}

std::string short_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

ScaleSpec parse_scale_spec(const std::string& text) {
  ScaleSpec spec;
  if (text == "zero-max") return spec;
  if (text == "min-max") {
    spec.mode = ScaleMode::MinMax;
    return spec;
  }
  if (text == "log") {
    spec.mode = ScaleMode::Log;
    return spec;
  }
  if (text == "uniform") {
    spec.mode = ScaleMode::Uniform;
    return spec;
  }
  if (text.rfind("fixed:", 0) == 0) {
    const std::string range = text.substr(6);
    const auto comma = range.find(',');
    if (comma == std::string::npos)
      throw std::invalid_argument("--scale fixed:A,B expects two numbers, got '" + text.substr(0, 80) + "'");
    spec.mode = ScaleMode::Fixed;
    spec.low = parse_number(range.substr(0, comma), text);
    spec.high = parse_number(range.substr(comma + 1), text);
    if (!(spec.high > spec.low))
      throw std::invalid_argument("--scale fixed:A,B needs A < B, got '" + text.substr(0, 80) + "'");
    return spec;
  }
  throw std::invalid_argument("--scale expects zero-max, min-max, fixed:A,B, log or uniform, got '" +
                              text.substr(0, 80) + "'");
}

std::string to_string(const ScaleSpec& spec) {
  switch (spec.mode) {
    case ScaleMode::ZeroMax:
      return "zero-max";
    case ScaleMode::MinMax:
      return "min-max";
    case ScaleMode::Fixed:
      return "fixed:" + short_number(spec.low) + "," + short_number(spec.high);
    case ScaleMode::Log:
      return "log";
    case ScaleMode::Uniform:
      return "uniform";
  }
  return "?";
}

const std::vector<EnumEntry<OverlayAlpha>>& EnumTable<OverlayAlpha>::entries() {
  static const std::vector<EnumEntry<OverlayAlpha>> table = {{OverlayAlpha::Value, "value"},
                                                             {OverlayAlpha::Constant, "constant"}};
  return table;
}

OverlayAlpha parse_overlay_alpha(const std::string& text) { return parse_enum<OverlayAlpha>("alpha", text); }

std::string to_string(OverlayAlpha alpha) { return enum_name(alpha); }

double display_factor(const ScaleSpec& spec, int keys) {
  return spec.mode == ScaleMode::Uniform ? double(std::max(keys, 1)) : 1.0;
}

void ValueRange::include(double value) {
  if (!std::isfinite(value)) return;
  if (empty) {
    low = high = value;
    empty = false;
  } else {
    low = std::min(low, value);
    high = std::max(high, value);
  }
  if (value > 0 && (smallest_positive == 0.0 || value < smallest_positive)) smallest_positive = value;
}

void ValueRange::include(const float* values, size_t count) {
  for (size_t i = 0; i < count; ++i) include(double(values[i]));
}

double ValueScale::position(double value) const {
  double t = 0.0;
  if (log) {
    if (!(value > 0)) return 0.0;
    t = (std::log(value) - std::log(vmin)) / std::max(std::log(vmax) - std::log(vmin), 1e-20);
  } else {
    t = (value - vmin) / std::max(vmax - vmin, 1e-20);
  }
  if (!(t >= 0.0)) return 0.0;  // also NaN
  return std::min(t, 1.0);
}

double ValueScale::alpha(double value, double opacity, OverlayAlpha mode) const {
  if (mode == OverlayAlpha::Constant) return opacity;
  const double t = position(value);
  return opacity * (diverging ? std::abs(2.0 * t - 1.0) : t);
}

ValueScale resolve_value_scale(const ScaleSpec& spec, Colormap colormap, const ValueRange& range) {
  ValueScale scale;
  scale.colormap = colormap;
  const double low = range.low, high = range.high;
  switch (spec.mode) {
    case ScaleMode::ZeroMax:
    case ScaleMode::Uniform:
      // Anchored at 0 so a near-uniform map stays nearly flat; negative values widen it below.
      scale.vmin = std::min(0.0, low);
      scale.vmax = high;
      scale.label = spec.mode == ScaleMode::Uniform ? "x uniform (1 = uniform)" : "0..max";
      break;
    case ScaleMode::MinMax:
      scale.vmin = low;
      scale.vmax = high;
      scale.label = "min..max";
      break;
    case ScaleMode::Fixed:
      scale.vmin = spec.low;
      scale.vmax = spec.high;
      scale.label = "fixed [" + short_number(spec.low) + ", " + short_number(spec.high) + "]";
      break;
    case ScaleMode::Log: {
      scale.log = true;
      const double top = high > 0 ? high : 1.0;
      const double floor = top * std::pow(10.0, -kLogDecades);
      scale.vmax = top;
      scale.vmin = range.smallest_positive > 0 ? std::max(range.smallest_positive, floor) : floor;
      if (!(scale.vmax > scale.vmin)) scale.vmin = scale.vmax / 10.0;
      scale.label = "log";
      return scale;
    }
  }
  const bool negative = spec.mode == ScaleMode::Fixed ? spec.low < 0 : low < 0;
  if (negative) {
    // Negative entries (FLatten's DWC term) get a map whose white is 0, so the sign reads at a glance.
    scale.diverging = true;
    scale.colormap = Colormap::RdBu;
    if (spec.mode != ScaleMode::Fixed) {
      const double extent = std::max(std::abs(scale.vmin), std::abs(scale.vmax));
      scale.vmin = -extent;
      scale.vmax = extent;
    }
    // The range is now +-max whatever the mode asked: the bar names what it shows.
    if (spec.mode == ScaleMode::Fixed)
      scale.label += ", diverging";
    else
      scale.label = spec.mode == ScaleMode::Uniform ? "x uniform, diverging, centred at 0" : "diverging, centred at 0";
  }
  if (!(scale.vmax > scale.vmin)) scale.vmax = scale.vmin + std::max(std::abs(scale.vmin) * 1e-6, 1e-12);
  return scale;
}

}  // namespace attnscope
