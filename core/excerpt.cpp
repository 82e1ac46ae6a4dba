#include "core/excerpt.h"

namespace attnscope {

std::string excerpt(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit;
  // Step back over UTF-8 continuation bytes (10xxxxxx) so that the cut lands between characters.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return message;
}

}  // namespace attnscope
