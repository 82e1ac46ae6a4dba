// Axis ticks and their labels: "nice" steps (1, 2, 2.5, 5 x 10^k) on linear axes, decades on log axes.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

struct Tick {
  double value = 0.0;
  std::string text;      // the label; for a power of ten, the base "10"
  std::string exponent;  // set for powers of ten: drawn as a superscript
};

// Ticks inside [lo, hi] with a nice step giving at most about `max_ticks` of them; labels use as
// few decimals as the step needs and a real minus sign.
std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks = 5);

// The nice range that contains [lo, hi] and starts and ends on a tick (for plot axes).
std::pair<double, double> nice_range(double lo, double hi, int max_ticks = 5);

// Powers of ten within [lo, hi] (both > 0), every k-th decade so that at most `max_ticks` remain.
std::vector<Tick> log_ticks(double lo, double hi, int max_ticks = 6);

// A colour bar's ticks: decades on a log scale, round values otherwise.
struct ValueScale;
std::vector<Tick> scale_ticks(const ValueScale& scale, int max_ticks = 5);

// A tick as plain text ("0.25", "1e-3"), for places that cannot draw a superscript (the workbench).
std::string plain_tick_text(const Tick& tick);

}  // namespace attnscope
