// The Grad-CAM view: panel 1's class-discriminative map (pytorch-grad-cam's ViT conventions: the
// class logit's gradient at one layer, ReLU, min-max scaled) over the image, with the target class,
// layer and score; the class and layer are chosen here and saved with the session.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

struct GradCamPanel : AnalysisPanel {
  gl::OverlayView overlay;
  gl::MapValues map_values;
  uint64_t uploaded = 0;  // the outcome's request id whose map map_values holds
  std::string layer_field;
  const GradCamView* shown = nullptr;  // drawn this frame

  void draw(Workbench& bench, const AnalysisEntry&) override {
    shown = nullptr;
    AppState& state = bench.state;
    // Models without classes (DINO, DINOv2, CLIP's embedding) have no top-1: Grad-CAM then targets
    // one output dimension, or the output's norm.
    const InferenceOutcome* outcome = bench.outcome.get();
    const bool classes = !outcome || outcome->output_kind == OutputKind::Logits;
    ImGui::SetNextItemWidth(120);
    int target_class = state.target.kind == TargetKind::Class ? state.target.class_index : -1;
    if (ImGui::InputInt(classes ? "class (-1: top-1)" : "feature (-1: the norm)", &target_class))
      state.target = TargetSpec::of_class(target_class);
    if (state.target.kind != TargetKind::Class) ImGui::TextDisabled("--target %s", to_string(state.target).c_str());
    if (!classes)
      ImGui::TextDisabled("%s: features, no classes; Grad-CAM of one dimension or of the norm",
                          to_string(outcome->output_kind).c_str());
    ImGui::SetNextItemWidth(200);
    if (ImGui::InputText("layer", &layer_field, ImGuiInputTextFlags_EnterReturnsTrue))
      state.gradcam_layer = layer_field;
    if (!ImGui::IsItemActive()) layer_field = state.gradcam_layer;  // shows the state unless being edited
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "layer: blocks.N.norm1, blocks.N.norm2, blocks.N (N counts attention blocks across stages, < 0 from the "
        "end), norm, or the family's module name (layers.3.blocks.1.norm1, stages.3.norm)");
    ImGui::PopStyleColor();

    const GradCamView* cam_view = outcome ? analysis_result<GradCamView>(*outcome) : nullptr;
    if (!cam_view) {
      draw_waiting(bench, "no Grad-CAM yet");
      return;
    }
    const GradCamView& cam = *cam_view;
    const GridMap& map = cam.map;
    if (uploaded != outcome->request_id) {
      map_values.assign(map.values.data(), map.grid_w, map.grid_h);
      uploaded = outcome->request_id;
    }
    shown = cam_view;
    ImGui::TextWrapped("%s: %s %d (%s), %s %.3f, at %s; %.0f ms", outcome->panels.front().description.c_str(),
                       classes ? "class" : "target", cam.target_class, cam.class_name.c_str(),
                       classes ? "logit" : "value", cam.score, cam.layer.c_str(), cam.milliseconds);
    if (!cam.warning.empty()) ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", cam.warning.c_str());
    const float available = std::min(ImGui::GetContentRegionAvail().x, 440.0f);
    const float cell = std::max(1.0f, std::floor(available / float(std::max(map.grid_w, map.grid_h))));
    const ImVec2 size(cell * map.grid_w, cell * map.grid_h);
    ValueScale scale;  // Grad-CAM is min-max scaled to [0, 1]
    scale.colormap = state.colormap;
    scale.label = "Grad-CAM, max = 1";
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    bench.renderer->draw(overlay, &bench.image_texture(), map_values, scale, float(state.opacity), state.alpha, size);
    bench.drawn.views.push_back({-1, -1, pos.x, pos.y, size.x, size.y});
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int col = std::clamp(int((mouse.x - pos.x) / cell), 0, map.grid_w - 1);
      const int row = std::clamp(int((mouse.y - pos.y) / cell), 0, map.grid_h - 1);
      ImGui::SetTooltip("patch (%d, %d): %.3f", row, col, double(map.at(row, col)));
    }
    draw_colour_bar(bench, scale, size.x, scale_caption(scale) + "; opacity from the sidebar");
  }

  void report(const Workbench&, nlohmann::json&, nlohmann::json& shown_numbers) const override {
    if (shown) shown_numbers.push_back({{"kind", "gradcam"}, {"values", shown->map.values}});
  }
};

}  // namespace

ATTNSCOPE_ANALYSIS_PANEL("gradcam", GradCamPanel)

}  // namespace attnscope
