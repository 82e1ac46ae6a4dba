#include "core/prompt_tokenizer.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/excerpt.h"

namespace attnscope {

torch::Tensor token_rows_tensor(const std::vector<std::vector<int64_t>>& rows, size_t context_length) {
  auto tensor = torch::zeros({int64_t(rows.size()), int64_t(context_length)}, torch::kInt64);
  auto* data = tensor.data_ptr<int64_t>();
  for (size_t r = 0; r < rows.size(); ++r) std::copy(rows[r].begin(), rows[r].end(), data + r * context_length);
  return tensor;
}

std::string prompt_excerpt(const std::string& prompt) {
  constexpr size_t kLimit = 60;
  const std::string line = one_line(prompt);
  if (line.size() <= kLimit) return line;
  // Cut at the last space within the limit (after the first words), else between characters.
  size_t cut = line.rfind(' ', kLimit);
  if (cut == std::string::npos || cut < kLimit / 2) {
    cut = kLimit;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  }
  return line.substr(0, cut) + "...";
}

}  // namespace attnscope
