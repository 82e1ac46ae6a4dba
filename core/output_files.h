// The files a command writes into its output folder, gathered in memory and checked before the
// first one is written: an existing file is an error unless the command may overwrite (`run` and
// `analyze` keep their file names, which scripts rely on, so a second run must not silently
// replace a first one's results). The files are then written as one set (core/atomic_bundle.h):
// a failure leaves none of them, and what a killed writer left is finished by the next one.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "core/atomic_bundle.h"
#include "core/rgb_image.h"

namespace cv {
class Mat;
}

namespace attnscope {

// Throws std::invalid_argument when `folder` cannot become an output folder: it, or a folder on its
// path, is a file; or the nearest folder that exists cannot be written. Creates nothing: commands
// call it before any work, so a long run never ends on a folder it could not have used.
void check_output_folder(const std::string& folder, const std::string& option = "--out");

class OutputFiles {
 public:
  // Checks the folder (check_output_folder) before the command's work, not after it.
  OutputFiles(std::string folder, bool overwrite) : folder_(std::move(folder)), overwrite_(overwrite) {
    check_output_folder(folder_);
  }

  void add_bytes(const std::string& name, std::string bytes);  // a name may be given once
  void add_text(const std::string& name, const std::string& text) { add_bytes(name, text); }
  void add_npy(const std::string& name, const torch::Tensor& tensor);
  // 8-bit RGB, as PNG (core/image_encode.h).
  void add_png(const std::string& name, const RgbImage& rgb);
  // The same from a CV_8UC3 Mat in RGB order (core/output_files_png.cpp; not in the engine-only build).
  void add_png(const std::string& name, const cv::Mat& rgb);
  // A file produced piece by piece when the set is written (BundleFile::produce): a file too
  // large to hold in memory beside what it is computed from.
  void add_streamed(const std::string& name,
                    std::function<void(const std::function<void(const std::string&)>&)> produce);

  // The existing files among them (paths), without writing anything.
  std::vector<std::string> existing() const;
  // Refuses (std::runtime_error naming the first existing file and --overwrite) before writing
  // anything unless overwriting; then creates the folder and writes every file, as one set.
  void write() const;
  std::vector<std::string> names() const;

 private:
  std::string folder_;
  bool overwrite_;
  void add(BundleFile file);
  std::vector<BundleFile> files_;
};

}  // namespace attnscope
