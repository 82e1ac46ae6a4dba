// The f_p view (FLatten's focusing function): for panel 1's layer and the selected head, the head's
// own key or query vectors before and after f_p in 2-D with a line from each x to f_p(x) (the pull
// toward the axes on real data), the query-key similarity histograms before and after, entropy and
// top-k mass of the score rows over p, and the paper's Fig. 4 (b) example. The plots are the
// figures' cairo drawing (views/plot_views.h); `export --layout fp-vectors` writes the projection.
#include <algorithm>
#include <cmath>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct FocusPanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    if (bench.state.analysis != "fp") return;
    if (!begin_fixed_window("f_p focusing", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    AppState& state = bench.state;
    ImGui::TextUnformatted("vectors:");
    ImGui::SameLine();
    enum_radio_buttons(state.fp_vectors, true);
    ImGui::SameLine();
    ImGui::TextUnformatted("  projection:");
    ImGui::SameLine();
    enum_radio_buttons(state.fp_projection, true);
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !outcome->focus) {
      ImGui::TextDisabled(bench.worker_busy ? "computing..." : "no result yet");
      ImGui::End();
      return;
    }
    const FocusView& focus = *outcome->focus;
    const FocusProjection& projection = focus.projection;
    ImGui::TextWrapped("layer %d, head %d, p = %.2f (panel 1's p); %d of %d %s; axes: %s", outcome->layer, focus.head,
                       focus.p, projection.shown, projection.total, projection.vectors.c_str(),
                       projection.axes.c_str());
    if (bench.focus_plot.texture.valid()) {
      const ImVec2 pos = ImGui::GetCursorScreenPos();
      gl::opaque_image(bench.focus_plot.texture.imgui_id(),
                       ImVec2(float(bench.focus_plot.width), float(bench.focus_plot.height)));
      bench.drawn_views.push_back(
          {-4, focus.head, pos.x, pos.y, float(bench.focus_plot.width), float(bench.focus_plot.height), 0, 0});
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("features: %s", focus.source.c_str());
    ImGui::PopStyleColor();
    for (size_t i = 0; i < focus.curve_ps.size(); ++i)
      if (std::abs(focus.curve_ps[i] - focus.p) < 1e-6)
        ImGui::Text("at p = %.0f: entropy %.3f, top-10 mass %.3f", double(focus.p), double(focus.entropy[i]),
                    double(focus.top_k_mass[i]));

    ImGui::Separator();
    ImGui::TextUnformatted("Fig. 4 (b): one query against four keys");
    if (ImGui::BeginTable("##scores", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
      ImGui::TableSetupColumn("key");
      ImGui::TableSetupColumn("ReLU");
      ImGui::TableSetupColumn("f_p");
      ImGui::TableHeadersRow();
      for (size_t j = 0; j < focus.example_before.size(); ++j) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%zu", j);
        ImGui::TableNextColumn();
        ImGui::Text("%.2f", double(focus.example_before[j]));
        ImGui::TableNextColumn();
        ImGui::Text("%.2f", double(focus.example_after[j]));
      }
      ImGui::EndTable();
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_focus_panel() { return std::make_unique<FocusPanel>(); }

}  // namespace attnscope
