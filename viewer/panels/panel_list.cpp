// The one list of the workbench's windows (each defined in its own file), and the analysis column's
// switch, whose buttons are the analysis registry's (views/analysis_registry.h). Analyses' own
// panels are not listed here: each registers itself (panel.h, ATTNSCOPE_ANALYSIS_PANEL).
#include <algorithm>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"

namespace attnscope {

std::unique_ptr<WorkbenchPanel> make_menu_bar();
std::unique_ptr<WorkbenchPanel> make_controls_panel();
std::unique_ptr<WorkbenchPanel> make_attention_panel();
std::unique_ptr<WorkbenchPanel> make_analysis_column();
std::unique_ptr<WorkbenchPanel> make_status_panel();
std::unique_ptr<WorkbenchPanel> make_print_preview_panel();
std::unique_ptr<WorkbenchPanel> make_folder_jobs_panel();

void draw_analysis_switch(Workbench& bench) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float right_edge = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  // Some analyses need q, k and activations, which a TorchScript file does not give.
  const bool scripted = bench.outcome && !bench.outcome->computes_attention;
  std::string needing;
  bool first = true;
  auto button = [&](const std::string& name, const std::string& label, bool disabled) {
    // Wraps to a new line where the next button would not fit (the sidebar is narrower than the column).
    const float width = ImGui::GetFrameHeight() + style.ItemInnerSpacing.x + ImGui::CalcTextSize(label.c_str()).x;
    if (!first && ImGui::GetItemRectMax().x + style.ItemSpacing.x + width <= right_edge) ImGui::SameLine();
    first = false;
    ImGui::BeginDisabled(disabled);
    if (ImGui::RadioButton(label.c_str(), bench.state.analysis == name)) bench.state.analysis = name;
    ImGui::EndDisabled();
  };
  button("none", "hide", false);
  for (const AnalysisEntry& entry : analysis_registry()) {
    if (entry.label.empty()) continue;
    button(entry.name, entry.label, scripted && entry.needs_computed_attention);
    if (entry.needs_computed_attention) needing += (needing.empty() ? "" : " and ") + entry.label;
  }
  if (scripted) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s need q, k and activations: off for TorchScript files", needing.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::Separator();
}

std::vector<std::unique_ptr<WorkbenchPanel>> make_panels() {
  std::vector<std::unique_ptr<WorkbenchPanel>> panels;
  panels.push_back(make_menu_bar());
  panels.push_back(make_controls_panel());
  panels.push_back(make_attention_panel());
  panels.push_back(make_analysis_column());
  panels.push_back(make_status_panel());
  panels.push_back(make_print_preview_panel());
  panels.push_back(make_folder_jobs_panel());
  return panels;
}

}  // namespace attnscope
