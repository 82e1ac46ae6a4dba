// The allocator keeps what a thread freed for its next run (core/freed_memory.h): a run's blocks,
// freed and asked for again, come back without page faults. By glibc's default a thread's heap is
// trimmed once its free top exceeds twice the largest block freed, and every run faulted its pages in
// again (the workbench's benchmark thread: a fifth of a DeiT-Small forward).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/freed_memory.h"

namespace attnscope {
namespace {

long thread_minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

TEST(FreedMemory, ARunsBlocksComeBackWithoutPageFaults) {
  if (!keep_freed_memory_for_reuse()) GTEST_SKIP() << "malloc is set by GLIBC_TUNABLES here (or is not glibc's)";
  // A run's worth of 1 MiB activations (20 MiB), freed at its end, on a thread of its own as the
  // workbench's worker: the first two runs fault their pages in, the three after them reuse them.
  constexpr size_t kBlock = 1 << 20, kBlocks = 20, kPage = 4096;
  long faults_after_warm_up = -1;
  std::thread worker([&] {
    long before = 0;
    for (int run = 0; run < 5; ++run) {
      if (run == 2) before = thread_minor_faults();
      std::vector<char*> blocks;
      for (size_t i = 0; i < kBlocks; ++i) {
        blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
        std::memset(blocks.back(), run + 1, kBlock);
      }
      for (char* block : blocks) std::free(block);
    }
    faults_after_warm_up = thread_minor_faults() - before;
  });
  worker.join();
  // Faulting a run in again costs kBlocks * kBlock / kPage = 5,120 faults a run; reuse costs none.
  EXPECT_LT(faults_after_warm_up, long(kBlocks * kBlock / kPage / 10)) << "minor page faults over 3 runs";
}

}  // namespace
}  // namespace attnscope
