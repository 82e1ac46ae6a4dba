#include "views/option_catalog.h"

#include "models/model_source.h"

#include <algorithm>
#include <nlohmann/json.hpp>

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

void apply_json(AppState& state, const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("a session must be a JSON object");
  for (const auto& item : json.items()) {
    const auto& value = item.value();
    if (item.key() == kModelSourcesKey) continue;  // a record of the weights that made it, not an option
    std::string text;
    const OptionSpec* option = find_option(item.key());
    if (option && option->panels && value.is_array()) {
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
  return output;
}

}  // namespace attnscope
