#include "models/cpu_threads.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace attnscope {
namespace {
std::atomic<int> chosen_threads{0};
}

void configure_threads(int threads) {
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  if (threads > 0) at::set_num_threads(threads);
  chosen_threads = at::get_num_threads();
}

int configured_threads() {
  const int chosen = chosen_threads.load();
  return chosen > 0 ? chosen : at::get_num_threads();
}

ScopedThreads::ScopedThreads(int threads) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(std::max(1, threads));
}

ScopedThreads::~ScopedThreads() { omp_set_num_threads(previous_); }

void release_openmp_team() { (void)omp_pause_resource_all(omp_pause_soft); }

void for_each_row_chunk(int64_t rows, const std::function<void(int64_t, int64_t)>& chunk) {
  const int64_t chunks = std::min<int64_t>(configured_threads(), rows);
  if (chunks <= 1) {
    if (rows > 0) chunk(0, rows);
    return;
  }
  const at::ThreadLocalState caller_state;
  ScopedThreads all_cores(static_cast<int>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    at::ThreadLocalStateGuard same_modes(caller_state);
    for (int64_t c = first; c < last; ++c) chunk(rows * c / chunks, rows * (c + 1) / chunks);
  });
}

void fill_by_row_chunks(at::Tensor& out, int64_t dim, const std::function<at::Tensor(int64_t, int64_t)>& chunk) {
  for_each_row_chunk(out.size(dim),
                     [&](int64_t begin, int64_t end) { out.narrow(dim, begin, end - begin).copy_(chunk(begin, end)); });
}

}  // namespace attnscope
