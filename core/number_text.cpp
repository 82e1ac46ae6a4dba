#include "core/number_text.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <sstream>
#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

int parse_int_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("--" + name + " " + excerpt(value) + " is out of range: an integer from " +
                                std::to_string(std::numeric_limits<int>::min()) + " to " +
                                std::to_string(std::numeric_limits<int>::max()));
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects an integer, got '" + excerpt(value) + "'");
}

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

double parse_double_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const double parsed = std::stod(value, &used);
    // No option means anything by inf or NaN: every knob and setting is a finite number.
    if (used == value.size() && std::isfinite(parsed)) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects a finite number, got '" + excerpt(value) + "'");
}

std::string bytes_text(double bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 5) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

}  // namespace attnscope
