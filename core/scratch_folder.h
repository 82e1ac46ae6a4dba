// A folder of a command's own for its temporary files (random weights, a child's output): made by
// mkdtemp under the temporary directory, so its name is fresh and unguessable, it never is one that
// exists (another user's folder or link), and only its owner can enter it (mode 0700); removed
// with everything in it when the object goes, on an error's way out too.
#pragma once

#include <filesystem>
#include <string>

namespace attnscope {

class ScratchFolder {
 public:
  // `prefix`: the folder's name before the random part ("attnscope-bench"). Throws
  // std::runtime_error naming the temporary directory when it cannot be made.
  explicit ScratchFolder(const std::string& prefix);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace attnscope
