// How a ViT's token sequence maps to the image: prefix tokens (class, distillation, registers)
// first, then the patch grid row-major. Always derived from the model and the input size.
#pragma once

#include <cstdint>
#include <string>

namespace attnscope {

struct TokenLayout {
  bool has_class_token = false;
  bool has_dist_token = false;
  int register_tokens = 0;
  int grid_h = 0;  // patch rows
  int grid_w = 0;  // patch columns
  int patch_size = 16;

  int prefix_tokens() const { return int(has_class_token) + int(has_dist_token) + register_tokens; }
  int patch_tokens() const { return grid_h * grid_w; }
  int total_tokens() const { return prefix_tokens() + patch_tokens(); }
  int patch_token(int row, int col) const { return prefix_tokens() + row * grid_w + col; }
  bool is_patch(int token) const { return token >= prefix_tokens() && token < total_tokens(); }
  int row_of(int token) const { return (token - prefix_tokens()) / grid_w; }
  int col_of(int token) const { return (token - prefix_tokens()) % grid_w; }
  // A human name for a token: "cls", "dist", "reg2", "patch(3,4)".
  std::string token_name(int token) const;
};

// A token of one layout in another (a query followed across stages of a hierarchical model): a
// prefix token stays itself when `to` has the same prefix tokens, else becomes the centre patch; a
// patch becomes the patch of `to` over the same place in the image.
int follow_query(int token, const TokenLayout& from, const TokenLayout& to);

}  // namespace attnscope
