// The checkpoint readers' shared error handling and file opening; see checkpoint_reading.h.
#include "core/checkpoint_reading.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <c10/util/Exception.h>

namespace attnscope {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

void bad_checkpoint(const std::string& path, const std::string& what) { throw CheckpointError(path + ": " + what); }

void rethrow_as_checkpoint_error(const std::string& path, const std::string& context) {
  const std::string prefix = context.empty() ? "" : context + ": ";
  try {
    throw;
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& e) {
    bad_checkpoint(path, prefix + first_line(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    bad_checkpoint(path, prefix + "out of memory");
  } catch (const std::exception& e) {
    bad_checkpoint(path, prefix + first_line(e.what()));
  }
}

std::ifstream open_checkpoint_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad_checkpoint("cannot open " + path, "Is a directory");
  // A FIFO or device would block the read forever: only regular files are opened.
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    bad_checkpoint("cannot open " + path, "not a regular file (a pipe, socket or device)");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError("cannot open " + path + ": " + (errno != 0 ? std::strerror(errno) : "unreadable file"));
  }
  return in;
}

}  // namespace attnscope
