// One name table per enum, read by parsing, printing, help texts and GUI labels, so that an enum's
// spellings are written once. An enum opts in by specialising EnumTable<E> with its entries.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/excerpt.h"

namespace attnscope {

template <typename E>
struct EnumEntry {
  E value;
  const char* name;   // the option value, the session-file value and what summaries print
  const char* label;  // what the GUI shows (nullptr: the name)
};

// Specialise: `static const std::vector<EnumEntry<E>>& entries();` in the enum's own header.
template <typename E>
struct EnumTable;

template <typename E>
const std::vector<EnumEntry<E>>& enum_entries() {
  return EnumTable<E>::entries();
}

template <typename E>
std::string enum_name(E value) {
  for (const auto& entry : enum_entries<E>())
    if (entry.value == value) return entry.name;
  return "?";
}

template <typename E>
const char* enum_label(E value) {
  for (const auto& entry : enum_entries<E>())
    if (entry.value == value) return entry.label ? entry.label : entry.name;
  return "?";
}

// "a, b or c": the choices in prose, for messages.
template <typename E>
std::string enum_choices_text() {
  const auto& entries = enum_entries<E>();
  std::string text;
  for (size_t i = 0; i < entries.size(); ++i)
    text += std::string(i == 0 ? "" : i + 1 == entries.size() ? " or " : ", ") + entries[i].name;
  return text;
}

// "a|b|c": the choices as a help text's value name.
template <typename E>
std::string enum_choices_bar() {
  std::string text;
  for (const auto& entry : enum_entries<E>()) text += std::string(text.empty() ? "" : "|") + entry.name;
  return text;
}

// The value named `text`; throws std::invalid_argument "--OPTION expects a, b or c, got 'x'".
template <typename E>
E parse_enum(const std::string& option, const std::string& text) {
  for (const auto& entry : enum_entries<E>())
    if (text == entry.name) return entry.value;
  throw std::invalid_argument("--" + option + " expects " + enum_choices_text<E>() + ", got '" + excerpt(text) + "'");
}

}  // namespace attnscope
