// A long forward's progress, block by block: a caller (the CLI's `run`) sets what is told before
// each block for the extent of a scope on its thread; the families' block loops tell it. Nothing is
// told on a thread without one (the workbench's worker has its own progress).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

namespace attnscope {

// block: its index; blocks: the model's block count; tokens: what the block attends over (a block of
// global attention costs O(tokens^2)).
using BlockProgress = std::function<void(int block, int blocks, int64_t tokens)>;

inline BlockProgress& current_block_progress() {
  thread_local BlockProgress progress;
  return progress;
}

// Called by a family before each block.
inline void block_started(int block, int blocks, int64_t tokens) {
  if (const BlockProgress& progress = current_block_progress()) progress(block, blocks, tokens);
}

// Sets the thread's block progress for its lifetime, restoring what was there before.
class ScopedBlockProgress {
 public:
  explicit ScopedBlockProgress(BlockProgress progress)
      : previous_(std::exchange(current_block_progress(), std::move(progress))) {}
  ~ScopedBlockProgress() { current_block_progress() = std::move(previous_); }
  ScopedBlockProgress(const ScopedBlockProgress&) = delete;
  ScopedBlockProgress& operator=(const ScopedBlockProgress&) = delete;

 private:
  BlockProgress previous_;
};

}  // namespace attnscope
