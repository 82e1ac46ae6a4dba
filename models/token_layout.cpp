#include "models/token_layout.h"

namespace attnscope {

std::string TokenLayout::token_name(int token) const {
  if (token < 0 || token >= total_tokens()) return "invalid(" + std::to_string(token) + ")";
  int prefix_index = token;
  if (has_class_token && prefix_index-- == 0) return "cls";
  if (has_dist_token && prefix_index-- == 0) return "dist";
  if (prefix_index < register_tokens) return "reg" + std::to_string(prefix_index);
  return "patch(" + std::to_string(row_of(token)) + "," + std::to_string(col_of(token)) + ")";
}

}  // namespace attnscope
