// The direct logit attribution view (analysis "dla"): the layer x head grid as export draws it
// (FigureView), and a click on a head ablates it, a second click restores it (shift-click adds it
// to the ablated heads, or takes it out): the session's `ablate` knob changes, so every panel's maps and predictions
// are recomputed without the head. The change of the target's output against the unablated model is shown above the
// grid with "clear ablations", in sight however tall the grid is. Its own panel because the generic figure view takes
// no clicks on cells that are not patches.
#include <imgui.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "viewer/panels/figure_view.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"
#include "views/dla_view.h"

namespace attnscope {

struct DlaPanel : AnalysisPanel {
  FigureView figure;
  // The target's output without any ablation, for the change an ablation makes (kept per target).
  std::string unablated_target;
  double unablated_output = 0;
  bool has_unablated = false;

  void draw(Workbench& bench, const AnalysisEntry& entry) override {
    const InferenceOutcome* outcome = bench.outcome.get();
    const auto* view = outcome ? analysis_view_as<DlaView>(*outcome) : nullptr;
    // The hint, the ablated heads, the output's change and "clear ablations" above the figure,
    // where they stay in sight however tall the figure is.
    AttentionSettings& settings = bench.state.attention;
    if (view && view->report) {
      const DlaReport& report = *view->report;
      if (report.ablation.empty()) {
        unablated_target = report.target_name;
        unablated_output = report.attribution.output;
        has_unablated = true;
      }
      if (!settings.ablation.empty()) {
        ImGui::Text("ablated: %s (%s)", head_list_text(settings.ablation.heads).c_str(),
                    enum_name(settings.ablation.kind).c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("clear ablations")) settings.ablation.heads.clear();
        if (has_unablated && unablated_target == report.target_name && !report.ablation.empty())
          ImGui::Text("%s: %.4g without ablation, %.4g now (%+.4g)", report.target_name.c_str(), unablated_output,
                      report.attribution.output, report.attribution.output - unablated_output);
      }
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped(
          "click a head (row: layer, column: head) to ablate it, again to restore it; shift-click adds or removes "
          "it; %.0f ms a forward",
          view->milliseconds);
      ImGui::PopStyleColor();
    }
    figure.draw(bench, entry);
    if (view && view->report && figure.hovered_cell.panel == 0 && ImGui::IsMouseClicked(ImGuiMouseButton_Left))
      toggle(settings.ablation.heads, {figure.hovered_cell.row, figure.hovered_cell.col}, ImGui::GetIO().KeyShift);
  }

  // A click ablates the head alone, or restores it when it is the one ablated; with shift it joins
  // the ablated heads, or leaves them.
  static void toggle(std::vector<HeadIndex>& ablated, const HeadIndex& head, bool add) {
    const auto listed = std::find(ablated.begin(), ablated.end(), head);
    if (!add)
      ablated =
          ablated.size() == 1 && listed != ablated.end() ? std::vector<HeadIndex>{} : std::vector<HeadIndex>{head};
    else if (listed != ablated.end())
      ablated.erase(listed);
    else
      ablated.push_back(head);
  }

  void report(const Workbench&, nlohmann::json&, nlohmann::json& shown_numbers) const override {
    figure.report(shown_numbers);
  }
};

ATTNSCOPE_ANALYSIS_PANEL("dla", DlaPanel)

}  // namespace attnscope
