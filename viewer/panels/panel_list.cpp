// The one list of workbench panels (each defined in its own file).
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

std::unique_ptr<WorkbenchPanel> make_controls_panel();
std::unique_ptr<WorkbenchPanel> make_attention_panel();
std::unique_ptr<WorkbenchPanel> make_matrix_panel();
std::unique_ptr<WorkbenchPanel> make_gradcam_panel();
std::unique_ptr<WorkbenchPanel> make_focus_panel();
std::unique_ptr<WorkbenchPanel> make_rollout_panel();
std::unique_ptr<WorkbenchPanel> make_metrics_panel();
std::unique_ptr<WorkbenchPanel> make_status_panel();

void draw_analysis_switch(Workbench& bench) {
  static const char* const kLabels[] = {"hide", "matrix", "Grad-CAM", "f_p", "rollout", "metrics"};
  const auto& names = analysis_names();
  const ImGuiStyle& style = ImGui::GetStyle();
  const float right_edge = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  // Grad-CAM and f_p need q, k and activations, which a TorchScript file does not give.
  const bool scripted = bench.outcome && !bench.outcome->computes_attention;
  for (size_t i = 0; i < names.size(); ++i) {
    // Wraps to a new line where the next button would not fit (the sidebar is narrower than the column).
    const float width = ImGui::GetFrameHeight() + style.ItemInnerSpacing.x + ImGui::CalcTextSize(kLabels[i]).x;
    if (i && ImGui::GetItemRectMax().x + style.ItemSpacing.x + width <= right_edge) ImGui::SameLine();
    const bool needs_native = names[i] == "gradcam" || names[i] == "fp";
    ImGui::BeginDisabled(scripted && needs_native);
    if (ImGui::RadioButton(kLabels[i], bench.state.analysis == names[i])) bench.state.analysis = names[i];
    ImGui::EndDisabled();
  }
  if (scripted) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("Grad-CAM and f_p need q, k and activations: off for TorchScript files");
    ImGui::PopStyleColor();
  }
  ImGui::Separator();
}

std::vector<std::unique_ptr<WorkbenchPanel>> make_panels() {
  std::vector<std::unique_ptr<WorkbenchPanel>> panels;
  panels.push_back(make_controls_panel());
  panels.push_back(make_attention_panel());
  panels.push_back(make_matrix_panel());
  panels.push_back(make_gradcam_panel());
  panels.push_back(make_focus_panel());
  panels.push_back(make_rollout_panel());
  panels.push_back(make_metrics_panel());
  panels.push_back(make_status_panel());
  return panels;
}

}  // namespace attnscope
