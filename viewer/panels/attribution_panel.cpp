// The attribution view: choose a method (the CAM family, attention relevance, gradient rollout,
// rollout, attention, integrated gradients), the class or output feature it explains and its layer;
// every side-by-side panel then shows that method's map for its own attention variant (drawn by
// the attention views), and this column lists each panel's faithfulness readout: the deletion AUC
// of its map against a random order of the same cells. Maps and curves come from the worker.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "analysis/attribution.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/attribution_view.h"

namespace attnscope {

namespace {

struct AttributionPanel : AnalysisPanel {
  std::string layer_field;

  void draw(Workbench& bench, const AnalysisEntry&) override {
    draw_choices(bench.state);
    draw_readout(bench);
  }

  void draw_choices(AppState& state) {
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("method", to_string(state.method).c_str())) {
      for (const auto& entry : enum_entries<AttributionMethod>()) {
        if (ImGui::Selectable(entry.name, entry.value == state.method)) state.method = entry.value;
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", entry.label);
      }
      ImGui::EndCombo();
    }
    ImGui::SetNextItemWidth(120);
    int target_class = state.target.kind == TargetKind::Class ? state.target.class_index : -1;
    if (ImGui::InputInt("class (-1: top-1)", &target_class)) state.target = TargetSpec::of_class(target_class);
    if (state.target.kind != TargetKind::Class) ImGui::TextDisabled("--target %s", to_string(state.target).c_str());
    const bool cam = reads_hook_point(state.method);
    if (cam) {
      ImGui::SetNextItemWidth(200);
      if (ImGui::InputText("layer", &layer_field, ImGuiInputTextFlags_EnterReturnsTrue))
        state.gradcam_layer = layer_field;
      if (!ImGui::IsItemActive()) layer_field = state.gradcam_layer;  // shows the state unless being edited
    }
    ImGui::SetNextItemWidth(160);
    int steps = state.steps;
    if (ImGui::SliderInt("deletion steps", &steps, 1, 100)) state.steps = steps;
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("removed cells", to_string(state.replacement).c_str())) {
      for (const auto& entry : enum_entries<Replacement>())
        if (ImGui::Selectable(entry.name, entry.value == state.replacement)) state.replacement = entry.value;
      ImGui::EndCombo();
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    if (cam)
      ImGui::TextWrapped("layer: blocks.N.norm1, blocks.N.norm2, blocks.N, norm, or the family's module name");
    else if (reads_attention_layer(state.method))
      ImGui::TextWrapped("layer: the Selection slider (relevance and rollouts run through its stage's layers)");
    else
      ImGui::TextWrapped("integrated gradients: on the input, %d steps from the %s image", state.ig_steps,
                         to_string(state.ig_baseline).c_str());
    ImGui::TextWrapped("class -1 on models without classes: the output's norm; C: output feature C");
    ImGui::PopStyleColor();
    ImGui::Separator();
  }

  static void draw_readout(Workbench& bench) {
    const InferenceOutcome* outcome = bench.outcome.get();
    const auto* views = outcome ? analysis_view_as<AttributionViews>(*outcome) : nullptr;
    if (!views || views->panels.empty()) {
      ImGui::TextDisabled(bench.worker.busy ? "computing the maps and their deletion curves..." : "no maps yet");
      return;
    }
    ImGui::TextWrapped(
        "every panel shows %s for its own variant; faithfulness: probability of the class as the "
        "map's cells are replaced (%s), largest first. Lower deletion AUC than random: the map found "
        "what the model uses.",
        to_string(bench.state.method).c_str(), to_string(bench.state.replacement).c_str());
    const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("##attribution", 4, flags)) {
      ImGui::TableSetupColumn("panel");
      ImGui::TableSetupColumn("class");
      ImGui::TableSetupColumn("deletion AUC");
      ImGui::TableSetupColumn("random");
      ImGui::TableHeadersRow();
      for (size_t p = 0; p < views->panels.size(); ++p) {
        const AttributionView& view = views->panels[p];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", int(p) + 1);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(view.class_name.empty() ? "-" : view.class_name.c_str());
        ImGui::TableNextColumn();
        if (view.deletion_auc >= 0)
          ImGui::Text("%.3f", view.deletion_auc);
        else
          ImGui::TextDisabled("-");
        ImGui::TableNextColumn();
        if (view.random_deletion_auc >= 0)
          ImGui::Text("%.3f", view.random_deletion_auc);
        else
          ImGui::TextDisabled("-");
      }
      ImGui::EndTable();
    }
    for (size_t p = 0; p < views->panels.size(); ++p) {
      const AttributionView& view = views->panels[p];
      if (!view.error.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.7f, 0.3f, 1.0f));
        ImGui::TextWrapped("panel %d: %s", int(p) + 1, view.error.c_str());
        ImGui::PopStyleColor();
        continue;
      }
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("panel %d: %s; %s; p(class) %.3f; %.0f ms", int(p) + 1, view.where.c_str(),
                         view.normalisation.c_str(), view.probability, view.milliseconds);
      if (!view.note.empty()) ImGui::TextWrapped("%s", view.note.c_str());
      ImGui::PopStyleColor();
      if (!view.warning.empty()) ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", view.warning.c_str());
    }
  }
};

}  // namespace

ATTNSCOPE_ANALYSIS_PANEL("attribution", AttributionPanel)

}  // namespace attnscope
