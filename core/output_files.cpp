#include "core/output_files.h"

#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/npy.h"

namespace attnscope {

namespace fs = std::filesystem;

void OutputFiles::add_bytes(const std::string& name, std::string bytes) {
  for (const auto& file : files_)
    if (file.first == name) throw std::logic_error("output file " + name + " is written twice");
  files_.emplace_back(name, std::move(bytes));
}

void OutputFiles::add_npy(const std::string& name, const torch::Tensor& tensor) { add_bytes(name, npy_bytes(tensor)); }

void OutputFiles::add_png(const std::string& name, const cv::Mat& rgb) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> bytes;
  if (!cv::imencode(".png", bgr, bytes)) throw std::runtime_error("cannot encode PNG for " + name);
  add_bytes(name, std::string(bytes.begin(), bytes.end()));
}

std::vector<std::string> OutputFiles::existing() const {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& file : files_) {
    const fs::path path = fs::path(folder_) / file.first;
    if (fs::exists(path, error)) found.push_back(path.string());
  }
  return found;
}

void OutputFiles::write() const {
  if (!overwrite_) {
    const std::vector<std::string> found = existing();
    if (!found.empty())
      throw std::runtime_error(
          found.front() + " exists" +
          (found.size() > 1 ? " (and " + std::to_string(found.size() - 1) + " more outputs)" : "") +
          ": --overwrite replaces them, or choose another --out");
  }
  fs::create_directories(folder_);
  for (const auto& [name, bytes] : files_)
    write_file_atomically((fs::path(folder_) / name).string(),
                          [&](std::ostream& out) { out.write(bytes.data(), std::streamsize(bytes.size())); },
                          overwrite_);
}

std::vector<std::string> OutputFiles::names() const {
  std::vector<std::string> names;
  for (const auto& file : files_) names.push_back(file.first);
  return names;
}

}  // namespace attnscope
