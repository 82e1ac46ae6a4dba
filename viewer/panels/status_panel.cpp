// The status line: the last run's latency and device, whether a run is in progress, and any error
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
    if (bench.worker_busy) {
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "running...");
      ImGui::SameLine();
    }
    if (const InferenceOutcome* outcome = bench.outcome.get()) {
      double forward = 0.0;
      for (const auto& panel : outcome->panels) forward += panel.forward_ms;
      ImGui::Text("last run %.1f ms (%s%.1f ms forward, %zu panel%s) on %s", outcome->total_ms,
                  outcome->forward_reused ? "reused; " : "", forward, outcome->panels.size(),
                  outcome->panels.size() == 1 ? "" : "s", outcome->device.c_str());
      ImGui::SameLine();
    }
    if (!bench.input_error.empty()) {
      ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "input: %s", bench.input_error.c_str());
      ImGui::SameLine();
    }
    if (!bench.error.empty()) {
      ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "error: %s", bench.error.c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("dismiss")) bench.error.clear();
    } else if (!bench.info.empty()) {
      ImGui::TextDisabled("%s", bench.info.c_str());
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_status_panel() { return std::make_unique<StatusPanel>(); }

}  // namespace attnscope
