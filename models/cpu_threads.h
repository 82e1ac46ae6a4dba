// How LibTorch's CPU kernels and OpenBLAS share the cores during a forward pass.
//
// Where OpenMP's threads sleep between regions (OMP_WAIT_POLICY=PASSIVE, or attnscope's bounded spin
// run out: app/main.cpp) a parallel region wakes them, which costs about as much as a layer norm on
// one core. A ViT forward runs ~15 ops per block, so the engine runs the
// small ones on one core (ScopedThreads) and splits the big ones by token rows into one region per
// stage (for_each_row_chunk), each chunk a whole sequence of ops on one core.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <functional>

namespace attnscope {

// Sets LibTorch's thread count: the number of cores when threads is 0 (LibTorch's default here is 1).
void configure_threads(int threads = 0);

// The count configure_threads chose.
int configured_threads();

// Sets the calling thread's OpenMP team size for a scope; LibTorch's CPU kernels and OpenBLAS read
// it on every call. Has no effect (and costs nothing) with a LibTorch that bundles its own OpenMP
// runtime, as pip's does: the small ops then run multi-threaded, with the same results.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};

// Hands the calling thread's OpenMP team back: its threads exit (libgomp's omp_pause_resource_all).
// libgomp lets waiting threads spin (GOMP_SPINCOUNT, app/main.cpp) only while the threads it
// manages, idle teams included, are no more than the cores. One more team that sits idle (a
// finished folder job's worker, a forward once run on the GUI thread) makes every parallel region
// of the panels' forwards wake a sleeping thread instead: DeiT-S 55-58 against 50-54 ms on 2 cores
// (docs/speed.md). Threads whose parallel work comes seldom call this when they go idle; their
// next region starts a new team, whose first forward runs cold (about 20 ms more for DeiT-S).
// Nothing happens where the calling thread has no team.
void release_openmp_team();

// Splits rows [0, rows) into one contiguous chunk per configured thread and calls chunk(begin, end)
// for each in one parallel region, with the caller's grad and inference modes. Ops inside run on one
// core each. Not for code that records autograd: the graph would span threads.
void for_each_row_chunk(int64_t rows, const std::function<void(int64_t begin, int64_t end)>& chunk);

// Fills `out` along `dim` chunk by chunk: out.narrow(dim, begin, end - begin) = chunk(begin, end).
void fill_by_row_chunks(at::Tensor& out, int64_t dim,
                        const std::function<at::Tensor(int64_t begin, int64_t end)>& chunk);

// The row-chunked, one-core-for-small-ops paths apply: no autograd, and the tensor is on the CPU.
inline bool cpu_inference(const at::Tensor& tensor) { return !c10::GradMode::is_enabled() && tensor.device().is_cpu(); }

}  // namespace attnscope
