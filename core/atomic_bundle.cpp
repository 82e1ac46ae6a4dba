// Bundles written whole; see atomic_bundle.h. The protocol, all renames inside one folder:
//   1. every file is written and synced into ".attnscope-NAME.staging-PID-N/", which its writer
//      keeps locked (flock) while it lives;
//   2. with the output folder locked, dead writers' leftovers are recovered (step 4 below) and
//      existing entries are judged;
//   3. the staging folder is renamed ".attnscope-NAME.commit-PID-N": from here on the bundle is
//      approved and moving it into place only goes forward;
//   4. each entry is renamed into place (a folder it replaces is first moved into the commit
//      folder's ".attnscope-replaced/"), the figure last; then the commit folder is removed.
// A writer killed in step 1 or 2 leaves a staging folder, which the next writer removes; one
// killed in step 3 or 4 leaves a commit folder, whose remaining entries the next writer moves
// into place exactly as the dead one would have.
#include "core/atomic_bundle.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <utility>

#include "core/excerpt.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;

const std::string kPrefix = ".attnscope-";
const std::string kStaging = ".staging-";
const std::string kCommit = ".commit-";
const std::string kReplaced = ".attnscope-replaced";

[[noreturn]] void bundle_failed(const std::string& what, const std::string& why) {
  throw std::runtime_error("cannot write " + what + ": " + why);
}

// An open descriptor holding a flock, released when it is closed (or its process dies).
class Lock {
 public:
  // Opens `path` (a folder) and locks it; with `wait` false, an empty Lock when someone holds it.
  static Lock take(const fs::path& path, bool wait) {
    Lock lock;
    lock.fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock.fd_ < 0) bundle_failed(path.string(), std::strerror(errno));
    while (::flock(lock.fd_, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) bundle_failed(path.string(), std::string("cannot lock it: ") + std::strerror(errno));
      lock.release();
      break;
    }
    return lock;
  }
  Lock() = default;
  Lock(Lock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Lock& operator=(Lock&& other) noexcept {
    release();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  ~Lock() { release(); }
  explicit operator bool() const { return fd_ >= 0; }
  void sync() const { ::fsync(fd_); }

 private:
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

// A termination signal (SIGINT, SIGTERM, SIGHUP) that arrives while a bundle is staged is held
// until the staging folder is gone: the writer stops at its next piece, removes what it staged,
// and the signal then ends the process as it would have (issue 60: a SIGTERM during a streamed
// matrix left 300-600 MB in a hidden staging folder).
volatile std::sig_atomic_t deferred_signal = 0;

extern "C" void defer_signal(int number) { deferred_signal = number; }

struct StoppedBySignal {};

void stop_if_signalled() {
  if (deferred_signal != 0) throw StoppedBySignal{};
}

class DeferredSignals {
 public:
  DeferredSignals() {
    struct sigaction action {};
    action.sa_handler = defer_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      ::sigaction(kSignals[i], nullptr, &previous_[i]);
      // A signal the process ignores stays ignored.
      if (previous_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &action, nullptr);
    }
  }
  // Restores the handlers, then delivers a signal that came meanwhile.
  ~DeferredSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    const int number = deferred_signal;
    deferred_signal = 0;
    if (number != 0) ::raise(number);
  }
  DeferredSignals(const DeferredSignals&) = delete;
  DeferredSignals& operator=(const DeferredSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

void write_synced(const fs::path& path, const BundleFile& file) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) bundle_failed(path.string(), std::strerror(errno));
  auto write_piece = [&](const std::string& bytes) {
    stop_if_signalled();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) bundle_failed(path.string(), std::strerror(errno));
      done += size_t(n);
    }
  };
  try {
    if (file.produce)
      file.produce(write_piece);
    else
      write_piece(file.bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  if (::close(fd) != 0 || !synced) bundle_failed(path.string(), "fsync failed: " + why);
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The regular files under `folder`, by relative path.
std::map<std::string, fs::path> files_under(const fs::path& folder) {
  std::map<std::string, fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    if (it->is_regular_file()) files[fs::relative(it->path(), folder).string()] = it->path();
  return files;
}

bool same_files(const fs::path& a, const fs::path& b) {
  const auto left = files_under(a), right = files_under(b);
  if (left.size() != right.size()) return false;
  for (const auto& [name, path] : left) {
    const auto other = right.find(name);
    if (other == right.end() || fs::file_size(path) != fs::file_size(other->second) ||
        read_all(path) != read_all(other->second))
      return false;
  }
  return true;
}

// Step 4: every entry of the approved `commit` folder into `out`.
void move_into_place(const fs::path& commit, const fs::path& out, const std::vector<std::string>& order) {
  std::vector<std::string> entries = order;
  for (const auto& entry : fs::directory_iterator(commit)) {  // in recovery the order is unknown
    const std::string name = entry.path().filename().string();
    if (name != kReplaced && std::find(entries.begin(), entries.end(), name) == entries.end()) entries.push_back(name);
  }
  for (const std::string& name : entries) {
    const fs::path staged = commit / name, target = out / name;
    std::error_code missing;
    if (!fs::exists(fs::symlink_status(staged, missing))) continue;  // moved already, or left as it was
    // rename() replaces a file in one step; a folder is moved aside first.
    if (fs::exists(fs::symlink_status(target, missing)) && (fs::is_directory(staged) || fs::is_directory(target))) {
      fs::create_directories(commit / kReplaced);
      fs::rename(target, commit / kReplaced / name);
    }
    fs::rename(staged, target);
  }
}

// A folder entry "NAME.staging-PID-N" or ".commit-" written by this code; the kind, or "".
std::string bundle_folder_kind(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return "";
  if (name.find(kCommit) != std::string::npos) return kCommit;
  if (name.find(kStaging) != std::string::npos) return kStaging;
  return "";
}

// Whether the "PID-N" after `tag` in `name` names a process that no longer runs.
bool written_by_dead_process(const std::string& name, const std::string& tag_text) {
  const size_t tag = name.rfind(tag_text);
  if (tag == std::string::npos) return false;
  const std::string rest = name.substr(tag + tag_text.size());
  const size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 9) return false;
  const std::string pid = rest.substr(0, dash), number = rest.substr(dash + 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos || number.empty() ||
      number.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return ::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

void recover_stale(const fs::path& out) {
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(out)) entries.push_back(entry.path());
  for (const fs::path& path : entries) {
    const std::string name = path.filename().string();
    const std::string kind = fs::is_directory(fs::symlink_status(path)) ? bundle_folder_kind(name) : "";
    if (!kind.empty()) {
      // A live writer creates its folder a moment before it locks it: only a dead one's is stale.
      if (!written_by_dead_process(name, kind)) continue;
      const Lock alive = Lock::take(path, /*wait=*/false);
      if (!alive) continue;  // its writer is still at work
      if (kind == kCommit) move_into_place(path, out, {});
      fs::remove_all(path);
    } else if (fs::is_regular_file(fs::symlink_status(path)) && written_by_dead_process(name, ".tmp-")) {
      fs::remove(path);
    }
  }
}

std::string top_entry(const std::string& relative) { return relative.substr(0, relative.find('/')); }

}  // namespace

std::vector<std::string> write_bundle_atomically(const std::string& out_dir, const std::string& name,
                                                 const std::vector<BundleFile>& files, bool overwrite,
                                                 const std::vector<std::string>& shared_folders) {
  const fs::path out(out_dir);
  std::error_code error;
  fs::create_directories(out, error);
  if (error) bundle_failed(out_dir, error.message());
  std::random_device entropy;
  // File names are at most 255 bytes: the bundle's name is cut to leave room for the rest.
  const std::string token = kPrefix + name.substr(0, 100);
  const std::string unique = std::to_string(::getpid()) + "-" + std::to_string(entropy());
  const fs::path staging = out / (token + kStaging + unique), commit = out / (token + kCommit + unique);
  if (!fs::create_directory(staging, error)) bundle_failed(staging.string(), error ? error.message() : "exists");
  const DeferredSignals signals;  // declared before the cleanup below runs: a held signal comes after it
  bool approved = false;
  try {
    const Lock alive = Lock::take(staging, true);
    // 1. Everything on disk, in the staging folder.
    std::vector<std::string> order;  // top-level entries, in the order they go into place
    for (const BundleFile& file : files) {
      stop_if_signalled();
      const fs::path target = staging / file.path;
      fs::create_directories(target.parent_path());
      write_synced(target, file);
      const std::string entry = top_entry(file.path);
      if (std::find(order.begin(), order.end(), entry) == order.end()) order.insert(order.begin(), entry);
    }
    // 2. One writer at a time in this folder.
    const Lock folder = Lock::take(out, true);
    recover_stale(out);
    std::vector<std::string> left_alone;
    for (auto entry_it = order.rbegin(); entry_it != order.rend(); ++entry_it) {  // the figure first
      const std::string& entry = *entry_it;
      const fs::path target = out / entry;
      if (!fs::exists(fs::symlink_status(target, error))) continue;
      // A file where the bundle has a folder (or the reverse) is someone else's: never replaced.
      if (fs::is_directory(target) != fs::is_directory(staging / entry))
        throw std::runtime_error(target.string() + " is a " + (fs::is_directory(target) ? "folder" : "file") +
                                 " where the export writes a " + (fs::is_directory(target) ? "file" : "folder") +
                                 "; move it away");
      const bool shared = std::find(shared_folders.begin(), shared_folders.end(), entry) != shared_folders.end();
      if (shared && fs::is_directory(target) && same_files(staging / entry, target)) {
        left_alone.push_back(entry);
        fs::remove_all(staging / entry);
      } else if (!overwrite) {
        throw std::runtime_error(target.string() + " exists" + (shared ? " with other content" : "") +
                                 " (--overwrite replaces it)");
      }
    }
    // 3. Approved; 4. into place.
    fs::rename(staging, commit);
    approved = true;
    move_into_place(commit, out, order);
    folder.sync();
    fs::remove_all(commit, error);
    std::vector<std::string> written;
    for (const BundleFile& file : files)
      if (std::find(left_alone.begin(), left_alone.end(), top_entry(file.path)) == left_alone.end())
        written.push_back((out / file.path).string());
    return written;
  } catch (const fs::filesystem_error& e) {
    if (!approved) fs::remove_all(staging, error);  // an approved bundle is finished by the next writer
    bundle_failed(excerpt(e.path1().string()), e.code().message());
  } catch (const StoppedBySignal&) {
    fs::remove_all(staging, error);  // then `signals` delivers the signal
    throw std::runtime_error("stopped by signal " + std::to_string(int(deferred_signal)) + " while writing " + out_dir +
                             "; nothing was written");
  } catch (...) {
    if (!approved) fs::remove_all(staging, error);
    throw;
  }
}

}  // namespace attnscope
