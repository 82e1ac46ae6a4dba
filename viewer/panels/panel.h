// A workbench panel: one struct per file in viewer/panels/, each drawing one window of the
// workbench from the shared context; the list of windows is made in one place (panel_list.cpp).
// An analysis's own view is an AnalysisPanel that its file registers by the analysis's name
// (ATTNSCOPE_ANALYSIS_PANEL): the analysis column draws it while that analysis is open, and
// draws the analysis's figure for analyses without one. No list elsewhere names them.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace attnscope {

class Workbench;
struct AnalysisEntry;

struct WorkbenchPanel {
  virtual ~WorkbenchPanel() = default;
  virtual void draw(Workbench& bench) = 0;
  // What the headless screenshot's JSON says of what this panel drew this frame: keys added to
  // `about`, and the numbers each drawn map or plot holds appended to `shown` (tests compare them
  // with the exported figure).
  virtual void report(const Workbench& bench, nlohmann::json& about, nlohmann::json& shown) const {
    (void)bench, (void)about, (void)shown;
  }
};

// Every window, in drawing order.
std::vector<std::unique_ptr<WorkbenchPanel>> make_panels();

// An analysis's own view inside the analysis column (its window, the analysis switch and the
// worker's progress are drawn around it).
struct AnalysisPanel {
  virtual ~AnalysisPanel() = default;
  virtual void draw(Workbench& bench, const AnalysisEntry& entry) = 0;
  virtual void report(const Workbench& bench, nlohmann::json& about, nlohmann::json& shown) const {
    (void)bench, (void)about, (void)shown;
  }
};
using AnalysisPanelFactory = std::unique_ptr<AnalysisPanel> (*)();

// Called once per panel kind at static initialisation (ATTNSCOPE_ANALYSIS_PANEL); returns true.
bool register_analysis_panel(const char* analysis, AnalysisPanelFactory make);
// A new instance of the panel registered for `analysis`; null when it has none (its figure shows).
std::unique_ptr<AnalysisPanel> make_analysis_panel(const std::string& analysis);

// In an analysis panel's file: registers `Type` as the view of the analysis named `name`.
#define ATTNSCOPE_ANALYSIS_PANEL(name, Type)                                                            \
  namespace {                                                                                           \
  const bool registered_##Type = ::attnscope::register_analysis_panel(                                  \
      name, +[]() -> std::unique_ptr<::attnscope::AnalysisPanel> { return std::make_unique<Type>(); }); \
  }

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

// The controls of the options an analysis reads and defines (views/analysis_registry.h).
void draw_analysis_options(Workbench& bench, const AnalysisEntry& entry);
// A progress bar while the worker runs a long analysis view (statistics over a folder).
void draw_worker_progress(Workbench& bench);

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

// "computing..." while the worker runs, else `idle`: what an analysis view shows without data.
void draw_waiting(const Workbench& bench, const char* idle = "no result yet");

struct Figure;
// The numbers of every heatmap and plot of a figure drawn on screen, for a panel's report().
void report_figure_numbers(const Figure& figure, nlohmann::json& shown_numbers);

}  // namespace attnscope
