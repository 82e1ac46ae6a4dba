// A file of text prompts (CLIP's zero-shot and text-prompted maps): UTF-8, one prompt a line, blank
// lines ignored. Read whole and checked before anything is computed, so that a bad file writes
// nothing: its size and count bounded, every line valid UTF-8, at least one prompt.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attnscope {

struct PromptLine {
  std::string text;  // as in the file, without its line ending ("\n" or "\r\n")
  size_t line = 0;   // 1-based line number in the file
};

// Bounds of a prompt file: CLIP prompts are at most 77 tokens, so a longer file is not a prompt list.
constexpr size_t kMaxPromptFileBytes = size_t(4) << 20;
constexpr size_t kMaxPrompts = 65536;

// The prompts of `path`, in order. A UTF-8 byte order mark at the start is skipped; a line of
// white space only is blank. Throws std::invalid_argument naming the file and, for text that is
// not UTF-8, the line and byte; for a missing, unreadable, empty (no prompt) or too large file, why.
std::vector<PromptLine> read_prompt_file(const std::string& path);

// The prompts of `text` as read_prompt_file reads a file's bytes; `source` names it in messages.
std::vector<PromptLine> parse_prompt_text(const std::string& text, const std::string& source);

}  // namespace attnscope
