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
  bool open_requested_ = false;
};

}  // namespace attnscope
