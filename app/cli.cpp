#include "app/cli.h"

#include "app/commands.h"

#include "core/assets.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "views/option_catalog.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace attnscope {

void load_session(AppState& state, const std::string& path) {
  // A folder or a FIFO is no session (a FIFO would block the read forever): read_json_file says so.
  const nlohmann::json session = read_json_file(path, "session file " + path);
  try {
    apply_json(state, session);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("session file " + excerpt(path) + ": " + e.what());
  }
}

void use_bundled_defaults(AppState& state, bool image) {
  if (state.model.empty()) state.model = default_model_path();
  if (state.model.empty()) throw std::invalid_argument("--model is required (assets/models holds no bundled model)");
  if (image && state.image.empty()) state.image = default_image_path();
}

void print_warnings(const std::string& command, const std::vector<std::string>& warnings) {
  for (const auto& warning : warnings) std::cerr << "attnscope " << command << ": warning: " << warning << "\n";
}

CommandLine parse_command_line(const std::vector<std::string>& args, const std::vector<std::string>& state_options,
                               const std::vector<CommandFlag>& command_flags) {
  CommandLine line;
  for (const auto& flag : command_flags) line.flags[flag.name] = flag.default_value;
  auto is_state_option = [&](const std::string& name) {
    for (const auto& option : state_options)
      if (option == name) return true;
    return false;
  };
  auto find_flag = [&](const std::string& name) -> const CommandFlag* {
    for (const auto& flag : command_flags)
      if (flag.name == name) return &flag;
    return nullptr;
  };
  // The session goes first so that explicit flags override it wherever they appear.
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--session") load_session(line.state, args[i + 1]);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      line.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + excerpt(arg) + "'");
    std::string name = arg.substr(2), value;
    bool has_inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    const CommandFlag* flag = find_flag(name);
    const bool takes_value = name == "session" || is_state_option(name) || (flag && !flag->value_name.empty());
    if (!flag && !takes_value) throw std::invalid_argument("unknown option --" + excerpt(name) + " (see --help)");
    const OptionSpec* option = is_state_option(name) ? find_option(name) : nullptr;
    if (option && !option->implicit_value.empty() && !has_inline_value) {
      value = option->implicit_value;  // a switch: --overwrite means --overwrite=on
    } else if (takes_value && !has_inline_value) {
      if (i + 1 >= args.size()) throw std::invalid_argument("option --" + name + " needs a value");
      value = args[++i];
    }
    if (name == "session") continue;
    if (flag)
      line.flags[name] = takes_value ? value : "1";
    else {
      set_option(line.state, name, value);
      line.given.insert(name);
    }
  }
  return line;
}

std::optional<CommandLine> parse_or_print_help(const std::vector<std::string>& args, const std::string& usage,
                                               const std::vector<std::string>& state_options,
                                               const std::vector<CommandFlag>& command_flags) {
  CommandLine line = parse_command_line(args, state_options, command_flags);
  if (!line.help) return line;
  std::cout << command_help(usage, state_options, command_flags);
  return std::nullopt;
}

std::optional<CommandLine> parse_or_print_help(const std::vector<std::string>& args, const CommandSyntax& syntax) {
  CommandLine line = parse_command_line(args, syntax.options, syntax.flags);
  if (!line.help) return line;
  std::cout << command_help(syntax.usage, syntax.options, syntax.flags);
  if (!syntax.notes.empty()) std::cout << "\n" << syntax.notes << "\n";
  return std::nullopt;
}

std::string command_help(const std::string& usage, const std::vector<std::string>& state_options,
                         const std::vector<CommandFlag>& command_flags) {
  std::ostringstream out;
  out << "usage: " << usage << "\n\noptions:\n";
  auto line = [&](const std::string& name, const std::string& value_name, const std::string& help) {
    std::string left = "  --" + name + (value_name.empty() || value_name[0] == '[' ? "" : " ") + value_name;
    if (left.size() < 26)
      left.resize(26, ' ');
    else
      left += "  ";
    out << left << help << "\n";
  };
  for (const auto& name : state_options)
    if (const OptionSpec* option = find_option(name))
      line(option->name, option->implicit_value.empty() ? option->value_name : "[=" + option->value_name + "]",
           option->help);
  for (const auto& flag : command_flags)
    line(flag.name, flag.value_name,
         flag.help +
             (flag.default_value.empty() || flag.value_name.empty() ? "" : " (default " + flag.default_value + ")"));
  line("session", "FILE", "start from a session file; flags given here override it");
  return out.str();
}

}  // namespace attnscope
