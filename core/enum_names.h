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
  const char* name;                   // the option value, the session-file value and what summaries print
  const char* label = nullptr;        // what the GUI shows (nullptr: the name)
  const char* description = nullptr;  // a few words for help texts and tooltips (nullptr: none)
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

// "a (what a is), b (what b is) or c": the choices with their descriptions, for help texts.
template <typename E>
std::string enum_choices_described() {
  const auto& entries = enum_entries<E>();
  std::string text;
  for (size_t i = 0; i < entries.size(); ++i) {
    text += std::string(i == 0 ? "" : i + 1 == entries.size() ? " or " : ", ") + entries[i].name;
    if (entries[i].description) text += std::string(" (") + entries[i].description + ")";
  }
  return text;
}

// "a|b|c": the choices as a help text's value name.
template <typename E>
std::string enum_choices_bar() {
  std::string text;
  for (const auto& entry : enum_entries<E>()) text += std::string(text.empty() ? "" : "|") + entry.name;
  return text;
}

// The value named `text`, or null.
template <typename E>
const E* find_enum(const std::string& text) {
  for (const auto& entry : enum_entries<E>())
    if (text == entry.name) return &entry.value;
  return nullptr;
}

// The value named `text`; throws std::invalid_argument "--OPTION expects a, b or c, got 'x'".
template <typename E>
E parse_enum(const std::string& option, const std::string& text) {
  if (const E* value = find_enum<E>(text)) return *value;
  throw std::invalid_argument("--" + option + " expects " + enum_choices_text<E>() + ", got '" + excerpt(text) + "'");
}

// The value named `text`; throws std::invalid_argument "unknown WHAT 'x' (expected a, b or c)".
template <typename E>
E parse_enum_named(const std::string& what, const std::string& text) {
  if (const E* value = find_enum<E>(text)) return *value;
  throw std::invalid_argument("unknown " + what + " '" + excerpt(text) + "' (expected " + enum_choices_text<E>() + ")");
}

// The entry of `value`; throws std::logic_error for a value its table lacks.
template <typename E>
const EnumEntry<E>& enum_entry(E value) {
  for (const auto& entry : enum_entries<E>())
    if (entry.value == value) return entry;
  throw std::logic_error("enum value " + std::to_string(int(value)) + " has no row in its name table");
}

}  // namespace attnscope
