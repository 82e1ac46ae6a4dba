#include "core/clip_text.h"

#include <utf8proc.h>

#include "core/html_unescape.h"
#include "core/unicode_text.h"

namespace attnscope::clip_text {

namespace {

bool is_letter_or_number(char32_t c) {
  switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Whether text[at..] spells `literal` (ASCII) under IGNORECASE.
bool literal_at(const std::u32string& text, size_t at, const char* literal) {
  for (; *literal; ++literal, ++at) {
    if (at >= text.size()) return false;
    const char expected = *literal;
    const bool same = expected >= 'a' && expected <= 'z' ? matches_pattern_letter(text[at], expected)
                                                         : text[at] == char32_t(expected);
    if (!same) return false;
  }
  return true;
}

size_t length_of(const char* literal) { return std::char_traits<char>::length(literal); }

}  // namespace

std::u32string basic_clean(const std::u32string& text) {
  // ftfy.fix_text(text) comes first in simple_tokenizer.py; it is not reproduced (see the header).
  return python_strip(html_unescape(html_unescape(text)));
}

std::u32string whitespace_clean(const std::u32string& text) {
  std::u32string collapsed;
  collapsed.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (!regex_module_space(text[i])) {
      collapsed += text[i++];
      continue;
    }
    while (i < text.size() && regex_module_space(text[i])) ++i;
    collapsed += U' ';
  }
  return python_strip(collapsed);
}

std::u32string clean_and_lower(const std::u32string& text) { return python_lower(whitespace_clean(basic_clean(text))); }

bool matches_pattern_letter(char32_t c, char letter) {
  if (c == char32_t(letter) || c == char32_t(letter - 'a' + 'A')) return true;
  return letter == 's' && c == 0x17F;
}

SplitClass split_class(char32_t c) {
  if (regex_module_space(c)) return SplitClass::None;
  switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return SplitClass::Letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return SplitClass::Number;
    default:
      break;
  }
  // The regex module's negated class under IGNORECASE refuses a character one of whose case
  // partners is in the class.
  const auto code = utf8proc_int32_t(c);
  for (const auto partner : {utf8proc_toupper(code), utf8proc_tolower(code), utf8proc_totitle(code)})
    if (partner != code && is_letter_or_number(char32_t(partner))) return SplitClass::None;
  return SplitClass::Other;
}

std::vector<std::u32string> split_words(const std::u32string& text) {
  static const char* const kSpecials[] = {"<|startoftext|>", "<|endoftext|>"};
  static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<std::u32string> words;
  size_t i = 0;
  const auto take = [&](size_t length) {
    words.push_back(text.substr(i, length));
    i += length;
  };
  while (i < text.size()) {
    bool matched = false;
    for (const char* special : kSpecials)
      if (!matched && literal_at(text, i, special)) {
        take(length_of(special));
        matched = true;
      }
    if (!matched && text[i] == U'\'')
      for (const char* contraction : kContractions)
        if (!matched && literal_at(text, i, contraction)) {
          take(length_of(contraction));
          matched = true;
        }
    if (matched) continue;
    const SplitClass kind = split_class(text[i]);
    if (kind == SplitClass::None) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (kind != SplitClass::Number)  // [\p{N}] takes one digit; the other two classes take runs
      while (end < text.size() && split_class(text[end]) == kind) ++end;
    take(end - i);
  }
  return words;
}

}  // namespace attnscope::clip_text
