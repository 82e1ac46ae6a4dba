// Command-line parsing shared by every attnscope command: the AppState options plus a command's
// own flags, `--session FILE` to start from a session file, and uniform help output.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "session/app_state.h"
#include "session/command_line.h"

namespace attnscope {

// Parses args (without the program and command names). State options may appear in any order;
// a session file given with --session is applied first, flags after it override.
CommandLine parse_command_line(const std::vector<std::string>& args, const std::vector<std::string>& state_options,
                               const std::vector<CommandFlag>& command_flags);

// parse_command_line for a command's entry point: on --help it prints the command's help and
// returns nothing (the command then exits 0).
std::optional<CommandLine> parse_or_print_help(const std::vector<std::string>& args, const std::string& usage,
                                               const std::vector<std::string>& state_options,
                                               const std::vector<CommandFlag>& command_flags);

std::string command_help(const std::string& usage, const std::vector<std::string>& state_options,
                         const std::vector<CommandFlag>& command_flags);

struct CommandSyntax;
// The same for a command's syntax (app/commands.h): its usage, options and flags, and its notes in --help.
std::optional<CommandLine> parse_or_print_help(const std::vector<std::string>& args, const CommandSyntax& syntax);

// What every command takes when --model or --image is not given: the bundled demo model and (with
// `image`) the bundled sample image, as the workbench opens. Throws when assets/models is empty.
void use_bundled_defaults(AppState& state, bool image);

// Reads a session file (JSON) into a state.
void load_session(AppState& state, const std::string& path);

// "attnscope COMMAND: warning: ..." on stderr for each of a loaded model's warnings.
void print_warnings(const std::string& command, const std::vector<std::string>& warnings);

}  // namespace attnscope
