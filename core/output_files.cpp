#include "core/output_files.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/atomic_bundle.h"
#include "core/excerpt.h"
#include "core/image_encode.h"
#include "core/npy.h"

namespace attnscope {

namespace fs = std::filesystem;

void check_output_folder(const std::string& folder, const std::string& option) {
  const std::string shown = option + " " + excerpt(folder);
  if (folder.empty()) throw std::invalid_argument(option + " is empty: give a folder to write into");
  std::error_code error;
  // The folder itself when it exists, else the nearest folder above it that does.
  fs::path existing = fs::absolute(fs::path(folder), error);
  if (error) throw std::invalid_argument(shown + ": " + error.message());
  bool is_the_folder = true;
  while (!fs::exists(fs::symlink_status(existing, error)) && existing.has_relative_path()) {
    existing = existing.parent_path();
    is_the_folder = false;
  }
  if (!fs::is_directory(existing, error))
    throw std::invalid_argument(
        shown + (is_the_folder ? " is a file, not a folder" : ": " + existing.string() + " on its path is a file") +
        ": choose another " + option);
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw std::invalid_argument(shown + ": the folder " + existing.string() + " cannot be written (" +
                                std::strerror(errno) + "): choose another " + option);
}

void OutputFiles::add_bytes(const std::string& name, std::string bytes) { add({name, std::move(bytes)}); }

void OutputFiles::add_streamed(const std::string& name,
                               std::function<void(const std::function<void(const std::string&)>&)> produce) {
  add({name, std::string(), std::move(produce)});
}

void OutputFiles::add(BundleFile file) {
  const std::string& name = file.path;
  // A name is a file of the folder, or of a subfolder (a figure's data folder): that subfolder is
  // then one unit of the set, replaced whole. Nothing may point outside the folder.
  bool plain = !name.empty() && name.front() != '/';
  for (const auto& part : fs::path(name)) plain = plain && !part.empty() && part != "." && part != "..";
  if (!plain) throw std::logic_error("output file name '" + name + "' is not a relative path inside the folder");
  for (const auto& known : files_)
    if (known.path == name) throw std::logic_error("output file " + name + " is written twice");
  files_.push_back(std::move(file));
}

void OutputFiles::add_npy(const std::string& name, const torch::Tensor& tensor) {
  // No result is written as success with NaN or Inf in it: the set is refused before anything is
  // written, naming the quantity (issue 60: all-NaN relevance maps and inf logits had exit 0).
  if (tensor.defined() && tensor.is_floating_point()) {
    const int64_t bad = tensor.numel() - torch::isfinite(tensor).sum().item<int64_t>();
    if (bad > 0)
      throw std::runtime_error(name + " would hold " + std::to_string(bad) + " of " + std::to_string(tensor.numel()) +
                               " values that are not finite (NaN or Inf): the computation overflowed or the model's "
                               "weights are not finite (check its warnings); nothing was written");
  }
  add_bytes(name, npy_bytes(tensor));
}

void OutputFiles::add_png(const std::string& name, const RgbImage& rgb) { add_bytes(name, encode_png(rgb)); }

std::vector<std::string> OutputFiles::existing() const {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& file : files_) {
    const fs::path path = fs::path(folder_) / file.path;
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
  // One set: staged, then moved into place under the folder's lock (which judges existing files
  // again, so a concurrent writer cannot slip in between), so a failure or a kill leaves none of them.
  write_bundle_atomically(folder_, "outputs", files_, overwrite_);
}

std::vector<std::string> OutputFiles::names() const {
  std::vector<std::string> names;
  for (const auto& file : files_) names.push_back(file.path);
  return names;
}

}  // namespace attnscope
