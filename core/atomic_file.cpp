// Write-to-temp-then-rename; see atomic_file.h.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace attnscope {
namespace {

[[noreturn]] void cannot_write(const std::string& path, const std::string& why) {
  throw std::runtime_error("cannot write " + path + ": " + why);
}

// Creates an empty, not yet existing file "<path>.tmp-<random>". O_EXCL makes the name ours;
// mode 0666 lets the umask decide permissions, as for any ordinary new file.
std::string create_temp_next_to(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  std::random_device entropy;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string candidate =
        path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(entropy() ^ counter++);
    const int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return candidate;
    }
    if (errno != EEXIST) cannot_write(path, std::strerror(errno));
  }
  cannot_write(path, "no free temporary file name");
}

// The rename is only durable once the data is on disk.
bool sync_to_disk(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// errno is only meaningful right after a failing call; streams do not always set it.
std::string last_error() { return errno != 0 ? std::strerror(errno) : "I/O error"; }

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& writer, bool overwrite) {
  const std::string temp = create_temp_next_to(path);
  try {
    errno = 0;
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      if (!out) cannot_write(path, last_error());
      writer(out);
      out.flush();
      if (!out) cannot_write(path, "write failed: " + last_error());
      out.close();
      if (!out) cannot_write(path, "close failed: " + last_error());
    }
    if (!sync_to_disk(temp)) cannot_write(path, "fsync failed: " + last_error());
    if (overwrite) {
      if (std::rename(temp.c_str(), path.c_str()) != 0) cannot_write(path, std::strerror(errno));
    } else {
      // link() refuses an existing target, so two writers cannot both win.
      if (::link(temp.c_str(), path.c_str()) != 0) {
        cannot_write(path, errno == EEXIST ? "file exists" : std::strerror(errno));
      }
      std::remove(temp.c_str());
    }
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
}

}  // namespace attnscope
