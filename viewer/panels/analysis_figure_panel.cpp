// The view of every analysis without a panel of its own: its options as controls (from the option
// table), and its figure (views/analysis_registry.h) drawn by the figures' cairo code, the same
// drawing "Export what is on screen" writes. A heatmap's cells answer the hover with their value
// and a click with the query patch.
#include <algorithm>
#include <cmath>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"

namespace attnscope {

namespace {

// The option's control: radio buttons over its choices, a slider over its range, else a text field.
void option_control(Workbench& bench, const OptionSpec& option) {
  AppState& state = bench.state;
  const std::string value = option.get(state);
  auto apply = [&](const std::string& text) {
    try {
      option.set(state, text);
    } catch (const std::exception& e) {
      bench.report_error(e.what());
    }
  };
  ImGui::PushID(option.name.c_str());
  if (option.slider_max > option.slider_min) {
    float current = float(std::atof(value.c_str()));
    ImGui::SetNextItemWidth(220);
    if (ImGui::SliderFloat(option.name.c_str(), &current, float(option.slider_min), float(option.slider_max), "%.2f",
                           ImGuiSliderFlags_AlwaysClamp))
      apply(std::to_string(current));
  } else if (option.value_name.find('|') != std::string::npos) {
    ImGui::TextUnformatted((option.name + ":").c_str());
    size_t start = 0;
    while (start <= option.value_name.size()) {
      const size_t end = std::min(option.value_name.find('|', start), option.value_name.size());
      const std::string choice = option.value_name.substr(start, end - start);
      ImGui::SameLine();
      if (ImGui::RadioButton(choice.c_str(), value == choice)) apply(choice);
      start = end + 1;
    }
  } else {
    char text[512];
    std::snprintf(text, sizeof text, "%s", value.c_str());
    ImGui::SetNextItemWidth(220);
    if (ImGui::InputText(option.name.c_str(), text, sizeof text, ImGuiInputTextFlags_EnterReturnsTrue)) apply(text);
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", option.help.c_str());
  ImGui::PopID();
}

}  // namespace

void draw_worker_progress(Workbench& bench) {
  const auto [done, total] = bench.worker_progress;
  if (!bench.worker_busy || total <= 0) return;
  ImGui::ProgressBar(float(done) / float(total), ImVec2(-1, 0),
                     analysis_progress_text(bench.state.analysis, done, total).c_str());
}

void draw_analysis_options(Workbench& bench, const AnalysisEntry& entry) {
  for (const std::string& name : entry.reads)
    if (const OptionSpec* option = find_option(name)) option_control(bench, *option);
  for (const OptionSpec& option : entry.options) option_control(bench, option);
}

bool begin_analysis_window(Workbench& bench, const AnalysisEntry& entry) {
  if (!begin_fixed_window(entry.label.c_str(), bench.layout.analysis_pos, bench.layout.analysis_size)) {
    ImGui::End();
    return false;
  }
  draw_analysis_switch(bench);
  draw_analysis_options(bench, entry);
  draw_worker_progress(bench);
  return true;
}

struct AnalysisFigurePanel : WorkbenchPanel {
  void draw(Workbench& bench) override {
    const AnalysisEntry* entry = find_analysis(bench.state.analysis);
    if (!entry || has_own_analysis_panel(entry->name)) return;
    if (!begin_analysis_window(bench, *entry)) return;

    const InferenceOutcome* outcome = bench.outcome.get();
    const PlotImage& picture = bench.analysis_figure;
    if (!outcome || !outcome->analysis_view || !picture.texture.valid()) {
      ImGui::TextDisabled(bench.worker_busy ? "computing..." : "no result yet");
      ImGui::End();
      return;
    }
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(picture.texture.imgui_id(), ImVec2(float(picture.width), float(picture.height)));
    const bool hovered = ImGui::IsItemHovered();
    const FigureGeometry& geometry = bench.analysis_geometry;
    const double scale = geometry.pixels_per_point;
    int heatmaps = 0;
    for (size_t index = 0; index < bench.analysis_figure_shown.panels.size(); ++index) {
      const auto* heatmap = std::get_if<HeatmapPanel>(&bench.analysis_figure_shown.panels[index].content);
      if (!heatmap) continue;
      const Rect& box = geometry.panels[index].content;
      const float x = pos.x + float(box.x * scale), y = pos.y + float(box.y * scale);
      const float width = float(box.width * scale), height = float(box.height * scale);
      // Figure views report their heatmaps as views -2, -3, ... in figure order.
      bench.drawn_views.push_back(
          {-2 - heatmaps++, -1, x, y, width, height, heatmap->values.rows, heatmap->values.cols});
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      if (!hovered || mouse.x < x || mouse.y < y || mouse.x >= x + width || mouse.y >= y + height) continue;
      const int row = std::clamp(int((mouse.y - y) / height * heatmap->values.rows), 0, heatmap->values.rows - 1);
      const int col = std::clamp(int((mouse.x - x) / width * heatmap->values.cols), 0, heatmap->values.cols - 1);
      ImGui::SetTooltip("(%d, %d): %.5f", row, col, double(heatmap->values.at<float>(row, col)));
      // A heatmap on the selected layer's patch grid picks the query where it is clicked.
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && heatmap->values.rows == outcome->layout.grid_h &&
          heatmap->values.cols == outcome->layout.grid_w)
        bench.pick_query(row, col, outcome->layout);
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_analysis_figure_panel() { return std::make_unique<AnalysisFigurePanel>(); }

}  // namespace attnscope
