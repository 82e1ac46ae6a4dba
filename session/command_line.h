// A command's parsed line: the session state its options set, and its own flags. Plain data, read
// by the commands (app/) and by the analyses' headless runs (views/); app/cli.h parses it.
#pragma once

#include <map>
#include <set>
#include <string>

#include "session/app_state.h"

namespace attnscope {

struct CommandFlag {
  std::string name;
  std::string value_name;  // empty: a switch without a value
  std::string help;
  std::string default_value;
};

struct CommandLine {
  AppState state;
  std::map<std::string, std::string> flags;  // the command's own flags (defaults filled in)
  std::set<std::string> given;               // the state options named on the command line itself
  bool help = false;
  int flag_int(const std::string& name) const { return parse_int_option(name, flags.at(name)); }
  double flag_double(const std::string& name) const { return parse_double_option(name, flags.at(name)); }
};

}  // namespace attnscope
