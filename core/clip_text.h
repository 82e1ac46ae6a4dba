// CLIP's text cleaning and word split before byte-pair encoding, as clip/simple_tokenizer.py does them
// (SimpleTokenizer.encode up to its byte encoder), on code points. ftfy.fix_text, the first step of
// basic_clean, is NOT reproduced (it repairs mojibake and normalises some characters; a prompt it
// would change may tokenize differently here than in OpenAI's code); everything after it is exact.
#pragma once

#include <string>
#include <vector>

namespace attnscope::clip_text {

// basic_clean without ftfy: html.unescape twice, then str.strip().
std::u32string basic_clean(const std::u32string& text);

// whitespace_clean: every run of the regex module's \s (White_Space) becomes one space, then
// str.strip() (which also strips U+001C..U+001F; inside the text they stay).
std::u32string whitespace_clean(const std::u32string& text);

// whitespace_clean(basic_clean(text)).lower(): what the split pattern runs on.
std::u32string clean_and_lower(const std::u32string& text);

// How the split pattern's classes see one character under re.IGNORECASE (the regex module's).
enum class SplitClass {
  Letter,  // [\p{L}]: categories Lu, Ll, Lt, Lm, Lo
  Number,  // [\p{N}]: Nd, Nl, No
  Other,   // [^\s\p{L}\p{N}]
  None,    // in no class, skipped between words: \s, and U+0345, whose case partner ι is a letter, so
           // that the negated class under IGNORECASE refuses it while [\p{L}] does not take it
};
SplitClass split_class(char32_t c);

// Whether `c` matches the ASCII lower-case letter `letter` of the pattern under the regex module's
// IGNORECASE: the letter, its capital, and for 's' also U+017F (long s), which case-folds to 's'.
bool matches_pattern_letter(char32_t c, char letter);

// re.findall of simple_tokenizer's pattern
//   <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
// with IGNORECASE: at each position the first alternative that matches wins; where none does (a
// SplitClass::None character) the scan moves on by one character.
std::vector<std::u32string> split_words(const std::u32string& text);

}  // namespace attnscope::clip_text
