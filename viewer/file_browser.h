// A file browser inside the workbench (ImGui has none): a modal listing folders and the files whose
// extensions fit what is being opened, with a path field for typing or pasting.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

class FileBrowser {
 public:
  // Opens the modal next frame. `extensions` like {".png", ".jpg"}; empty: every file. `saving`
  // lets the chosen name be a file that does not exist yet.
  void open(const std::string& title, const std::string& start_path, std::vector<std::string> extensions,
            bool saving = false);
  // Withdraws a request to open that has not been drawn yet.
  void close() { open_requested_ = false; }
  // Opens it to choose a folder: folders only, and "Choose this folder" picks the one shown.
  void open_folder(const std::string& title, const std::string& start_path);
  // The folder the modal lists (for a folder choice: what "Choose this folder" picks).
  const std::string& folder() const { return folder_; }
  // What "Choose this folder" (or Open) would pick now, as the path returned by draw().
  std::string pick() const;
  // What the modal lists: sub-folders, and the files that fit (none when choosing a folder).
  const std::vector<std::string>& listed_folders() const { return folders_; }
  const std::vector<std::string>& listed_files() const { return files_; }
  // Draws the modal when open; returns true on the frame a file was chosen, with its path in `chosen`.
  bool draw(std::string& chosen);

 private:
  void list_folder();
  std::string title_;
  std::string folder_;
  std::string typed_;
  std::vector<std::string> extensions_;
  std::vector<std::string> folders_, files_;
  std::string listing_error_;
  bool saving_ = false;
  bool folders_only_ = false;
  bool open_requested_ = false;
};

}  // namespace attnscope
