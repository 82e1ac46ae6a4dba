// One side-by-side panel of the workbench, or one row of a comparison figure: which checkpoint,
// which attention variant, and the parameters this panel sets itself. What a spec leaves out
// follows the session (--model, --p, --window, ...), so "focused" alone still means the session's
// model with its p, as side-by-side variants always did.
//
// Text (CLI flags --compare and --variants, comma-separated): the variant, then KEY=VALUE parts
// joined by ':' in any order, e.g. "focused:p=8", "native:model=assets/models/linear.safetensors".
// JSON (session files): {"variant": "focused", "p": 8} or {"model": "...", "variant": "native"}.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/attention_settings.h"

namespace attnscope {

struct PanelSpec {
  std::string model;  // empty: the session's model
  Variant variant = Variant::Native;
  // The knobs of the knob table (models/attention_settings.h) this panel sets itself, by name, with
  // their values in `values`; the others follow the session.
  std::vector<std::string> own;
  AttentionSettings values;

  // The settings this panel runs with: the session's `base` with this panel's variant and keys.
  AttentionSettings settings(const AttentionSettings& base) const;
  bool sets(const std::string& knob) const;
  // Sets the knob `name` for this panel (the value as the option takes it); throws as the option.
  void set(const std::string& name, const std::string& text);
  // This panel's own value of `knob` read through its field, or none when it follows the session.
  template <typename T>
  std::optional<T> own_value(const std::string& knob, T AttentionSettings::*field) const {
    return sets(knob) ? std::optional<T>(values.*field) : std::nullopt;
  }
  void follow_session(const std::string& knob);  // drops this panel's own value
  std::string model_or(const std::string& session_model) const { return model.empty() ? session_model : model; }
  // "focused p=8" or, with a model, "linear: focused p=8" (its file's stem; the papers' letters w=, m=).
  std::string label() const;
  bool operator==(const PanelSpec& other) const;
};

// Throws std::invalid_argument naming `option` ("--compare") and what is wrong.
PanelSpec parse_panel_spec(const std::string& text, const std::string& option);
std::string to_string(const PanelSpec& spec);  // the text form, keys in a fixed order

// A comma-separated list; empty text gives an empty list.
std::vector<PanelSpec> parse_panel_list(const std::string& text, const std::string& option);
std::string to_string(const std::vector<PanelSpec>& specs);

nlohmann::json to_json(const PanelSpec& spec);
// An object as to_json writes it, or a string in the text form.
PanelSpec panel_spec_from_json(const nlohmann::json& json, const std::string& option);

}  // namespace attnscope
