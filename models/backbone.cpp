#include "models/backbone.h"

namespace attnscope {

int64_t Backbone::parameter_count() const {
  int64_t count = 0;
  for (const auto& parameter : parameters()) count += parameter.numel();
  return count;
}

int resolve_module_index(const std::string& text, int count, const std::string& error) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("-0123456789") != std::string::npos ||
      text.find('-', 1) != std::string::npos || text == "-")
    throw std::invalid_argument(error);
  const int index = std::stoi(text);
  if (index < -count || index >= count) throw std::invalid_argument(error);
  return index < 0 ? index + count : index;
}

}  // namespace attnscope
