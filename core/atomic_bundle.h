// Writing a set of files that belong together (a figure, its .json, its .session.json and its
// data folder) so that they appear as a whole: they are written into a private staging folder,
// then moved into place while the output folder is locked, so concurrent writers never mix their
// files. A staging folder left by a killed process is removed (unfinished) or finished (it was
// being moved into place) by the next writer, so a rerun never finds half a bundle.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace attnscope {

struct BundleFile {
  std::string path;   // relative to the output folder: "cat_grid.png", "cat_grid_data/a.npy"
  std::string bytes;  // the whole content
  // When set, the content instead: produce(write) calls write with each piece in turn, so a file
  // too large to hold in memory (a T x T matrix) is streamed. It may throw: the bundle then fails.
  std::function<void(const std::function<void(const std::string&)>& write)> produce = {};
};

// Writes `files` into `out_dir` (created if needed); `name` names the staging folders and the
// messages. Each top-level entry (a file, or a folder with everything under it) is one unit: an
// existing one is an error unless `overwrite`, except a folder in `shared_folders` whose files
// already hold exactly these bytes, which is left as it is. Returns the paths written (out_dir/...).
// Throws std::runtime_error naming what exists or what failed; then nothing of the bundle is in place.
std::vector<std::string> write_bundle_atomically(const std::string& out_dir, const std::string& name,
                                                 const std::vector<BundleFile>& files, bool overwrite,
                                                 const std::vector<std::string>& shared_folders = {});

}  // namespace attnscope
