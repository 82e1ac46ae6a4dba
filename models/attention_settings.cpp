#include "models/attention_settings.h"

#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

Variant parse_variant(const std::string& name) {
  if (const Variant* variant = find_enum<Variant>(name)) return *variant;
  throw std::invalid_argument("unknown variant '" + excerpt(name) + "' (expected " + variant_choices() + ")");
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& entry : enum_entries<Variant>())
    if (entry.value != Variant::Native) names.push_back(entry.name);
  return names;
}

std::string variant_choices() { return enum_choices_text<Variant>(); }

const std::vector<EnumEntry<FocusNorm>>& EnumTable<FocusNorm>::entries() {
  static const std::vector<EnumEntry<FocusNorm>> table = {
      {FocusNorm::AllChannels, "all", nullptr, "over all channels (authors' code)"},
      {FocusNorm::PerHead, "head", nullptr, "per head (paper)"},
  };
  return table;
}

std::string focus_norm_choices() { return enum_choices_bar<FocusNorm>(); }

std::string focus_norm_help() {
  const auto& entries = enum_entries<FocusNorm>();
  std::string help = "f_p norms ";
  for (size_t i = 0; i < entries.size(); ++i)
    help += std::string(i == 0 ? "" : i + 1 == entries.size() ? " or " : ", ") + entries[i].description;
  return help;
}

const AttentionKnob* find_attention_knob(const std::string& name) {
  for (const AttentionKnob& knob : attention_knobs())
    if (knob.name == name) return &knob;
  return nullptr;
}

std::string knobs_key(const AttentionSettings& settings) {
  std::string key;
  for (const AttentionKnob& knob : attention_knobs()) key += knob.name + "=" + knob.text(settings) + "|";
  return key;
}

}  // namespace attnscope
