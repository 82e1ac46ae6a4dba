#include "core/excerpt.h"

#include <cstdio>

namespace attnscope {

namespace {

// Control characters as visible escapes ("\x1b"): text from a file or an option must not reach a
// terminal as commands (an escape sequence in a prompt file could rewrite the screen or the title).
// C0 controls and DEL are bytes below 0x20 and 0x7f; C1 controls are U+0080..U+009F, bytes C2 80..9F.
std::string escape_controls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  char code[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      std::snprintf(code, sizeof code, "\\x%02x", byte);
      out += code;
    } else if (byte == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned char>(text[i + 1]));
      out += code;
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string excerpt(const std::string& text, size_t limit) {
  if (text.size() <= limit) return escape_controls(text);
  size_t end = limit;
  // Step back over UTF-8 continuation bytes (10xxxxxx) so that the cut lands between characters.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return escape_controls(text.substr(0, end)) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return escape_controls(message);
}

}  // namespace attnscope
