// The attention rollout view: panel 1's rolled-out attention of the query token through every
// captured layer (analysis/rollout.h), over the image through the attention views' overlay shader,
// on its own min..max scale with its own colour bar (its values are products through the layers,
// not comparable with one layer's attention). Head fusion and discard ratio are chosen here.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct RolloutPanel : WorkbenchPanel {
  gl::RenderTarget target;

  void draw(Workbench& bench) override {
    if (bench.state.analysis != "rollout") return;
    if (!begin_fixed_window("Attention rollout", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    AppState& state = bench.state;
    ImGui::TextUnformatted("head fusion:");
    for (HeadFusion fusion : {HeadFusion::Mean, HeadFusion::Max, HeadFusion::Min}) {
      ImGui::SameLine();
      if (ImGui::RadioButton(to_string(fusion).c_str(), state.fusion == fusion)) state.fusion = fusion;
    }
    float discard = float(state.discard);
    ImGui::SetNextItemWidth(220);
    if (ImGui::SliderFloat("discard ratio", &discard, 0.0f, 0.99f, "%.2f", ImGuiSliderFlags_AlwaysClamp))
      state.discard = double(discard);

    const InferenceOutcome* outcome = bench.outcome.get();
    if (outcome && outcome->rollout && !outcome->rollout->error.empty()) {
      ImGui::TextWrapped("%s", outcome->rollout->error.c_str());
      ImGui::End();
      return;
    }
    if (!outcome || !outcome->rollout || !bench.rollout_texture.valid()) {
      ImGui::TextDisabled(bench.worker_busy ? "computing the rollout..." : "no rollout yet");
      ImGui::End();
      return;
    }
    const RolloutView& rollout = *outcome->rollout;
    const TokenLayout& tokens = outcome->layout;
    const GridMap& map = rollout.map;
    ImGui::TextWrapped("%s: query %s through %d layers, %s fusion, discard %.2f; %.1f ms",
                       outcome->panels.front().description.c_str(), rollout.query_name.c_str(), rollout.layers,
                       to_string(rollout.fusion).c_str(), rollout.discard, rollout.milliseconds);
    if (!rollout.note.empty()) ImGui::TextDisabled("%s", rollout.note.c_str());
    const float available = std::min(ImGui::GetContentRegionAvail().x, 440.0f);
    const float cell = std::max(1.0f, std::floor(available / float(std::max(map.grid_w, map.grid_h))));
    const ImVec2 size(cell * map.grid_w, cell * map.grid_h);
    target.resize(int(size.x), int(size.y));
    ValueScale scale;
    scale.colormap = state.colormap;
    scale.vmin = rollout.vmin;
    scale.vmax = rollout.vmax;
    scale.label = "rollout min..max";
    bench.renderer->render(target, &bench.image_texture(), bench.rollout_texture, scale, float(state.opacity),
                           state.alpha);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(target.imgui_id(), size);
    bench.drawn_views.push_back({-2, -1, pos.x, pos.y, size.x, size.y});
    if (tokens.is_patch(outcome->query_token)) {
      const ImVec2 a(pos.x + cell * tokens.col_of(outcome->query_token),
                     pos.y + cell * tokens.row_of(outcome->query_token));
      ImGui::GetWindowDrawList()->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 60, 60, 255), 0, 0, 2.0f);
    }
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int col = std::clamp(int((mouse.x - pos.x) / cell), 0, map.grid_w - 1);
      const int row = std::clamp(int((mouse.y - pos.y) / cell), 0, map.grid_h - 1);
      ImGui::SetTooltip("patch (%d, %d): %.5f", row, col, double(map.at(row, col)));
    }
    draw_colour_bar(bench, scale, size.x, scale_caption(scale) + "; opacity from the sidebar");
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_rollout_panel() { return std::make_unique<RolloutPanel>(); }

}  // namespace attnscope
