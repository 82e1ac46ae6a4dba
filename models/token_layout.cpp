#include "models/token_layout.h"

#include <algorithm>

namespace attnscope {

std::string TokenLayout::token_name(int token) const {
  if (token < 0 || token >= total_tokens()) return "invalid(" + std::to_string(token) + ")";
  int prefix_index = token;
  if (has_class_token && prefix_index-- == 0) return "cls";
  if (has_dist_token && prefix_index-- == 0) return "dist";
  if (prefix_index < register_tokens) return "reg" + std::to_string(prefix_index);
  return "patch(" + std::to_string(row_of(token)) + "," + std::to_string(col_of(token)) + ")";
}

int follow_query(int token, const TokenLayout& from, const TokenLayout& to) {
  const bool same_prefix = from.prefix_tokens() == to.prefix_tokens() && from.has_class_token == to.has_class_token &&
                           from.has_dist_token == to.has_dist_token;
  if (!from.is_patch(token)) return same_prefix ? token : to.patch_token(to.grid_h / 2, to.grid_w / 2);
  if (from.grid_h == to.grid_h && from.grid_w == to.grid_w)
    return to.patch_token(from.row_of(token), from.col_of(token));
  // The centre of the patch, as a fraction of the image, in the other grid.
  const int row = int((from.row_of(token) + 0.5) * to.grid_h / from.grid_h);
  const int col = int((from.col_of(token) + 0.5) * to.grid_w / from.grid_w);
  return to.patch_token(std::min(row, to.grid_h - 1), std::min(col, to.grid_w - 1));
}

}  // namespace attnscope
