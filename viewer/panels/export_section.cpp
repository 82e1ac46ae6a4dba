// The sidebar's figure export: "what is on screen" (the panels with their models and variants, the
// view, scale mode and colour map) or a paper layout, with format, resolution, physical width and
// layers/heads; written by the worker with the code of `attnscope export`.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "exports/layouts.h"
#include "session/export_folder.h"
#include "viewer/panels/sidebar_sections.h"
#include "viewer/workbench.h"
#include "views/option_catalog.h"

namespace attnscope {

void option_field(Workbench& bench, const char* label, const char* option, std::string& edited) {
  const bool entered = ImGui::InputText(label, &edited, ImGuiInputTextFlags_EnterReturnsTrue);
  if (entered) {
    try {
      set_option(bench.state, option, edited);
    } catch (const std::invalid_argument& e) {
      bench.report_error(e.what());
    }
  }
  if (!ImGui::IsItemActive() && !entered) edited = find_option(option)->get(bench.state);
}

void draw_export_section(Workbench& bench, ExportFields& fields) {
  AppState& state = bench.state;
  ExportSettings& figure = state.figure;
  if (ImGui::BeginCombo("format", to_string(figure.format).c_str())) {
    for (const auto& format : enum_entries<FigureFormat>())
      if (ImGui::Selectable(format.name, figure.format == format.value)) figure.format = format.value;
    ImGui::EndCombo();
  }
  float dpi = float(figure.dpi);
  if (ImGui::InputFloat("DPI (png)", &dpi, 0, 0, "%.0f", ImGuiInputTextFlags_EnterReturnsTrue))
    figure.dpi = std::clamp(double(dpi), 10.0, 2400.0);
  float width = float(figure.width_pt);
  if (ImGui::InputFloat("width (pt)", &width, 0, 0, "%.0f", ImGuiInputTextFlags_EnterReturnsTrue))
    figure.width_pt = width <= 0 ? 0.0 : std::clamp(double(width), 50.0, 5000.0);
  ImGui::SameLine();
  if (ImGui::SmallButton("single")) figure.width_pt = kSingleColumnPt;
  ImGui::SameLine();
  if (ImGui::SmallButton("double")) figure.width_pt = kDoubleColumnPt;
  ImGui::TextDisabled("a journal's column: single 3.25 in (234 pt), double 6.75 in (486 pt); 0: natural");
  ImGui::Checkbox("overwrite", &figure.overwrite);
  ImGui::SameLine();
  ImGui::Checkbox("transparent", &figure.transparent);
  if (fields.folder.empty()) fields.folder = default_export_folder(bench.options.session_path);
  ImGui::InputText("folder", &fields.folder);

  if (ImGui::Button("Export what is on screen")) bench.export_figure(fields.folder, true);
  ImGui::SameLine();
  if (ImGui::Button("Preview at print size")) bench.preview_figure();
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("the panels with their models and variants, the %s view, the %s scale and the %s map",
                     enum_name(state.view).c_str(), to_string(state.scale).c_str(), to_string(state.colormap).c_str());
  ImGui::PopStyleColor();

  ImGui::Separator();
  if (ImGui::BeginCombo("layout", figure.layout.c_str())) {
    for (const auto& layout : figure_layouts()) {
      if (ImGui::Selectable(layout.name, figure.layout == layout.name)) figure.layout = layout.name;
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", layout.description);
    }
    ImGui::EndCombo();
  }
  option_field(bench, "layers", "layers", fields.layers);
  option_field(bench, "heads", "heads", fields.heads);
  if (ImGui::Button("Export layout")) bench.export_figure(fields.folder);
  ImGui::TextDisabled("the code of `attnscope export`; data and session go beside it");
}

}  // namespace attnscope
