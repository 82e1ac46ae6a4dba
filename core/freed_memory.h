// How the process's allocator treats freed memory (glibc's malloc): kept for the next run instead
// of handed back to the kernel after every one.
#pragma once

namespace attnscope {

// By default glibc returns the top of a heap to the kernel once more than twice its largest freed
// block sits free there, and a thread other than the main one (the workbench's worker) has heaps
// of its own that it trims so after every forward. The next forward faults every page in again,
// zeroed by the kernel: a DeiT-Small forward on the workbench's benchmark thread spent a fifth of
// its time in page faults (126-197 against 65-75 ms with this policy; docs/speed.md). This keeps up to
// 64 MiB free per heap and serves blocks under 32 MiB from the heaps; larger ones (a long input's
// attention matrices) are mapped and unmapped as before. A GLIBC_TUNABLES naming malloc settings
// wins: the user chose. Call before any thread starts. Returns whether it set the thresholds (false
// under such a GLIBC_TUNABLES, or without glibc).
bool keep_freed_memory_for_reuse();

}  // namespace attnscope
