// Decoding of the text arguments of pickle protocols 0 and 1; see pickle_text_arguments.h.
#include "core/pickle_text_arguments.h"

#include <cctype>
#include <charconv>
#include <limits>

#include "core/excerpt.h"

namespace attnscope::pickle {
namespace {

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += char(code);
  } else if (code < 0x800) {
    out += char(0xC0 | (code >> 6));
    out += char(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += char(0xE0 | (code >> 12));
    out += char(0x80 | ((code >> 6) & 0x3F));
    out += char(0x80 | (code & 0x3F));
  } else {
    out += char(0xF0 | (code >> 18));
    out += char(0x80 | ((code >> 12) & 0x3F));
    out += char(0x80 | ((code >> 6) & 0x3F));
    out += char(0x80 | (code & 0x3F));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `count` hex digits at text[at], or -1.
int64_t hex_number(const std::string& text, size_t at, size_t count) {
  if (text.size() - at < count) return -1;
  int64_t value = 0;
  for (size_t i = 0; i < count; ++i) {
    const int digit = hex_digit(text[at + i]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

bool parse_text_integer(std::string text, int64_t& value) {
  if (!text.empty() && text.back() == 'L') text.pop_back();  // LONG's Python 2 suffix
  size_t at = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) ++at;
  if (at == text.size()) throw MalformedText("malformed number '" + excerpt(text, 40) + "'");
  uint64_t magnitude = 0;
  for (; at < text.size(); ++at) {
    if (!std::isdigit(static_cast<unsigned char>(text[at])))
      throw MalformedText("malformed number '" + excerpt(text, 40) + "'");
    if (magnitude > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
    magnitude = magnitude * 10 + uint64_t(text[at] - '0');
  }
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
  if (magnitude > limit) return false;
  value = negative ? int64_t(0 - magnitude) : int64_t(magnitude);
  return true;
}

double parse_text_float(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw MalformedText("malformed float '" + excerpt(text, 40) + "'");
  return value;
}

std::string decode_raw_unicode_escape(const std::string& text) {
  std::string out;
  size_t backslashes = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && backslashes % 2 == 0 && i + 1 < text.size() && (text[i + 1] == 'u' || text[i + 1] == 'U')) {
      const size_t digits = text[i + 1] == 'u' ? 4 : 8;
      const int64_t code = hex_number(text, i + 2, digits);
      if (code < 0 || code > 0x10FFFF) throw MalformedText("malformed \\u escape in a UNICODE string");
      append_utf8(out, uint32_t(code));
      i += 1 + digits;
      backslashes = 0;
      continue;
    }
    backslashes = c == '\\' ? backslashes + 1 : 0;
    append_utf8(out, static_cast<unsigned char>(c));
  }
  return out;
}

std::string decode_quoted_string(const std::string& text) {
  if (text.size() < 2 || text.front() != text.back() || (text.front() != '\'' && text.front() != '"'))
    throw MalformedText("the STRING opcode's argument is not quoted");
  std::string out;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] != '\\' || i + 2 >= text.size()) {
      out += text[i];
      continue;
    }
    const char e = text[++i];
    static const std::string simple = "\\'\"abfnrtv", replaced = "\\'\"\a\b\f\n\r\t\v";
    if (const size_t k = simple.find(e); k != std::string::npos) {
      out += replaced[k];
    } else if (e == 'x' && hex_number(text, i + 1, 2) >= 0) {
      out += char(hex_number(text, i + 1, 2));
      i += 2;
    } else if (e >= '0' && e <= '7') {
      int value = e - '0';
      for (int k = 0; k < 2 && i + 2 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7'; ++k)
        value = value * 8 + (text[++i] - '0');
      out += char(value);
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

}  // namespace attnscope::pickle
