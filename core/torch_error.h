// LibTorch's errors as a person reads them: one line, without its source locations, and its
// allocator's failure ("[enforce fail at alloc_cpu.cpp:75] ... you tried to allocate N bytes. Error
// code 12") said as running out of memory, with the size.
#pragma once

#include <c10/util/Exception.h>

#include <string>

namespace attnscope {

std::string torch_error_text(const c10::Error& error);

}  // namespace attnscope
