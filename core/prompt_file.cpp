#include "core/prompt_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/excerpt.h"
#include "core/unicode_text.h"

namespace attnscope {

namespace {

bool blank(const std::string& line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\v' && c != '\f' && c != '\r') return false;
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
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string content = text.substr(start, end - start);
    if (!content.empty() && content.back() == '\r') content.pop_back();
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
    start = end + 1;
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
