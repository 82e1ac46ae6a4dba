#include "core/html_unescape.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

namespace attnscope {

namespace html_entities {

namespace {

// The value of the named reference `name` (ASCII), or nullptr.
const char32_t* find_entity(const std::string& name) {
  const Html5Entity* end = kHtml5Entities + kHtml5EntityCount;
  const Html5Entity* found = std::lower_bound(
      kHtml5Entities, end, name,
      [](const Html5Entity& entity, const std::string& key) { return std::strcmp(entity.name, key.c_str()) < 0; });
  return found != end && name == found->name ? found->value : nullptr;
}

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

int hex_value(char32_t c) {
  if (c >= U'0' && c <= U'9') return int(c - U'0');
  if (c >= U'a' && c <= U'f') return int(c - U'a' + 10);
  if (c >= U'A' && c <= U'F') return int(c - U'A' + 10);
  return -1;
}

// What _replace_charref returns for the number of a numeric reference (`value` saturates past
// U+10FFFF, which gives the same answer as Python's exact integer).
std::u32string numeric_reference(uint32_t value) {
  // html._invalid_charrefs: the HTML5 tokenizer's replacements, windows-1252 for 0x80..0x9F.
  static const char32_t kWindows1252[32] = {0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                                            0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,   0x017D, 0x8F,
                                            0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                                            0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};
  if (value == 0x00) return U"\uFFFD";
  if (value == 0x0D) return U"\r";
  if (value >= 0x80 && value <= 0x9F) return std::u32string(1, kWindows1252[value - 0x80]);
  if ((value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF) return U"\uFFFD";
  // html._invalid_codepoints: controls other than tab, LF, FF, CR and space; noncharacters.
  const bool control = (value >= 0x01 && value <= 0x08) || value == 0x0B || (value >= 0x0E && value <= 0x1F) ||
                       (value >= 0x7F && value <= 0x9F);
  const bool noncharacter = (value >= 0xFDD0 && value <= 0xFDEF) || (value & 0xFFFE) == 0xFFFE;
  if (control || noncharacter) return U"";
  return std::u32string(1, char32_t(value));
}

// Python's _charref pattern at text[start] (just after a '&'): the reference's replacement and
// how many characters it spans, or nothing when the pattern does not match there.
struct Reference {
  std::u32string replacement;
  size_t length = 0;
};

std::optional<Reference> numeric_at(const std::u32string& text, size_t start) {
  // '#' then digits, or '#x'/'#X' then hex digits; the named alternative cannot start with '#'.
  const size_t n = text.size();
  size_t i = start + 1;
  const bool hex = i < n && (text[i] == U'x' || text[i] == U'X');
  if (hex) ++i;
  const size_t digits_start = i;
  uint32_t value = 0;
  constexpr uint32_t kPastUnicode = 0x110000;
  for (; i < n; ++i) {
    const int digit = hex ? hex_value(text[i]) : (is_ascii_digit(text[i]) ? int(text[i] - U'0') : -1);
    if (digit < 0) break;
    value = std::min<uint64_t>(uint64_t(value) * (hex ? 16 : 10) + uint64_t(digit), kPastUnicode);
  }
  if (i == digits_start) return std::nullopt;
  if (i < n && text[i] == U';') ++i;
  return Reference{numeric_reference(value), i - start};
}

bool ends_named_reference(char32_t c) {
  return c == U'\t' || c == U'\n' || c == U'\f' || c == U' ' || c == U'<' || c == U'&' || c == U'#' || c == U';';
}

std::optional<Reference> named_at(const std::u32string& text, size_t start) {
  constexpr size_t kMaxNameLength = 32;  // [^\t\n\f <&#;]{1,32}
  const size_t n = text.size();
  size_t end = start;
  while (end < n && end - start < kMaxNameLength && !ends_named_reference(text[end])) ++end;
  if (end == start) return std::nullopt;
  if (end < n && text[end] == U';') ++end;
  const std::u32string name = text.substr(start, end - start);
  // Entity names are ASCII: only the name's leading ASCII characters can be looked up.
  std::string ascii;
  for (char32_t c : name) {
    if (c >= 0x80) break;
    ascii += char(c);
  }
  if (ascii.size() == name.size())
    if (const char32_t* value = find_entity(ascii)) return Reference{value, name.size()};
  // The longest prefix of at least 2 characters that is a name.
  for (size_t length = std::min(name.size() - 1, ascii.size()); length >= 2; --length)
    if (const char32_t* value = find_entity(ascii.substr(0, length)))
      return Reference{value + name.substr(length), name.size()};
  return Reference{U"&" + name, name.size()};
}

}  // namespace

}  // namespace html_entities

std::u32string html_unescape(const std::u32string& text) {
  using namespace html_entities;
  if (text.find(U'&') == std::u32string::npos) return text;
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != U'&') {
      out += text[i++];
      continue;
    }
    const size_t start = i + 1;
    const auto reference = start < text.size() && text[start] == U'#' ? numeric_at(text, start) : named_at(text, start);
    if (reference) {
      out += reference->replacement;
      i = start + reference->length;
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace attnscope
