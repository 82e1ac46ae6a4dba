#include "session/export_folder.h"

#include <cstdlib>
#include <filesystem>

namespace attnscope {

std::string default_export_folder(const std::string& session_path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!session_path.empty() && fs::is_regular_file(session_path, error))
    return (fs::absolute(session_path, error).parent_path() / "figures").lexically_normal().string();
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data && fs::path(data).is_absolute())
    return (fs::path(data) / "attnscope" / "figures").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".local" / "share" / "attnscope" / "figures").string();
  return (fs::temp_directory_path(error) / "attnscope-figures").string();
}

}  // namespace attnscope
