// Values from outside (option values, session strings, key names, metadata) quoted in messages:
// cut to a bounded length, so that a 100 MB string in a file never reaches a terminal or log whole.
#pragma once

#include <cstddef>
#include <string>

namespace attnscope {

constexpr size_t kExcerptLength = 200;

// `text` itself when it is at most `limit` bytes; else its first `limit` bytes (never splitting a
// UTF-8 sequence) followed by "... (N bytes)". Control characters (C0, DEL, C1) become visible
// escapes ("\x1b", "\u009b"), so that no quoted text reaches a terminal as its commands.
std::string excerpt(const std::string& text, size_t limit = kExcerptLength);

// An error message on one line (line breaks become spaces, other control characters escapes as in
// excerpt), whatever the library or a quoted file wrote.
std::string one_line(std::string message);

}  // namespace attnscope
