#include "session/panel_spec.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/excerpt.h"
#include "session/app_state.h"

namespace attnscope {

namespace {

const char* const kKeys = "model=, p=, window=, anchors=, dwc=, norm=";

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// One KEY=VALUE of a spec, parsed by the session's own option (so a spec accepts exactly what the
// flag does: --p positive, --dwc on|off, ...).
void apply_key(PanelSpec& spec, const std::string& key, const std::string& value, const std::string& option,
               const std::string& text) {
  if (key == "model") {
    if (value.empty()) throw std::invalid_argument(option + ": 'model=' needs a path in '" + excerpt(text) + "'");
    spec.model = value;
    return;
  }
  AppState scratch;
  if (key == "p") {
    set_option(scratch, "p", value);
    spec.p = scratch.attention.p;
  } else if (key == "window") {
    set_option(scratch, "window", value);
    spec.window = scratch.attention.window;
  } else if (key == "anchors") {
    set_option(scratch, "anchors", value);
    spec.anchors = scratch.attention.anchors;
  } else if (key == "dwc") {
    set_option(scratch, "dwc", value);
    spec.dwc = scratch.attention.dwc;
  } else if (key == "norm") {
    set_option(scratch, "norm", value);
    spec.norm = scratch.attention.norm;
  } else {
    throw std::invalid_argument(option + ": '" + excerpt(key) + "' in '" + excerpt(text) + "' is not one of " + kKeys);
  }
}

}  // namespace

AttentionSettings PanelSpec::settings(const AttentionSettings& base) const {
  AttentionSettings settings = base;
  settings.variant = variant;
  if (p) settings.p = *p;
  if (window) settings.window = *window;
  if (anchors) settings.anchors = *anchors;
  if (dwc) settings.dwc = *dwc;
  if (norm) settings.norm = *norm;
  return settings;
}

std::string PanelSpec::label() const {
  std::string text = to_string(variant);
  if (p) text += " p=" + format_number(*p);
  if (window) text += " w=" + std::to_string(*window);
  if (anchors) text += " m=" + std::to_string(*anchors);
  if (dwc) text += std::string(" dwc=") + (*dwc ? "on" : "off");
  if (norm) text += " norm=" + to_string(*norm);
  if (model.empty()) return text;
  return std::filesystem::path(model).stem().string() + ": " + text;
}

bool PanelSpec::operator==(const PanelSpec& other) const {
  return model == other.model && variant == other.variant && p == other.p && window == other.window &&
         anchors == other.anchors && dwc == other.dwc && norm == other.norm;
}

PanelSpec parse_panel_spec(const std::string& text, const std::string& option) {
  if (text.empty()) throw std::invalid_argument(option + " has an empty entry");
  PanelSpec spec;
  std::stringstream parts(text);
  std::string part;
  bool first = true;
  while (std::getline(parts, part, ':')) {
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
                                  kKeys);
    apply_key(spec, part.substr(0, eq), part.substr(eq + 1), option, text);
  }
  if (text.back() == ':') throw std::invalid_argument(option + ": '" + excerpt(text) + "' ends with ':'");
  return spec;
}

std::string to_string(const PanelSpec& spec) {
  std::string text = to_string(spec.variant);
  if (!spec.model.empty()) text += ":model=" + spec.model;
  if (spec.p) text += ":p=" + format_number(*spec.p);
  if (spec.window) text += ":window=" + std::to_string(*spec.window);
  if (spec.anchors) text += ":anchors=" + std::to_string(*spec.anchors);
  if (spec.dwc) text += std::string(":dwc=") + (*spec.dwc ? "on" : "off");
  if (spec.norm) text += ":norm=" + to_string(*spec.norm);
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
  if (spec.p) json["p"] = *spec.p;
  if (spec.window) json["window"] = *spec.window;
  if (spec.anchors) json["anchors"] = *spec.anchors;
  if (spec.dwc) json["dwc"] = *spec.dwc ? "on" : "off";
  if (spec.norm) json["norm"] = to_string(*spec.norm);
  return json;
}

PanelSpec panel_spec_from_json(const nlohmann::json& json, const std::string& option) {
  if (json.is_string()) return parse_panel_spec(json.get<std::string>(), option);
  if (!json.is_object()) throw std::invalid_argument(option + ": a panel is a string or an object");
  if (!json.contains("variant") || !json["variant"].is_string())
    throw std::invalid_argument(option + ": a panel object needs \"variant\"");
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
