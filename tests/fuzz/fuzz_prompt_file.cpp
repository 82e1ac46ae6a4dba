// Fuzz target: any bytes as a prompt file (core/prompt_file.h): read as a file and as --prompt's
// text; every prompt it returns is non-empty valid UTF-8, numbered by its line in order, and a file
// with none is refused rather than returned empty. (Control characters may be in a prompt: they
// are escaped where text is printed, core/excerpt.h.)
#include <cstdlib>
#include <exception>

#include "core/prompt_file.h"
#include "core/unicode_text.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  const std::string path = fuzz::input_file("prompt_file", data, size);
  try {
    const std::vector<PromptLine> prompts = read_prompt_file(path);
    if (prompts.empty() || prompts.size() > kMaxPrompts) std::abort();  // refused, not returned empty
    size_t line = 0;
    for (const PromptLine& prompt : prompts) {
      if (prompt.line <= line || prompt.text.empty() || !decode_utf8(prompt.text)) std::abort();
      line = prompt.line;
    }
  } catch (const std::exception&) {
  }
  try {
    parse_prompt_text(std::string(reinterpret_cast<const char*>(data), size), "--prompt");
  } catch (const std::exception&) {
  }
  return 0;
}
