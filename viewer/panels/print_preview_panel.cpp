// "Preview at print size": the figures "Export what is on screen" would write, drawn by the export's
// own code at 96 dpi (1 pt = 1.33 px: an inch of paper is an inch of a 96-dpi screen), each with its
// size in points and inches and the range of its text sizes, before anything is written.
#include <imgui.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "viewer/gl/texture.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

struct PrintPreviewPanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    auto& preview = bench.print_preview;
    if (!preview.open) return;
    ImGui::SetNextWindowSize(ImVec2(760, 620), ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowPos(ImVec2(bench.layout.views_pos.x + 20, bench.layout.views_pos.y + 20),
                            ImGuiCond_FirstUseEver);
    if (!ImGui::Begin("Print preview", &preview.open, ImGuiWindowFlags_HorizontalScrollbar)) {
      ImGui::End();
      return;
    }
    if (!preview.error.empty()) ImGui::TextWrapped("no preview: %s", preview.error.c_str());
    ImGui::TextDisabled("at 96 dpi: 1 pt = 1.33 px, so an inch of paper is an inch of a 96-dpi screen");
    for (const auto& shown : preview.figures) {
      const PrintPreview& figure = shown.figure;
      char line[256];
      std::snprintf(line, sizeof line, "%s: %.0f x %.0f pt (%.2f x %.2f in), text %.1f-%.1f pt", shown.name.c_str(),
                    figure.width_pt, figure.height_pt, figure.width_pt / 72, figure.height_pt / 72,
                    figure.smallest_text_pt, figure.largest_text_pt);
      ImGui::TextUnformatted(line);
      if (!figure.note.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.65f, 0.2f, 1.0f));
        ImGui::TextWrapped("%s", figure.note.c_str());
        ImGui::PopStyleColor();
      }
      gl::opaque_image(shown.picture.texture.imgui_id(),
                       ImVec2(float(shown.picture.width), float(shown.picture.height)));
    }
    ImGui::End();
  }

  void report(const Workbench& bench, nlohmann::json& about, nlohmann::json&) const override {
    const auto& preview = bench.print_preview;
    if (!preview.open) return;
    nlohmann::json figures = nlohmann::json::array();
    for (const auto& shown : preview.figures)
      figures.push_back({{"name", shown.name},
                         {"width_pt", shown.figure.width_pt},
                         {"height_pt", shown.figure.height_pt},
                         {"smallest_text_pt", shown.figure.smallest_text_pt},
                         {"largest_text_pt", shown.figure.largest_text_pt},
                         {"note", shown.figure.note},
                         {"width_px", shown.picture.width},
                         {"height_px", shown.picture.height}});
    about["print_preview"] = {{"figures", figures}, {"error", preview.error}};
  }
};

}  // namespace

std::unique_ptr<WorkbenchPanel> make_print_preview_panel() { return std::make_unique<PrintPreviewPanel>(); }

}  // namespace attnscope
