#include "models/attention_settings.h"
#include "core/excerpt.h"

#include <stdexcept>

namespace attnscope {

namespace {
struct VariantName {
  Variant variant;
  const char* name;
};
constexpr VariantName kVariantNames[] = {
    {Variant::Native, "native"},   {Variant::Softmax, "softmax"},   {Variant::Linear, "linear"},
    {Variant::Focused, "focused"}, {Variant::Enhanced, "enhanced"}, {Variant::Window, "window"},
    {Variant::Anchor, "anchor"},
};
}  // namespace

Variant parse_variant(const std::string& name) {
  for (const auto& entry : kVariantNames)
    if (name == entry.name) return entry.variant;
  throw std::invalid_argument("unknown variant '" + excerpt(name) +
                              "' (expected native, softmax, linear, focused, enhanced, window or anchor)");
}

std::string to_string(Variant variant) {
  for (const auto& entry : kVariantNames)
    if (variant == entry.variant) return entry.name;
  return "?";
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& entry : kVariantNames)
    if (entry.variant != Variant::Native) names.push_back(entry.name);
  return names;
}

FocusNorm parse_focus_norm(const std::string& name) {
  if (name == "all") return FocusNorm::AllChannels;
  if (name == "head") return FocusNorm::PerHead;
  throw std::invalid_argument("unknown f_p norm mode '" + excerpt(name) + "' (expected all or head)");
}

std::string to_string(FocusNorm norm) { return norm == FocusNorm::AllChannels ? "all" : "head"; }

}  // namespace attnscope
