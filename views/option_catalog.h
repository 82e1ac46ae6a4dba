// The complete option table: the session's own options (session/option_table.cpp: input, attention
// knobs, selection, display, export, attribution) and the analysis registry's (`analysis` and each
// analysis's own options), and what reads it whole: setting an option by name, session files, and
// the option groups commands take. Assembled here, above the registry, so that the session below
// never calls into the analyses.
#pragma once

#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "session/app_state.h"

namespace attnscope {

const std::vector<OptionSpec>& app_options();
const OptionSpec* find_option(const std::string& name);
// The names of every option in `groups`, in the table's order.
std::vector<std::string> option_names(std::initializer_list<OptionGroup> groups);

// Sets one option by name; throws std::invalid_argument naming the option and the bad value (cut
// to core/excerpt.h's length). Values longer than kMaxOptionValueBytes are refused.
void set_option(AppState& state, const std::string& name, const std::string& value);

// Session files: every option by name (panel lists as arrays of objects), and back; unknown keys
// are an error.
// The key under which a session file records, for each hub-named model it pins, what the name
// resolved to (ModelSource::to_json: repo, revision, commit, files with sizes and blobs); read back
// as a record only.
inline constexpr const char* kModelSourcesKey = "model_sources";
nlohmann::json to_json(const AppState& state);
void apply_json(AppState& state, const nlohmann::json& json);

}  // namespace attnscope
