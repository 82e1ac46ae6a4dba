// The focus metrics view: for every side-by-side panel and head, how focused the query's attention
// row over the patches is (entropy, top-10 mass, Gini) and, with a box drawn on the attention views
// (right drag or shift + left drag), the share of its mass inside the box (analysis/focus_metrics.h).
#include <imgui.h>

#include <nlohmann/json.hpp>

#include "analysis/focus_metrics.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

struct MetricsPanel : AnalysisPanel {
  const PanelFocusMetrics* shown = nullptr;  // drawn this frame

  void draw(Workbench& bench, const AnalysisEntry&) override {
    shown = nullptr;
    AppState& state = bench.state;
    if (state.box.empty()) {
      ImGui::TextWrapped("box: none; drag with the right mouse button (or shift + left) on a view to draw one");
    } else {
      ImGui::Text("box: patches %s (rows, cols; end-exclusive)", state.box.c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("clear box")) state.box.clear();
    }
    const InferenceOutcome* outcome = bench.outcome.get();
    const PanelFocusMetrics* metrics = outcome ? analysis_result<PanelFocusMetrics>(*outcome) : nullptr;
    if (metrics && !metrics->box_error.empty())
      ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", metrics->box_error.c_str());
    if (!metrics || metrics->panels.empty() || metrics->panels.front().empty()) {
      draw_waiting(bench);
      return;
    }
    shown = metrics;
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
      for (size_t panel = 0; panel < metrics->panels.size() && panel < outcome->panels.size(); ++panel)
        for (const HeadFocusMetrics& row : metrics->panels[panel]) {
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
  }

  // The table's rows, as numbers.
  void report(const Workbench&, nlohmann::json& about, nlohmann::json&) const override {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t panel = 0; shown && panel < shown->panels.size(); ++panel)
      for (const HeadFocusMetrics& row : shown->panels[panel])
        rows.push_back({{"panel", panel},
                        {"head", row.head},
                        {"entropy", row.entropy},
                        {"top_k_mass", row.top_k_mass},
                        {"gini", row.gini},
                        {"box_mass", row.box_mass ? nlohmann::json(*row.box_mass) : nlohmann::json()}});
    about["metrics"] = rows;
  }
};

}  // namespace

ATTNSCOPE_ANALYSIS_PANEL("metrics", MetricsPanel)

}  // namespace attnscope
