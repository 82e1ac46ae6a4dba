#include "core/number_text.h"

#include <sstream>
#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

int parse_int_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == value.size()) return parsed;
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
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects a number, got '" + excerpt(value) + "'");
}

}  // namespace attnscope
