// Numbers as option values are written and read: whole-string parsing whose errors name the option
// ("--p expects a number, got 'x'"), and the shortest form a value prints in (std::ostream's).
#pragma once

#include <string>

namespace attnscope {

int parse_int_option(const std::string& name, const std::string& value);
double parse_double_option(const std::string& name, const std::string& value);
std::string format_double(double value);

// A byte count for a person, in decimal units with one decimal ("84.0 KB", "11.1 TB", "512 bytes").
std::string bytes_text(double bytes);

}  // namespace attnscope
