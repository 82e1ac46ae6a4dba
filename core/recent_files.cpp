#include "core/recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/json_checked.h"

namespace attnscope {

namespace {

// At most kKept non-empty strings of a bounded length from `json[key]`; anything else is skipped.
std::vector<std::string> read_list(const nlohmann::json& json, const char* key) {
  std::vector<std::string> list;
  if (!json.is_object() || !json.contains(key) || !json[key].is_array()) return list;
  for (const auto& item : json[key]) {
    if (list.size() == RecentFiles::kKept) break;
    if (item.is_string() && !item.get<std::string>().empty() && item.get<std::string>().size() <= 4096)
      list.push_back(item.get<std::string>());
  }
  return list;
}

}  // namespace

std::string RecentFiles::default_path() {
  const char* config = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path root;
  if (config && *config)
    root = config;
  else if (home && *home)
    root = std::filesystem::path(home) / ".config";
  else
    return "";
  return (root / "attnscope" / "recent.json").string();
}

RecentFiles::RecentFiles(std::string path) : path_(path.empty() ? default_path() : std::move(path)) {
  std::error_code error;
  if (path_.empty() || !std::filesystem::is_regular_file(path_, error)) return;
  try {
    const nlohmann::json json = read_json_file(path_, "recent files", size_t(1) << 20);
    models_ = read_list(json, "models");
    images_ = read_list(json, "images");
  } catch (const std::exception&) {
    // A damaged list is an empty one; the next open writes a good file over it.
  }
}

void RecentFiles::add(std::vector<std::string>& list, const std::string& name) {
  if (name.empty() || (!list.empty() && list.front() == name)) return;
  list.erase(std::remove(list.begin(), list.end(), name), list.end());
  list.insert(list.begin(), name);
  if (list.size() > kKept) list.resize(kKept);
  save();
}

void RecentFiles::save() const {
  if (path_.empty()) return;
  try {
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    const nlohmann::json json = {{"models", models_}, {"images", images_}};
    write_file_atomically(path_, [&](std::ostream& out) { out << json_text(json) << "\n"; });
  } catch (const std::exception&) {
    // A read-only or full disk: the lists stay for this run.
  }
}

}  // namespace attnscope
