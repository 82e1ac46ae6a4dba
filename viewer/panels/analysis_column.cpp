// The analysis column: while an analysis is open, its window with the analysis switch and the
// worker's progress, around the analysis's own panel when its file registered one
// (ATTNSCOPE_ANALYSIS_PANEL), else around its view as a figure: its options as controls (from the
// option table) and its figure (views/analysis_registry.h) drawn by the figures' cairo code, the
// same drawing "Export what is on screen" writes. A heatmap's cells answer the hover with their
// value and a click with the query patch.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"
#include "views/option_catalog.h"
#include "views/plot_views.h"
#include "views/screen_export.h"

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
  const auto [done, total] = bench.worker.progress;
  if (!bench.worker.busy || total <= 0) return;
  ImGui::ProgressBar(float(done) / float(total), ImVec2(-1, 0),
                     analysis_progress_text(bench.state.analysis, done, total).c_str());
}

void draw_analysis_options(Workbench& bench, const AnalysisEntry& entry) {
  for (const std::string& name : entry.reads)
    if (const OptionSpec* option = find_option(name)) option_control(bench, *option);
  for (const OptionSpec& option : entry.options) option_control(bench, option);
}

void report_figure_numbers(const Figure& figure, nlohmann::json& shown_numbers) {
  int index = 0;
  for (const Panel& panel : figure.panels)
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      const cv::Mat values = heatmap->values.isContinuous() ? heatmap->values : heatmap->values.clone();
      shown_numbers.push_back(
          {{"kind", "figure"},
           {"index", index++},
           {"data_name", panel.data_name},
           {"values", std::vector<float>(values.ptr<float>(), values.ptr<float>() + values.total())}});
    } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
      nlohmann::json series = nlohmann::json::array();
      for (const Series& one : plot->series) series.push_back({{"label", one.label}, {"x", one.x}, {"y", one.y}});
      shown_numbers.push_back({{"kind", "figure-plot"}, {"data_name", panel.data_name}, {"series", series}});
    }
}

void draw_waiting(const Workbench& bench, const char* idle) {
  ImGui::TextDisabled("%s", bench.worker.busy ? "computing..." : idle);
}

namespace {

std::map<std::string, AnalysisPanelFactory>& analysis_panel_factories() {
  static std::map<std::string, AnalysisPanelFactory> factories;
  return factories;
}

// An analysis's view as its figure, as export writes it, re-rendered when the result, the
// selections or the width change.
struct FigureView {
  PlotImage picture;
  Figure shown;
  FigureGeometry geometry;

  void draw(Workbench& bench, const AnalysisEntry& entry) {
    draw_analysis_options(bench, entry);
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !outcome->analysis_view) {
      draw_waiting(bench);
      return;
    }
    const int width = std::max(60, int(bench.layout.analysis_size.x) - 24);
    const std::string key = std::to_string(outcome->request_id) + "|" + entry.name + "|" +
                            bench.state.DisplaySettings::key() + "|" + bench.state.ViewSelection::key();
    try {
      refresh_plot(picture, key, width, [&] {
        shown = analysis_view_figure(*outcome, bench.state);
        geometry = layout_figure(shown, screen_figure_style(shown, width));
        return shown;
      });
    } catch (const std::exception& e) {
      bench.report_error(std::string("plot: ") + e.what());
      return;
    }
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(picture.texture.imgui_id(), ImVec2(float(picture.width), float(picture.height)));
    const bool hovered = ImGui::IsItemHovered();
    const double scale = geometry.pixels_per_point;
    int heatmaps = 0;
    for (size_t index = 0; index < shown.panels.size(); ++index) {
      const auto* heatmap = std::get_if<HeatmapPanel>(&shown.panels[index].content);
      if (!heatmap) continue;
      const Rect& box = geometry.panels[index].content;
      const float x = pos.x + float(box.x * scale), y = pos.y + float(box.y * scale);
      const float width_px = float(box.width * scale), height_px = float(box.height * scale);
      // Figure views report their heatmaps as views -2, -3, ... in figure order.
      bench.drawn.views.push_back(
          {-2 - heatmaps++, -1, x, y, width_px, height_px, heatmap->values.rows, heatmap->values.cols});
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      if (!hovered || mouse.x < x || mouse.y < y || mouse.x >= x + width_px || mouse.y >= y + height_px) continue;
      const int row = std::clamp(int((mouse.y - y) / height_px * heatmap->values.rows), 0, heatmap->values.rows - 1);
      const int col = std::clamp(int((mouse.x - x) / width_px * heatmap->values.cols), 0, heatmap->values.cols - 1);
      ImGui::SetTooltip("(%d, %d): %.5f", row, col, double(heatmap->values.at<float>(row, col)));
      // A heatmap on the selected layer's patch grid picks the query where it is clicked.
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && heatmap->values.rows == outcome->layout.grid_h &&
          heatmap->values.cols == outcome->layout.grid_w)
        bench.pick_query(row, col, outcome->layout);
    }
  }

  void report(nlohmann::json& shown_numbers) const { report_figure_numbers(shown, shown_numbers); }
};

struct AnalysisColumn : WorkbenchPanel {
  std::map<std::string, std::unique_ptr<AnalysisPanel>> own;  // each analysis's panel, made on first use
  std::map<std::string, FigureView> figures;                  // the others' figures
  std::string drawn;                                          // the analysis drawn this frame

  void draw(Workbench& bench) override {
    drawn.clear();
    const AnalysisEntry* entry = find_analysis(bench.state.analysis);
    if (!entry || entry->label.empty()) return;
    if (!begin_fixed_window(entry->label.c_str(), bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    drawn = entry->name;
    draw_analysis_switch(bench);
    draw_worker_progress(bench);
    if (AnalysisPanel* panel = panel_of(entry->name))
      panel->draw(bench, *entry);
    else
      figures[entry->name].draw(bench, *entry);
    ImGui::End();
  }

  void report(const Workbench& bench, nlohmann::json& about, nlohmann::json& shown) const override {
    if (drawn.empty() || drawn != bench.state.analysis) return;
    const auto panel = own.find(drawn);
    if (panel != own.end() && panel->second)
      panel->second->report(bench, about, shown);
    else if (const auto figure = figures.find(drawn); figure != figures.end())
      figure->second.report(shown);
    if (bench.outcome && bench.outcome->analysis_view) bench.outcome->analysis_view->describe(about);
  }

  AnalysisPanel* panel_of(const std::string& name) {
    auto found = own.find(name);
    if (found == own.end()) found = own.emplace(name, make_analysis_panel(name)).first;
    return found->second.get();
  }
};

}  // namespace

bool register_analysis_panel(const char* analysis, AnalysisPanelFactory make) {
  analysis_panel_factories()[analysis] = make;
  return true;
}

std::unique_ptr<AnalysisPanel> make_analysis_panel(const std::string& analysis) {
  const auto found = analysis_panel_factories().find(analysis);
  return found == analysis_panel_factories().end() ? nullptr : found->second();
}

std::unique_ptr<WorkbenchPanel> make_analysis_column() { return std::make_unique<AnalysisColumn>(); }

}  // namespace attnscope
