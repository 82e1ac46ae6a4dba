#include "models/attention_settings.h"
#include "core/excerpt.h"

#include <stdexcept>

namespace attnscope {

namespace {

// "a, b or c": a mode table's names or descriptions as help texts and errors list them.
std::string list_alternatives(const std::vector<std::string>& items) {
  std::string listed;
  for (size_t i = 0; i < items.size(); ++i) listed += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return listed;
}

}  // namespace

const VariantSpec& variant_spec(Variant variant) {
  for (const VariantSpec& spec : variant_table())
    if (spec.variant == variant) return spec;
  throw std::logic_error("variant " + std::to_string(int(variant)) + " has no row in the variant table");
}

Variant parse_variant(const std::string& name) {
  for (const VariantSpec& spec : variant_table())
    if (name == spec.name) return spec.variant;
  throw std::invalid_argument("unknown variant '" + excerpt(name) + "' (expected " + variant_choices() + ")");
}

std::string to_string(Variant variant) { return variant_spec(variant).name; }

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const VariantSpec& spec : variant_table())
    if (spec.variant != Variant::Native) names.push_back(spec.name);
  return names;
}

std::string variant_choices() {
  std::vector<std::string> names;
  for (const VariantSpec& spec : variant_table()) names.push_back(spec.name);
  return list_alternatives(names);
}

const std::vector<FocusNormSpec>& focus_norm_table() {
  static const std::vector<FocusNormSpec> table = {
      {FocusNorm::AllChannels, "all", "over all channels (authors' code)"},
      {FocusNorm::PerHead, "head", "per head (paper)"},
  };
  return table;
}

FocusNorm parse_focus_norm(const std::string& name) {
  for (const FocusNormSpec& spec : focus_norm_table())
    if (name == spec.name) return spec.norm;
  std::vector<std::string> names;
  for (const FocusNormSpec& spec : focus_norm_table()) names.push_back(spec.name);
  throw std::invalid_argument("unknown f_p norm mode '" + excerpt(name) + "' (expected " + list_alternatives(names) +
                              ")");
}

std::string to_string(FocusNorm norm) {
  for (const FocusNormSpec& spec : focus_norm_table())
    if (spec.norm == norm) return spec.name;
  throw std::logic_error("f_p norm mode " + std::to_string(int(norm)) + " has no row in its table");
}

std::string focus_norm_choices() {
  std::string names;
  for (const FocusNormSpec& spec : focus_norm_table()) names += (names.empty() ? "" : "|") + std::string(spec.name);
  return names;
}

std::string focus_norm_help() {
  std::vector<std::string> descriptions;
  for (const FocusNormSpec& spec : focus_norm_table()) descriptions.push_back(spec.description);
  return "f_p norms " + list_alternatives(descriptions);
}

}  // namespace attnscope
