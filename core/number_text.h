// Numbers as option values are written and read: whole-string parsing whose errors name the option
// ("--p expects a number, got 'x'"), and the shortest form a value prints in (std::ostream's).
#pragma once

#include <string>

namespace attnscope {

int parse_int_option(const std::string& name, const std::string& value);
double parse_double_option(const std::string& name, const std::string& value);
std::string format_double(double value);

}  // namespace attnscope
