#include "core/scratch_folder.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace attnscope {

ScratchFolder::ScratchFolder(const std::string& prefix) {
  std::error_code error;
  const std::filesystem::path base = std::filesystem::temp_directory_path(error);
  if (error) throw std::runtime_error("no temporary directory for " + prefix + ": " + error.message());
  const std::string pattern = (base / (prefix + "-XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data()))
    throw std::runtime_error("cannot make a private folder in " + base.string() + ": " + std::strerror(errno));
  path_ = name.data();
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;  // a destructor reports nothing: what is left is in a 0700 folder
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace attnscope
