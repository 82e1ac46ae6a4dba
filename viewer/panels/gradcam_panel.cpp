// The Grad-CAM view: panel 1's class-discriminative map (pytorch-grad-cam's ViT conventions: the
// class logit's gradient at one layer, ReLU, min-max scaled) over the image, with the target class,
// layer and score; the class and layer are chosen here and saved with the session.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct GradCamPanel : WorkbenchPanel {
  gl::RenderTarget target;
  std::string layer_field;

  void draw(Workbench& bench) override {
    if (bench.state.analysis != "gradcam") return;
    if (!begin_fixed_window("Grad-CAM", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    AppState& state = bench.state;
    ImGui::SetNextItemWidth(120);
    int target_class = state.target_class;
    if (ImGui::InputInt("class (-1: top-1)", &target_class)) state.target_class = std::max(-1, target_class);
    ImGui::SetNextItemWidth(200);
    if (ImGui::InputText("layer", &layer_field, ImGuiInputTextFlags_EnterReturnsTrue))
      state.gradcam_layer = layer_field;
    if (!ImGui::IsItemActive()) layer_field = state.gradcam_layer;  // shows the state unless being edited
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "layer: blocks.N.norm1, blocks.N.norm2, blocks.N (N counts attention blocks across stages, < 0 from the "
        "end), norm, or the family's module name (layers.3.blocks.1.norm1, stages.3.norm)");
    ImGui::PopStyleColor();

    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !outcome->gradcam || !bench.gradcam_texture.valid()) {
      ImGui::TextDisabled(bench.worker_busy ? "computing Grad-CAM..." : "no Grad-CAM yet");
      ImGui::End();
      return;
    }
    const GradCamView& cam = *outcome->gradcam;
    ImGui::TextWrapped("%s: class %d (%s), logit %.3f, at %s; %.0f ms", outcome->panels.front().description.c_str(),
                       cam.target_class, cam.class_name.c_str(), cam.score, cam.layer.c_str(), cam.milliseconds);
    if (!cam.warning.empty()) ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", cam.warning.c_str());
    const GridMap& map = cam.map;
    const float available = std::min(ImGui::GetContentRegionAvail().x, 440.0f);
    const float cell = std::max(1.0f, std::floor(available / float(std::max(map.grid_w, map.grid_h))));
    const ImVec2 size(cell * map.grid_w, cell * map.grid_h);
    target.resize(int(size.x), int(size.y));
    gl::ColorScale scale;  // Grad-CAM is min-max scaled to [0, 1]
    scale.colormap = state.colormap;
    bench.renderer->render(target, &bench.image_texture, bench.gradcam_texture, scale, float(state.opacity));
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(target.imgui_id(), size);
    bench.drawn_views.push_back({-1, -1, pos.x, pos.y, size.x, size.y});
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int col = std::clamp(int((mouse.x - pos.x) / cell), 0, map.grid_w - 1);
      const int row = std::clamp(int((mouse.y - pos.y) / cell), 0, map.grid_h - 1);
      ImGui::SetTooltip("patch (%d, %d): %.3f", row, col, double(map.at(row, col)));
    }
    ImGui::TextDisabled("scale 0 (min) .. 1 (max), %s, opacity from the sidebar", to_string(state.colormap).c_str());
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_gradcam_panel() { return std::make_unique<GradCamPanel>(); }

}  // namespace attnscope
