#include "core/torch_error.h"

#include <regex>

#include "core/excerpt.h"
#include "core/number_text.h"

namespace attnscope {

std::string torch_error_text(const c10::Error& error) {
  const std::string text = one_line(error.what_without_backtrace());
  static const std::regex cpu_allocation(
      "DefaultCPUAllocator: (?:can't allocate memory|not enough memory): "
      "you tried to allocate ([0-9]+) bytes");
  std::smatch match;
  if (std::regex_search(text, match, cpu_allocation))
    return "out of memory: a tensor of " + bytes_text(std::stod(match[1].str())) +
           " could not be allocated (the sizes asked for are too large for this machine's memory)";
  if (text.find("CUDA out of memory") != std::string::npos)
    return "out of GPU memory: " + text.substr(text.find("CUDA out of memory"));
  // "[enforce fail at file.cpp:75] " and similar source locations mean nothing to a reader.
  static const std::regex location("^\\[enforce fail at [^\\]]*\\] *");
  return std::regex_replace(text, location, "");
}

}  // namespace attnscope
