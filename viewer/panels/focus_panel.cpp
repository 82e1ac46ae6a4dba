// The f_p view (FLatten's focusing function): for panel 1's layer and the selected head, the head's
// own key or query vectors before and after f_p in 2-D with a line from each x to f_p(x) (the pull
// toward the axes on real data), the query-key similarity histograms before and after, entropy and
// top-k mass of the score rows over p, and the paper's Fig. 4 (b) example. The plots are the
// figures' cairo drawing (views/plot_views.h); `export --layout fp-vectors` writes the projection.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/plot_views.h"

namespace attnscope {

namespace {

struct FocusPanel : AnalysisPanel {
  PlotImage plot;
  const FocusView* shown = nullptr;  // drawn this frame

  void draw(Workbench& bench, const AnalysisEntry&) override {
    shown = nullptr;
    AppState& state = bench.state;
    ImGui::TextUnformatted("vectors:");
    ImGui::SameLine();
    enum_radio_buttons(state.fp_vectors, true);
    ImGui::SameLine();
    ImGui::TextUnformatted("  projection:");
    ImGui::SameLine();
    enum_radio_buttons(state.fp_projection, true);
    const InferenceOutcome* outcome = bench.outcome.get();
    const FocusView* view = outcome ? analysis_result<FocusView>(*outcome) : nullptr;
    if (!view) {
      draw_waiting(bench);
      return;
    }
    shown = view;
    const FocusView& focus = *view;
    const int width = std::max(60, int(bench.layout.analysis_size.x) - 24);
    try {
      refresh_plot(plot, std::to_string(outcome->request_id), width, [&] { return focus_view_figure(focus); });
    } catch (const std::exception& e) {
      bench.report_error(std::string("plot: ") + e.what());
    }
    const FocusProjection& projection = focus.projection;
    ImGui::TextWrapped("layer %d, head %d, p = %.2f (panel 1's p); %d of %d %s; axes: %s", outcome->layer, focus.head,
                       focus.p, projection.shown, projection.total, projection.vectors.c_str(),
                       projection.axes.c_str());
    if (plot.texture.valid()) {
      const ImVec2 pos = ImGui::GetCursorScreenPos();
      gl::opaque_image(plot.texture.imgui_id(), ImVec2(float(plot.width), float(plot.height)));
      bench.drawn.views.push_back({-4, focus.head, pos.x, pos.y, float(plot.width), float(plot.height), 0, 0});
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
  }

  void report(const Workbench&, nlohmann::json&, nlohmann::json& shown_numbers) const override {
    if (shown)
      shown_numbers.push_back(
          {{"kind", "fp"}, {"p", shown->curve_ps}, {"entropy", shown->entropy}, {"top_k_mass", shown->top_k_mass}});
  }
};

}  // namespace

ATTNSCOPE_ANALYSIS_PANEL("fp", FocusPanel)

}  // namespace attnscope
