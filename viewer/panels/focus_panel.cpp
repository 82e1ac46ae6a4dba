// The f_p view (FLatten's focusing function): for panel 1's layer and the selected head, how f_p at
// the sidebar's p reshapes the real query-key similarities (histograms before and after), how the
// entropy and top-k mass of the score rows fall as p grows, and the paper's Fig. 4 (b) example.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

void plot_pair(const char* label, const std::vector<float>& before, const std::vector<float>& after, float height) {
  const float top =
      std::max(*std::max_element(before.begin(), before.end()), *std::max_element(after.begin(), after.end()));
  const float width = ImGui::GetContentRegionAvail().x;
  ImGui::PushID(label);
  ImGui::PlotHistogram("##before", before.data(), int(before.size()), 0, "before (ReLU)", 0.0f, top,
                       ImVec2(width, height));
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, ImVec4(0.95f, 0.55f, 0.2f, 1.0f));
  ImGui::PlotHistogram("##after", after.data(), int(after.size()), 0, "after f_p", 0.0f, top, ImVec2(width, height));
  ImGui::PopStyleColor();
  ImGui::PopID();
}

}  // namespace

struct FocusPanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    if (bench.state.analysis != "fp") return;
    if (!begin_fixed_window("f_p focusing", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !outcome->focus) {
      ImGui::TextDisabled(bench.worker_busy ? "computing..." : "no result yet");
      ImGui::End();
      return;
    }
    const FocusView& focus = *outcome->focus;
    ImGui::TextWrapped("layer %d, head %d, p = %.2f (the sidebar's p slider); features: %s", outcome->layer, focus.head,
                       focus.p, focus.source.c_str());
    ImGui::Separator();
    ImGui::TextUnformatted("cosine similarity of every (query, key) pair, 0 .. 1");
    plot_pair("similarity", focus.histogram_before, focus.histogram_after, 90);

    ImGui::Separator();
    ImGui::Text("score rows as p grows (p = %.0f .. %.0f)", double(focus.curve_ps.front()),
                double(focus.curve_ps.back()));
    const float width = ImGui::GetContentRegionAvail().x;
    ImGui::PlotLines("##entropy", focus.entropy.data(), int(focus.entropy.size()), 0, "mean entropy (nats)", FLT_MAX,
                     FLT_MAX, ImVec2(width, 80));
    ImGui::PlotLines("##topk", focus.top_k_mass.data(), int(focus.top_k_mass.size()), 0, "mean top-10 mass", FLT_MAX,
                     FLT_MAX, ImVec2(width, 80));
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
