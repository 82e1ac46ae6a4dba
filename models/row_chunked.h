// Tiles of the row-chunked CPU inference paths of the hierarchical families (Swin, PVT v2): a
// chain of per-token ops (linear layers through rows_linear in models/token_linear.h) stays in a
// core's cache.
#pragma once

#include <torch/torch.h>

#include <algorithm>

#include "models/cpu_threads.h"

namespace attnscope {

// Rows a tile holds: a Swin-T stage-0 MLP's hidden rows (256 x 384 floats) fit in a core's L2.
constexpr int64_t kRowTile = 256;

// for_each_row_chunk, each chunk walked in tiles of at most kRowTile rows: a tile's intermediates
// (normed rows, the MLP's hidden rows, the bias addmm writes first) stay in cache between ops.
inline void for_each_row_tile(int64_t rows, const std::function<void(int64_t begin, int64_t end)>& tile) {
  for_each_row_chunk(rows, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += kRowTile) tile(first, std::min(end, first + kRowTile));
  });
}

}  // namespace attnscope
