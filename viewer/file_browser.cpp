#include "viewer/file_browser.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <filesystem>

namespace attnscope {

namespace fs = std::filesystem;

void FileBrowser::open(const std::string& title, const std::string& start_path, std::vector<std::string> extensions,
                       bool saving) {
  title_ = title;
  extensions_ = std::move(extensions);
  saving_ = saving;
  folders_only_ = false;
  std::error_code error;
  fs::path start = start_path.empty() ? fs::current_path(error) : fs::absolute(start_path, error);
  if (!fs::is_directory(start, error)) {
    typed_ = start.filename().string();
    start = start.parent_path();
  } else {
    typed_.clear();
  }
  folder_ = fs::is_directory(start, error) ? start.string() : fs::current_path(error).string();
  list_folder();
  open_requested_ = true;
}

void FileBrowser::open_folder(const std::string& title, const std::string& start_path) {
  open(title, start_path, {}, false);
  folders_only_ = true;
  // A folder that exists is listed as itself, not as a name typed into its parent.
  std::error_code error;
  if (!typed_.empty() && fs::is_directory(fs::path(folder_) / typed_, error)) {
    folder_ = (fs::path(folder_) / typed_).string();
    typed_.clear();
  }
  list_folder();
}

std::string FileBrowser::pick() const {
  if (typed_.empty()) return folder_;
  const fs::path typed(typed_);
  return (typed.is_absolute() ? typed : fs::path(folder_) / typed).string();
}

void FileBrowser::list_folder() {
  folders_.clear();
  files_.clear();
  listing_error_.clear();
  std::error_code error;
  for (fs::directory_iterator it(folder_, fs::directory_options::skip_permission_denied, error), end;
       !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code kind_error;
    if (it->is_directory(kind_error)) {
      folders_.push_back(name);
      continue;
    }
    if (folders_only_) continue;
    std::string extension = it->path().extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (extensions_.empty() || std::find(extensions_.begin(), extensions_.end(), extension) != extensions_.end())
      files_.push_back(name);
  }
  if (error) listing_error_ = "cannot list " + folder_ + ": " + error.message();
  std::sort(folders_.begin(), folders_.end());
  std::sort(files_.begin(), files_.end());
}

bool FileBrowser::draw(std::string& chosen) {
  if (open_requested_) {
    ImGui::OpenPopup(title_.c_str());
    open_requested_ = false;
  }
  ImGui::SetNextWindowSize(ImVec2(620, 460), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(title_.c_str(), nullptr)) return false;
  bool picked = false;
  ImGui::TextUnformatted(folder_.c_str());
  if (ImGui::Button("Up")) {
    folder_ = fs::path(folder_).parent_path().string();
    list_folder();
  }
  if (!listing_error_.empty()) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", listing_error_.c_str());
  ImGui::BeginChild("##entries", ImVec2(0, -2.2f * ImGui::GetFrameHeightWithSpacing()), true);
  std::string enter;
  for (const auto& name : folders_)
    if (ImGui::Selectable((name + "/").c_str(), false, ImGuiSelectableFlags_AllowDoubleClick)) enter = name;
  for (const auto& name : files_)
    if (ImGui::Selectable(name.c_str(), typed_ == name, ImGuiSelectableFlags_AllowDoubleClick)) {
      typed_ = name;
      if (ImGui::IsMouseDoubleClicked(0)) picked = true;
    }
  ImGui::EndChild();
  if (!enter.empty()) {
    folder_ = (fs::path(folder_) / enter).string();
    list_folder();
  }
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##name", &typed_, ImGuiInputTextFlags_EnterReturnsTrue)) picked = true;
  if (ImGui::Button(folders_only_ ? "Choose this folder" : saving_ ? "Save" : "Open")) picked = true;
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
  if (picked && folders_only_) {
    std::error_code error;
    if (fs::is_directory(pick(), error)) {
      chosen = pick();
      ImGui::CloseCurrentPopup();
    } else {
      listing_error_ = pick() + " is not a folder";
      picked = false;
    }
  } else if (picked && !typed_.empty()) {
    const fs::path typed(typed_);
    const fs::path path = typed.is_absolute() ? typed : fs::path(folder_) / typed;
    std::error_code error;
    if (fs::is_directory(path, error)) {
      folder_ = path.string();
      typed_.clear();
      list_folder();
      picked = false;
    } else {
      chosen = path.string();
      ImGui::CloseCurrentPopup();
    }
  } else {
    picked = false;
  }
  ImGui::EndPopup();
  return picked;
}

}  // namespace attnscope
