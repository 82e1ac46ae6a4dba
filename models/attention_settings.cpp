#include "models/attention_settings.h"

#include <algorithm>
#include <limits>
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

const std::vector<EnumEntry<AblationKind>>& EnumTable<AblationKind>::entries() {
  static const std::vector<EnumEntry<AblationKind>> table = {
      {AblationKind::Zero, "zero", nullptr, "z replaced by zero"},
      {AblationKind::Mean, "mean", nullptr, "z replaced by its mean per token over --ablation-images"},
  };
  return table;
}

std::string head_name(const HeadIndex& head) { return std::to_string(head.layer) + "." + std::to_string(head.head); }

std::vector<HeadIndex> parse_head_list(const std::string& text) {
  std::vector<HeadIndex> heads;
  if (text.empty() || text == "none") return heads;
  auto whole = [](const std::string& part) {
    return !part.empty() && part.size() <= 6 && part.find_first_not_of("0123456789") == std::string::npos;
  };
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find_first_of(",+", begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t dot = item.find('.');
    if (dot == std::string::npos || !whole(item.substr(0, dot)) || !whole(item.substr(dot + 1)))
      throw std::invalid_argument("--ablate: '" + excerpt(item) +
                                  "' is not a head: give LAYER.HEAD, e.g. 3.1, separated by commas");
    const HeadIndex head{std::stoi(item.substr(0, dot)), std::stoi(item.substr(dot + 1))};
    for (const HeadIndex& listed : heads)
      if (listed == head) throw std::invalid_argument("--ablate: head " + head_name(head) + " is listed twice");
    heads.push_back(head);
    begin = end + 1;
  }
  return heads;
}

std::string head_list_text(const std::vector<HeadIndex>& heads) {
  if (heads.empty()) return "none";
  std::string text;
  for (const HeadIndex& head : heads) text += (text.empty() ? "" : ",") + head_name(head);
  return text;
}

int first_ablated_layer(const HeadAblationSetting& ablation) {
  int first = std::numeric_limits<int>::max();
  for (const HeadIndex& head : ablation.heads) first = std::min(first, head.layer);
  return first;
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

std::string settings_key(const AttentionSettings& settings) {
  return to_string(settings.variant) + "|" + knobs_key(settings);
}

}  // namespace attnscope
