// The models and images the workbench opened last, newest first, kept across runs in
// $XDG_CONFIG_HOME/attnscope/recent.json (~/.config/attnscope/recent.json without it). A missing,
// unreadable or malformed file is an empty list, never an error: it is a convenience.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

class RecentFiles {
 public:
  static constexpr size_t kKept = 10;  // per kind

  // The lists in `path` (default_path() when empty); a bad file gives empty lists.
  explicit RecentFiles(std::string path = "");
  static std::string default_path();

  const std::vector<std::string>& models() const { return models_; }
  const std::vector<std::string>& images() const { return images_; }
  // Puts `name` first (once), drops the oldest past kKept, and writes the file when that changed
  // anything (atomically; a write that fails leaves the lists in memory and says nothing).
  void add_model(const std::string& name) { add(models_, name); }
  void add_image(const std::string& name) { add(images_, name); }

 private:
  void add(std::vector<std::string>& list, const std::string& name);
  void save() const;
  std::string path_;
  std::vector<std::string> models_, images_;
};

}  // namespace attnscope
