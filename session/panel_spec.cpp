#include "session/panel_spec.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/excerpt.h"
#include "session/app_state.h"

namespace attnscope {

namespace {

// "model=, p=, window=, ...": the keys a spec takes, for errors.
std::string known_keys() {
  std::string keys = "model=";
  for (const AttentionKnob& knob : attention_knobs()) keys += ", " + knob.name + "=";
  return keys;
}

// One KEY=VALUE of a spec, parsed by the knob's own parser (so a spec accepts exactly what the
// flag does: --p positive, --dwc on|off, ...).
void apply_key(PanelSpec& spec, const std::string& key, const std::string& value, const std::string& option,
               const std::string& text) {
  if (key == "model") {
    if (value.empty()) throw std::invalid_argument(option + ": 'model=' needs a path in '" + excerpt(text) + "'");
    spec.model = value;
    return;
  }
  if (!find_attention_knob(key))
    throw std::invalid_argument(option + ": '" + excerpt(key) + "' in '" + excerpt(text) + "' is not one of " +
                                known_keys());
  // A key given twice (p=1:p=2): which was meant is not guessed, as --arch and sessions refuse it.
  if (spec.sets(key)) throw std::invalid_argument(option + ": '" + excerpt(text) + "' gives " + key + " twice");
  try {
    spec.set(key, value);
  } catch (const std::invalid_argument& e) {  // the knob's own words name --key: the entry it sits in too
    throw std::invalid_argument(option + " '" + excerpt(text) + "': " + e.what());
  }
}

}  // namespace

bool PanelSpec::sets(const std::string& knob) const { return std::find(own.begin(), own.end(), knob) != own.end(); }

void PanelSpec::set(const std::string& name, const std::string& text) {
  const AttentionKnob* knob = find_attention_knob(name);
  if (!knob) throw std::invalid_argument("no attention knob '" + excerpt(name) + "'");
  knob->set(values, text);
  if (sets(name)) return;
  // Kept in the table's order, so text and JSON forms do not depend on the order keys were given.
  own.push_back(name);
  std::vector<std::string> ordered;
  for (const AttentionKnob& each : attention_knobs())
    if (sets(each.name)) ordered.push_back(each.name);
  own = ordered;
}

void PanelSpec::follow_session(const std::string& knob) {
  own.erase(std::remove(own.begin(), own.end(), knob), own.end());
}

AttentionSettings PanelSpec::settings(const AttentionSettings& base) const {
  AttentionSettings settings = base;
  settings.variant = variant;
  for (const std::string& name : own) find_attention_knob(name)->copy(values, settings);
  return settings;
}

std::string PanelSpec::label() const {
  std::string text = to_string(variant);
  for (const std::string& name : own) {
    const AttentionKnob& knob = *find_attention_knob(name);
    text += " " + knob.label + knob.text(values);
  }
  if (model.empty()) return text;
  return std::filesystem::path(model).stem().string() + ": " + text;
}

bool PanelSpec::operator==(const PanelSpec& other) const {
  if (model != other.model || variant != other.variant || own != other.own) return false;
  for (const std::string& name : own)
    if (!find_attention_knob(name)->equal(values, other.values)) return false;
  return true;
}

PanelSpec parse_panel_spec(const std::string& text, const std::string& option) {
  if (text.empty()) throw std::invalid_argument(option + " has an empty entry");
  PanelSpec spec;
  // The parts between ':'; a model name may hold ':' itself (hf-hub:ORG/NAME, local-dir:PATH), so a
  // part without '=' after model= continues the model's name.
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ':');) {
    if (parts.size() > 1 && part.find('=') == std::string::npos && parts.back().rfind("model=", 0) == 0)
      parts.back() += ":" + part;
    else
      parts.push_back(part);
  }
  bool first = true;
  for (const std::string& part : parts) {
    if (first) {
      try {
        spec.variant = parse_variant(part);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(option + ": " + e.what());
      }
      first = false;
      continue;
    }
    const auto eq = part.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(option + ": '" + excerpt(part) + "' in '" + excerpt(text) + "' is not one of " +
                                  known_keys());
    apply_key(spec, part.substr(0, eq), part.substr(eq + 1), option, text);
  }
  if (text.back() == ':') throw std::invalid_argument(option + ": '" + excerpt(text) + "' ends with ':'");
  return spec;
}

std::string to_string(const PanelSpec& spec) {
  std::string text = to_string(spec.variant);
  if (!spec.model.empty()) text += ":model=" + spec.model;
  for (const std::string& name : spec.own) text += ":" + name + "=" + find_attention_knob(name)->text(spec.values);
  return text;
}

std::vector<PanelSpec> parse_panel_list(const std::string& text, const std::string& option) {
  std::vector<PanelSpec> specs;
  if (text.empty()) return specs;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) specs.push_back(parse_panel_spec(item, option));
  if (text.back() == ',') throw std::invalid_argument(option + " has an empty entry in '" + excerpt(text) + "'");
  return specs;
}

std::string to_string(const std::vector<PanelSpec>& specs) {
  std::string text;
  for (const PanelSpec& spec : specs) text += (text.empty() ? "" : ",") + to_string(spec);
  return text;
}

nlohmann::json to_json(const PanelSpec& spec) {
  nlohmann::json json = nlohmann::json::object();
  if (!spec.model.empty()) json["model"] = spec.model;
  json["variant"] = to_string(spec.variant);
  // Numbers as numbers, the rest as the option writes them ("on", "head").
  for (const std::string& name : spec.own) {
    const AttentionKnob& knob = *find_attention_knob(name);
    const nlohmann::json value = knob.summary(spec.values);
    json[name] = value.is_number() ? value : nlohmann::json(knob.text(spec.values));
  }
  return json;
}

PanelSpec panel_spec_from_json(const nlohmann::json& json, const std::string& option) {
  if (json.is_string()) return parse_panel_spec(json.get<std::string>(), option);
  if (!json.is_object()) throw std::invalid_argument(option + ": a panel is a string or an object");
  if (!json.contains("variant")) throw std::invalid_argument(option + ": a panel object needs \"variant\"");
  if (!json["variant"].is_string())
    throw std::invalid_argument(option + ": a panel's \"variant\" is a name such as \"linear\", not " +
                                excerpt(json["variant"].dump(), 40));
  PanelSpec spec;
  try {
    spec.variant = parse_variant(json["variant"].get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(option + ": " + e.what());
  }
  for (const auto& item : json.items()) {
    if (item.key() == "variant") continue;
    const auto& value = item.value();
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_number() || value.is_boolean())
      text = value.is_boolean() ? (value.get<bool>() ? "on" : "off") : value.dump();
    else
      throw std::invalid_argument(option + ": panel key '" + excerpt(item.key()) + "' must be a string or a number");
    apply_key(spec, item.key(), text, option, json.dump());
  }
  return spec;
}

}  // namespace attnscope
