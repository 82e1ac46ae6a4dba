// A workbench panel: one struct per file in viewer/panels/, each drawing one window of the
// workbench from the shared context; the list of panels is made in one place (panel_list.cpp).
#pragma once

#include <memory>
#include <vector>

namespace attnscope {

class Workbench;

struct WorkbenchPanel {
  virtual ~WorkbenchPanel() = default;
  virtual void draw(Workbench& bench) = 0;
};

// Every panel, in drawing order.
std::vector<std::unique_ptr<WorkbenchPanel>> make_panels();

}  // namespace attnscope

#include <imgui.h>

namespace attnscope {

// Panels tile the window at fixed places (the layout is part of the session, not of imgui.ini).
// They draw no background of their own: the frame is cleared to the window colour, which spares a
// blended quad over every pixel (most of a frame's cost under a software rasteriser).
inline bool begin_fixed_window(const char* name, ImVec2 pos, ImVec2 size, ImGuiWindowFlags extra = 0) {
  ImGui::SetNextWindowPos(pos, ImGuiCond_Always);
  ImGui::SetNextWindowSize(size, ImGuiCond_Always);
  return ImGui::Begin(name, nullptr,
                      ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                          ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground | extra);
}

// The row of buttons at the top of the analysis column that switches between its views.
void draw_analysis_switch(Workbench& bench);

}  // namespace attnscope
