#include "core/unicode_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

namespace attnscope {

namespace unicode_detail {

// The lead byte's sequence length (0: not a lead byte) and the range its second byte must lie in:
// the Unicode table of well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
struct LeadByte {
  int length = 0;
  unsigned char second_low = 0x80, second_high = 0xBF;
};

LeadByte lead_byte(unsigned char byte) {
  if (byte < 0x80) return {1};
  if (byte >= 0xC2 && byte <= 0xDF) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if ((byte >= 0xE1 && byte <= 0xEC) || byte == 0xEE || byte == 0xEF) return {3};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {4};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

// At bytes[i]: the character and its length, or (when ill-formed) length = the maximal subpart
// (at least 1) and ok = false.
struct Decoded {
  char32_t c = 0;
  size_t length = 1;
  bool ok = false;
};

Decoded decode_one(const std::string& bytes, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const LeadByte lead = lead_byte(byte(i));
  if (lead.length == 0) return {};
  if (lead.length == 1) return {char32_t(byte(i)), 1, true};
  char32_t c = byte(i) & (0xFF >> (lead.length + 1));
  for (int k = 1; k < lead.length; ++k) {
    const bool in_range =
        i + k < bytes.size() &&
        (k == 1 ? byte(i + k) >= lead.second_low && byte(i + k) <= lead.second_high : (byte(i + k) & 0xC0) == 0x80);
    if (!in_range) return {0, size_t(k), false};
    c = (c << 6) | (byte(i + k) & 0x3F);
  }
  return {c, size_t(lead.length), true};
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace unicode_detail

std::optional<std::u32string> decode_utf8(const std::string& bytes, size_t* error_offset) {
  std::u32string text;
  text.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto decoded = unicode_detail::decode_one(bytes, i);
    if (!decoded.ok) {
      if (error_offset) *error_offset = i;
      return std::nullopt;
    }
    text += decoded.c;
    i += decoded.length;
  }
  return text;
}

std::u32string decode_utf8_replacing(const std::string& bytes) {
  std::u32string text;
  text.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto decoded = unicode_detail::decode_one(bytes, i);
    text += decoded.ok ? decoded.c : char32_t(0xFFFD);
    i += decoded.length;
  }
  return text;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(c, out);
  return out;
}

bool python_isspace(char32_t c) { return unicode_detail::is_white_space(c) || (c >= 0x1C && c <= 0x1F); }

bool regex_module_space(char32_t c) { return unicode_detail::is_white_space(c); }

std::u32string python_strip(const std::u32string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && python_isspace(text[begin])) ++begin;
  while (end > begin && python_isspace(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

SigmaContext sigma_context(char32_t c) {
  switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return SigmaContext::CaseIgnorable;
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return SigmaContext::Cased;
    default:
      break;
  }
  // Case_Ignorable also takes Word_Break MidLetter, MidNumLet and Single_Quote.
  static constexpr char32_t kWordBreakIgnorable[] = {0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F,
                                                     0x05F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                                     0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  if (std::find(std::begin(kWordBreakIgnorable), std::end(kWordBreakIgnorable), c) != std::end(kWordBreakIgnorable))
    return SigmaContext::CaseIgnorable;
  // Cased also takes Other_Lowercase and Other_Uppercase; these are the ones not Case_Ignorable
  // (the rest are modifier letters and U+0345): ordinal indicators, Roman numerals, and circled,
  // squared and negative latin letters.
  const bool other_cased = c == 0xAA || c == 0xBA || (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9) ||
                           (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
                           (c >= 0x1F170 && c <= 0x1F189);
  return other_cased ? SigmaContext::Cased : SigmaContext::Other;
}

std::u32string python_lower(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x3A3) {
      // CPython's handle_capital_sigma: final when, skipping case-ignorable characters, a cased one
      // comes before and no cased one after.
      size_t j = i;
      while (j > 0 && sigma_context(text[j - 1]) == SigmaContext::CaseIgnorable) --j;
      bool final_sigma = j > 0 && sigma_context(text[j - 1]) == SigmaContext::Cased;
      if (final_sigma) {
        size_t k = i + 1;
        while (k < text.size() && sigma_context(text[k]) == SigmaContext::CaseIgnorable) ++k;
        final_sigma = k == text.size() || sigma_context(text[k]) != SigmaContext::Cased;
      }
      out += final_sigma ? char32_t(0x3C2) : char32_t(0x3C3);
    } else if (c == 0x130) {
      out += U"i\u0307";  // SpecialCasing's one unconditional multi-character lowercase
    } else {
      out += char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
    }
  }
  return out;
}

}  // namespace attnscope
