#include "core/freed_memory.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attnscope {

bool keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return false;
  constexpr int kMiB = 1 << 20;
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);  // a fixed value also stops glibc's own adjustment
  mallopt(M_TRIM_THRESHOLD, 64 * kMiB);
  return true;
#else
  return false;
#endif
}

}  // namespace attnscope
