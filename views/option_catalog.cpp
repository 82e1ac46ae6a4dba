#include "views/option_catalog.h"

#include "models/model_source.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/excerpt.h"

namespace attnscope {

const OptionSpec* find_option(const std::string& name) {
  for (const auto& option : app_options())
    if (option.name == name) return &option;
  return nullptr;
}

std::vector<std::string> option_names(std::initializer_list<OptionGroup> groups) {
  std::vector<std::string> names;
  for (const OptionSpec& option : app_options())
    if (std::find(groups.begin(), groups.end(), option.group) != groups.end()) names.push_back(option.name);
  return names;
}

void set_option(AppState& state, const std::string& name, const std::string& value) {
  const OptionSpec* option = find_option(name);
  if (!option) throw std::invalid_argument("unknown option --" + excerpt(name));
  // Paths are the longest values (PATH_MAX is 4096); anything longer is not an option value.
  if (value.size() > kMaxOptionValueBytes)
    throw std::invalid_argument("--" + name + ": the value is " + std::to_string(value.size()) +
                                " bytes long, at most " + std::to_string(kMaxOptionValueBytes) + " are accepted");
  option->set(state, value);
}

nlohmann::json to_json(const AppState& state) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& option : app_options()) {
    if (!option.panels) {
      json[option.name] = option.get(state);
      continue;
    }
    // Panel lists as objects: readable, and paths with ',' or ':' stay intact.
    json[option.name] = nlohmann::json::array();
    for (const PanelSpec& spec : option.panels(state)) json[option.name].push_back(to_json(spec));
  }
  return json;
}

namespace {

// A session file's model name pinned to the commit it names now, and what it resolved to (repo,
// revision, commit, files with sizes and blobs) recorded under kModelSourcesKey.
void pin_model(nlohmann::json& name, nlohmann::json& sources) {
  if (!name.is_string()) return;
  try {
    const ModelSource source = resolve_model_source(name.get<std::string>());
    name = source.pinned();
    if (source.kind == "hf-hub") sources[source.pinned()] = source.to_json();
  } catch (const CheckpointError&) {
    // kept as given: opening it says what is wrong
  }
}

}  // namespace

nlohmann::json to_session_file_json(const AppState& state) {
  nlohmann::json json = to_json(state), sources = nlohmann::json::object();
  if (json.contains("model")) pin_model(json["model"], sources);
  // Each panel's own model too (panel lists are written as objects).
  for (auto& [key, value] : json.items())
    if (value.is_array())
      for (auto& panel : value)
        if (panel.is_object() && panel.contains("model")) pin_model(panel["model"], sources);
  if (!sources.empty()) json[kModelSourcesKey] = sources;
  return json;
}

namespace {

// Edits (insertions, deletions, substitutions) between two short names: for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A key no session holds: the nearest setting's name where one is close, else where such values go.
std::invalid_argument unknown_session_key(const std::string& key) {
  std::string nearest;
  size_t best = 3;  // at most two edits away
  if (key.size() <= 64)
    for (const OptionSpec& option : app_options())
      if (const size_t distance = edit_distance(key, option.name); distance < best) {
        best = distance;
        nearest = option.name;
      }
  return std::invalid_argument(
      "session key '" + excerpt(key, 60) + "' is not a setting a session holds" +
      (nearest.empty() ? " (a command's own options, such as gui --width or train --steps, "
                         "are given on its command line; docs/commands.md lists the options a session holds)"
                       : ": did you mean '" + nearest + "'?"));
}

}  // namespace

void apply_json(AppState& state, const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("a session must be a JSON object");
  for (const auto& item : json.items()) {
    const auto& value = item.value();
    if (item.key() == kModelSourcesKey) continue;  // a record of the weights that made it, not an option
    std::string text;
    const OptionSpec* option = find_option(item.key());
    if (!option) throw unknown_session_key(item.key());
    if (option->panels && !value.is_array() && !value.is_string())
      throw std::invalid_argument("session key '" + item.key() +
                                  "' is a list of panel objects ([{\"variant\": \"linear\", \"p\": 4}, ...]) or a "
                                  "panel spec string (\"linear,focused:p=4\")");
    if (option->panels && value.is_array()) {
      // The text form's cap holds for the object form too (a session of 3,000 rows, or a panel's
      // million-entry `ablate`, ran for minutes and took gigabytes).
      const size_t bytes = value.dump().size();
      if (bytes > kMaxOptionValueBytes)
        throw std::invalid_argument("session key '" + item.key() + "': its panels are " + std::to_string(bytes) +
                                    " bytes as JSON, at most " + std::to_string(kMaxOptionValueBytes) +
                                    " are accepted, as for --" + item.key());
      // Set whole: paths may hold the text form's separators.
      std::vector<PanelSpec> specs;
      for (const auto& entry : value) specs.push_back(panel_spec_from_json(entry, "--" + item.key()));
      option->set_panels(state, std::move(specs));
      continue;
    }
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_boolean())  // the switches' own words
      text = value.get<bool>() ? "on" : "off";
    else if (value.is_number())
      text = value.dump();
    else
      throw std::invalid_argument("session key '" + excerpt(item.key()) + "' must be a string or a number");
    set_option(state, item.key(), text);
  }
}

FigureOutput figure_output(const AppState& state) {
  FigureOutput output;
  output.layout = state.figure.layout;
  output.format = state.figure.format;
  output.style.dpi = state.figure.dpi;
  output.style.png_width = state.figure.png_width;
  output.style.transparent = state.figure.transparent;
  output.overwrite = state.figure.overwrite;
  output.width_pt = state.figure.width_pt;
  return output;
}

}  // namespace attnscope
