// Writing a file so that readers see either the old content or the complete new one: the data
// goes to a temporary file in the same directory, which is then renamed over the target.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace attnscope {

// Calls `writer` with a binary stream on a temporary file next to `path`, flushes it to disk and
// renames it to `path`. With overwrite=false an existing `path` is an error (checked atomically).
// I/O failures throw std::runtime_error("cannot write PATH: reason"); an exception from `writer`
// propagates unchanged. Either way the temporary file is removed.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& writer,
                           bool overwrite = true);

}  // namespace attnscope
