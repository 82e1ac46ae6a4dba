// A workbench panel: one struct per file in viewer/panels/, each drawing one window of the
// workbench from the shared context; the list of panels is made in one place (panel_list.cpp).
#pragma once

#include <memory>
#include <string>
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

#include "core/enum_names.h"

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

struct AnalysisEntry;
// The controls of the options an analysis reads and defines (views/analysis_registry.h).
void draw_analysis_options(Workbench& bench, const AnalysisEntry& entry);
// A progress bar while the worker runs a long analysis view (statistics over a folder).
void draw_worker_progress(Workbench& bench);
// The analysis column's window for a registry entry with its switch, option controls and progress;
// false (the window already ended) when it is collapsed.
bool begin_analysis_window(Workbench& bench, const AnalysisEntry& entry);

// One radio button per value of an enum with a name table (core/enum_names.h), labelled as the
// table says; `same_line` puts them on one line. Returns true when the value changed.
template <typename E>
bool enum_radio_buttons(E& value, bool same_line) {
  bool changed = false, first = true;
  for (const auto& entry : enum_entries<E>()) {
    if (same_line && !first) ImGui::SameLine();
    first = false;
    if (ImGui::RadioButton(entry.label ? entry.label : entry.name, value == entry.value)) {
      changed = value != entry.value;
      value = entry.value;
    }
  }
  return changed;
}

// Whether `analysis` has a panel of its own (else the analysis figure panel draws its figure).
bool has_own_analysis_panel(const std::string& analysis);

}  // namespace attnscope
