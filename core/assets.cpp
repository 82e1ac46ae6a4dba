#include "core/assets.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace attnscope {

std::string source_path(const std::string& relative) {
  return (std::filesystem::path(ATTNSCOPE_SOURCE_DIR) / relative).string();
}

std::string configured_python() { return ATTNSCOPE_PYTHON; }

std::string asset_path(const std::string& relative) {
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("ATTNSCOPE_ASSETS")) roots.emplace_back(env);
  roots.emplace_back(std::filesystem::path(ATTNSCOPE_SOURCE_DIR) / "assets");
  std::string searched;
  for (const auto& root : roots) {
    auto candidate = root / relative;
    if (std::filesystem::exists(candidate)) return candidate.string();
    searched += (searched.empty() ? "" : ", ") + root.string();
  }
  throw std::runtime_error("asset '" + relative + "' not found (looked in " + searched + ")");
}

std::string default_model_path() {
  try {
    return asset_path("models/flatten.safetensors");
  } catch (const std::runtime_error&) {
    return "";
  }
}

std::string default_image_path() { return asset_path("images/sign_4.png"); }

std::vector<std::string> read_class_names(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read class names from " + path);
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto tab = line.find('\t');
    names.push_back(tab == std::string::npos ? line : line.substr(tab + 1));
  }
  return names;
}

}  // namespace attnscope
