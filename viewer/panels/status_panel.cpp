// The status line: the last run's latency and device, whether a run is in progress, what loading
// assumed about the model (ArchAssumption: hover for why and how to give it), and any error
// in red (bad file, unsupported model, out of memory): the workbench keeps running after one.
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct StatusPanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 6));
    const bool visible = begin_fixed_window("##status", bench.layout.status_pos, bench.layout.status_size,
                                            ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar);
    ImGui::PopStyleVar();
    if (!visible) {
      ImGui::End();
      return;
    }
    if (bench.worker.busy) {
      const auto [done, total] = bench.worker.progress;
      if (total > 0)  // a long analysis view (statistics over a folder, spectra) reports how far it is
        ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "running... %s",
                           analysis_progress_text(bench.state.analysis, done, total).c_str());
      else
        ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "running...");
      ImGui::SameLine();
      if (ImGui::SmallButton("cancel")) bench.cancel_run();
      ImGui::SameLine();
    }
    if (bench.jobs->busy()) {
      // The folder job beside the panels: its own progress and its own cancel.
      const auto [done, total] = bench.worker.job_progress;
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "folder job %d/%d", done, total);
      ImGui::SameLine();
      if (ImGui::SmallButton("cancel job")) bench.jobs->cancel();
      ImGui::SameLine();
    }
    if (const InferenceOutcome* outcome = bench.outcome.get()) {
      double forward = 0.0;
      for (const auto& panel : outcome->panels) forward += panel.forward_ms;
      ImGui::Text("last run %.1f ms (%s%.1f ms forward, %zu panel%s) on %s", outcome->total_ms,
                  outcome->forward_reused ? "reused; " : "", forward, outcome->panels.size(),
                  outcome->panels.size() == 1 ? "" : "s", outcome->device.c_str());
      ImGui::SameLine();
      // Where the shown layer sits: family, module, stage, and how its queries reach keys.
      const LayerPlacement& at = outcome->placement;
      std::string where = outcome->model_family + " | layer " + std::to_string(outcome->layer) + " = " + at.name +
                          ", stage " + std::to_string(at.stage) + ", " + at.access;
      if (at.window_h > 0) where += " " + std::to_string(at.window_h) + "x" + std::to_string(at.window_w);
      if (at.shift_h > 0 || at.shift_w > 0)
        where += " shift " + std::to_string(at.shift_h) + "," + std::to_string(at.shift_w);
      if (outcome->key_layout.grid_h != outcome->layout.grid_h || outcome->key_layout.grid_w != outcome->layout.grid_w)
        where +=
            ", keys " + std::to_string(outcome->key_layout.grid_h) + "x" + std::to_string(outcome->key_layout.grid_w);
      ImGui::TextDisabled("%s", where.c_str());
      ImGui::SameLine();
      // What the model's files did not say and the family took: in amber, each in full on hover.
      if (!outcome->assumed.empty()) {
        std::string keys;
        for (const std::string& assumed : outcome->assumed)
          keys += (keys.empty() ? "" : ", ") + assumed.substr(0, assumed.find(" ("));
        ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "assumed: %s", keys.c_str());
        if (ImGui::IsItemHovered()) {
          ImGui::BeginTooltip();
          for (const std::string& assumed : outcome->assumed) ImGui::BulletText("%s", assumed.c_str());
          ImGui::EndTooltip();
        }
        ImGui::SameLine();
      }
    }
    const ImVec4 red(1.0f, 0.35f, 0.35f, 1.0f);
    if (!bench.messages.input_error.empty()) {
      message(red, "input: " + bench.messages.input_error);
      ImGui::SameLine();
    }
    if (!bench.messages.error.empty()) {
      // The button first: a long message runs past the window's edge, the button stays in sight.
      if (ImGui::SmallButton("dismiss")) bench.messages.error.clear();
      ImGui::SameLine();
      message(red, "error: " + bench.messages.error);
    } else if (!bench.messages.info.empty()) {
      message(ImGui::GetStyle().Colors[ImGuiCol_TextDisabled], bench.messages.info);
    }
    ImGui::End();
  }

  // One line of the status bar; the whole text, wrapped, on hover (a long one is cut at the edge).
  static void message(const ImVec4& colour, const std::string& text) {
    ImGui::TextColored(colour, "%s", text.c_str());
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 50.0f);
      ImGui::TextUnformatted(text.c_str());
      ImGui::PopTextWrapPos();
      ImGui::EndTooltip();
    }
  }
};

std::unique_ptr<WorkbenchPanel> make_status_panel() { return std::make_unique<StatusPanel>(); }

}  // namespace attnscope
