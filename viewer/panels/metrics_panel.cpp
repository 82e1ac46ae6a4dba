// The focus metrics view: for every side-by-side panel and head, how focused the query's attention
// row over the patches is (entropy, top-10 mass, Gini) and, with a box drawn on the attention views
// (right drag or shift + left drag), the share of its mass inside the box (analysis/focus_metrics.h).
#include <imgui.h>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct MetricsPanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    if (bench.state.analysis != "metrics") return;
    if (!begin_fixed_window("Focus metrics", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    AppState& state = bench.state;
    if (state.box.empty()) {
      ImGui::TextWrapped("box: none; drag with the right mouse button (or shift + left) on a view to draw one");
    } else {
      ImGui::Text("box: patches %s (rows, cols; end-exclusive)", state.box.c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("clear box")) state.box.clear();
    }
    const InferenceOutcome* outcome = bench.outcome.get();
    if (outcome && !outcome->box_error.empty())
      ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", outcome->box_error.c_str());
    if (!outcome || outcome->panels.empty() || outcome->panels.front().metrics.empty()) {
      ImGui::TextDisabled(bench.worker_busy ? "computing..." : "no result yet");
      ImGui::End();
      return;
    }
    ImGui::TextWrapped("layer %d, query %s: each head's map over the patches (entropy in nats)", outcome->layer,
                       outcome->layout.token_name(outcome->query_token).c_str());
    const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("##metrics", 6, flags)) {
      ImGui::TableSetupColumn("panel");
      ImGui::TableSetupColumn("head");
      ImGui::TableSetupColumn("entropy");
      ImGui::TableSetupColumn("top-10 mass");
      ImGui::TableSetupColumn("Gini");
      ImGui::TableSetupColumn("in box");
      ImGui::TableHeadersRow();
      for (size_t panel = 0; panel < outcome->panels.size(); ++panel)
        for (const HeadFocusMetrics& row : outcome->panels[panel].metrics) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          // The panel's variant once, at its first head, so the rows group by panel.
          if (row.head == 0) ImGui::Text("%d: %s", int(panel) + 1, outcome->panels[panel].description.c_str());
          ImGui::TableNextColumn();
          ImGui::Text("%d", row.head);
          ImGui::TableNextColumn();
          ImGui::Text("%.3f", row.entropy);
          ImGui::TableNextColumn();
          ImGui::Text("%.3f", row.top_k_mass);
          ImGui::TableNextColumn();
          ImGui::Text("%.3f", row.gini);
          ImGui::TableNextColumn();
          if (row.box_mass)
            ImGui::Text("%.3f", *row.box_mass);
          else
            ImGui::TextUnformatted("-");
        }
      ImGui::EndTable();
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_metrics_panel() { return std::make_unique<MetricsPanel>(); }

}  // namespace attnscope
