// UTF-8 in and out, and the few Python str behaviours CLIP's text cleaning relies on (str.isspace,
// str.strip, str.lower, bytes.decode(errors="replace")), reproduced on code points with utf8proc.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace attnscope {

// The code points of `bytes` when it is well-formed UTF-8 (no overlong forms, surrogates or values
// past U+10FFFF: what Python's strict decoder accepts); else nothing, with the offset of the first
// byte that is not part of a valid character in `error_offset`.
std::optional<std::u32string> decode_utf8(const std::string& bytes, size_t* error_offset = nullptr);

// Python's bytes.decode("utf-8", errors="replace"): one U+FFFD for each maximal ill-formed subpart.
std::u32string decode_utf8_replacing(const std::string& bytes);

// UTF-8 of code points (each at most U+10FFFF, no surrogates: what decode_utf8 returns).
std::string encode_utf8(const std::u32string& text);
void append_utf8(char32_t c, std::string& out);

// Python's str.isspace for one character: bidirectional class WS, B or S, or category Zs. This is
// the 25 White_Space characters plus U+001C..U+001F.
bool python_isspace(char32_t c);

// \s of the `regex` module (what clip/simple_tokenizer.py imports as re): the Unicode White_Space
// property, which unlike str.isspace leaves out U+001C..U+001F.
bool regex_module_space(char32_t c);

// Python's str.strip() with no argument: leading and trailing python_isspace characters removed.
std::u32string python_strip(const std::u32string& text);

// Python's str.lower(): the full lowercase mapping (U+0130 becomes "i" U+0307), and capital sigma as
// final sigma when a cased letter precedes it and none follows, case-ignorable characters skipped
// (Unicode's Final_Sigma, as CPython's handle_capital_sigma tests it). Mappings and categories are
// utf8proc's.
std::u32string python_lower(const std::u32string& text);

// What a character is to Python's Final_Sigma test, which skips Case_Ignorable characters and then
// asks whether the next one is Cased (Unicode's DerivedCoreProperties).
enum class SigmaContext {
  CaseIgnorable,  // skipped (whether Cased or not)
  Cased,          // Cased and not Case_Ignorable
  Other,
};
SigmaContext sigma_context(char32_t c);

}  // namespace attnscope
