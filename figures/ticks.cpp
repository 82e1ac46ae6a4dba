#include "figures/ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/value_scale.h"

namespace attnscope {

namespace {

const char* const kMinus = "\u2212";

double nice_step(double lo, double hi, int max_ticks) {
  const double span = hi > lo ? hi - lo : std::max(std::abs(hi), 1.0);
  const double raw = span / std::max(1, max_ticks - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (factor * magnitude >= raw * (1 - 1e-9)) return factor * magnitude;
  return 10.0 * magnitude;
}

std::string with_minus(std::string text) {
  if (!text.empty() && text[0] == '-') text = kMinus + text.substr(1);
  return text;
}

std::string format_value(double value, double step) {
  char buffer[64];
  const double magnitude = std::max(std::abs(value), step);
  if (magnitude >= 1e5 || step < 1e-4) {
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  } else {
    // Enough decimals to tell neighbouring ticks apart (2.5 x 10^k steps need one more).
    int decimals = std::max(0, int(-std::floor(std::log10(step) + 1e-9)));
    const double scaled = step / std::pow(10.0, -decimals);
    if (std::abs(scaled - std::round(scaled)) > 1e-6) ++decimals;
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  }
  std::string text = buffer;
  if (text == "-0" || text.rfind("-0.", 0) == 0) {
    if (std::abs(value) < step * 1e-6) text = text.substr(1);  // no "-0.00"
  }
  return with_minus(text);
}

}  // namespace

std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks) {
  const double step = nice_step(lo, hi, max_ticks);
  std::vector<Tick> ticks;
  const double tolerance = step * 1e-6;
  for (double k = std::ceil((lo - tolerance) / step); k * step <= hi + tolerance; k += 1) {
    const double value = std::abs(k) < 0.5 ? 0.0 : k * step;
    ticks.push_back({value, format_value(value, step), ""});
    if (ticks.size() > 50) break;  // cannot happen for finite inputs; keeps a bad range harmless
  }
  return ticks;
}

std::pair<double, double> nice_range(double lo, double hi, int max_ticks) {
  if (!(hi > lo)) {
    const double pad = std::max(std::abs(lo) * 0.1, 1e-12);
    lo -= pad;
    hi += pad;
  }
  const double step = nice_step(lo, hi, max_ticks);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

std::vector<Tick> log_ticks(double lo, double hi, int max_ticks) {
  std::vector<Tick> ticks;
  if (!(lo > 0) || !(hi >= lo)) return ticks;
  const int first = int(std::ceil(std::log10(lo) - 1e-9));
  const int last = int(std::floor(std::log10(hi) + 1e-9));
  const int decades = last - first + 1;
  const int every = std::max(1, (decades + max_ticks - 1) / std::max(1, max_ticks));
  // Keep the top decade (the largest singular values) labelled; thin out below it.
  for (int e = last; e >= first; e -= every) {
    const std::string exponent = e < 0 ? std::string(kMinus) + std::to_string(-e) : std::to_string(e);
    ticks.push_back({std::pow(10.0, e), "10", exponent});
  }
  std::reverse(ticks.begin(), ticks.end());
  return ticks;
}

std::vector<Tick> scale_ticks(const ValueScale& scale, int max_ticks) {
  if (scale.log) return log_ticks(scale.vmin, scale.vmax, max_ticks);
  return linear_ticks(scale.vmin, scale.vmax, max_ticks);
}

std::string plain_tick_text(const Tick& tick) {
  std::string text = tick.text, exponent = tick.exponent;
  for (std::string* part : {&text, &exponent})
    for (size_t at = part->find(kMinus); at != std::string::npos; at = part->find(kMinus))
      part->replace(at, std::string(kMinus).size(), "-");
  return exponent.empty() ? text : "1e" + exponent;
}

}  // namespace attnscope
