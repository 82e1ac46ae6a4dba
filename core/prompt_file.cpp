#include "core/prompt_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/excerpt.h"
#include "core/unicode_text.h"

namespace attnscope {

namespace {

// Nothing but white space as CLIP's cleaning sees it (Python's str.isspace, Unicode's too: a line of
// no-break or ideographic spaces tokenizes to nothing and is not a prompt). `line` is UTF-8.
bool blank(const std::string& line) {
  const auto code_points = decode_utf8(line);
  if (!code_points) return false;
  for (char32_t c : *code_points)
    if (!python_isspace(c)) return false;
  return true;
}

}  // namespace

std::vector<PromptLine> parse_prompt_text(const std::string& text, const std::string& source) {
  if (text.size() > kMaxPromptFileBytes)
    throw std::invalid_argument(source + " holds " + std::to_string(text.size()) + " bytes; a prompt file is at most " +
                                std::to_string(kMaxPromptFileBytes) +
                                " bytes (one prompt of at most 77 tokens a line)");
  std::vector<PromptLine> prompts;
  size_t start = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  for (size_t line = 1; start < text.size(); ++line) {
    // A line ends at \n, \r\n or a lone \r (old Mac files): each is one line break.
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string::npos) end = text.size();
    const std::string content = text.substr(start, end - start);
    const size_t next =
        end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n' ? end + 2 : end + 1;
    size_t bad = 0;
    if (!decode_utf8(content, &bad))
      throw std::invalid_argument(source + " line " + std::to_string(line) + " is not UTF-8 (byte " +
                                  std::to_string(bad + 1) + " of the line); save the prompts as UTF-8");
    if (!blank(content)) {
      if (prompts.size() == kMaxPrompts)
        throw std::invalid_argument(source + " holds more than " + std::to_string(kMaxPrompts) +
                                    " prompts; split it into several files");
      prompts.push_back({content, line});
    }
    start = next;
  }
  if (prompts.empty())
    throw std::invalid_argument(source + " holds no prompt (blank lines are ignored): write one prompt a line");
  return prompts;
}

std::vector<PromptLine> read_prompt_file(const std::string& path) {
  const std::string source = "the prompt file '" + excerpt(path) + "'";
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw std::invalid_argument(source + " does not exist or is not a file");
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw std::invalid_argument(source + " cannot be read: " + error.message());
  if (size > kMaxPromptFileBytes)
    throw std::invalid_argument(source + " holds " + std::to_string(size) + " bytes; a prompt file is at most " +
                                std::to_string(kMaxPromptFileBytes) +
                                " bytes (one prompt of at most 77 tokens a line)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(source + " cannot be opened");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse_prompt_text(bytes.str(), source);
}

}  // namespace attnscope
