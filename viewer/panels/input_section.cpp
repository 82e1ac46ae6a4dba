// The sidebar's input section: how the image becomes each model's input (resize, crop fraction,
// interpolation, mean, std), each left empty to take what the checkpoint declares, and what panel 1
// actually used.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "viewer/panels/sidebar_sections.h"
#include "viewer/workbench.h"

namespace attnscope {

void draw_input_section(Workbench& bench, InputFields& fields) {
  AppState& state = bench.state;
  if (ImGui::BeginCombo("resize", to_string(state.resize).c_str())) {
    for (ResizeMode mode : {ResizeMode::Auto, ResizeMode::Timm, ResizeMode::Fit, ResizeMode::None})
      if (ImGui::Selectable(to_string(mode).c_str(), state.resize == mode)) state.resize = mode;
    ImGui::EndCombo();
  }
  option_field(bench, "crop", "crop", fields.crop);
  const std::string shown_filter = state.interpolation ? to_string(*state.interpolation) : "checkpoint's";
  if (ImGui::BeginCombo("interpolation", shown_filter.c_str())) {
    if (ImGui::Selectable("checkpoint's", !state.interpolation)) state.interpolation.reset();
    for (const auto& filter : enum_entries<Interpolation>())
      if (ImGui::Selectable(filter.name, state.interpolation == filter.value)) state.interpolation = filter.value;
    ImGui::EndCombo();
  }
  option_field(bench, "mean", "mean", fields.mean);
  option_field(bench, "std", "std", fields.std);
  ImGui::TextDisabled("empty: what the checkpoint declares, else ImageNet's");
  if (bench.outcome && !bench.outcome->panels.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("panel 1 used: %s", bench.outcome->panels.front().preprocessing.c_str());
    ImGui::PopStyleColor();
  }
}

}  // namespace attnscope
