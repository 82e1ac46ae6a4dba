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

#include "viewer/panels/figure_view.h"
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
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", option.help.c_str());
    if (option.value_name == "DIR") {  // a folder: chosen in the browser as files are
      ImGui::SameLine();
      if (ImGui::Button("Browse...")) bench.folder_request = Workbench::FolderRequest{option, value};
    }
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", option.help.c_str());
  ImGui::PopID();
}

}  // namespace

void draw_worker_progress(Workbench& bench) {
  // A folder job reports from its own worker, and says what its view on screen was computed with.
  const bool folder_job = bench.outcome && bench.outcome->request.analysis_elsewhere;
  const auto [done, total] = folder_job ? bench.worker.job_progress : bench.worker.progress;
  const bool running = folder_job ? bench.jobs->busy() : bench.worker.busy;
  if (folder_job && bench.jobs->choice()) {
    // The running job is another model's: its progress is in the question's window.
    ImGui::TextWrapped("waiting: %s still runs (keep it or cancel it?)", bench.jobs->choice()->c_str());
  } else if (running && total > 0) {
    ImGui::ProgressBar(float(done) / float(total), ImVec2(-1, 0),
                       analysis_progress_text(bench.state.analysis, done, total).c_str());
  }
  if (!bench.job_computed_with.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "computed with: %s%s", bench.job_computed_with.c_str(),
        bench.outcome->analysis_running && bench.jobs->busy() ? " (the current settings' run is on its way)" : "");
    ImGui::PopStyleColor();
  }
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
      shown_numbers.push_back(
          {{"kind", "figure"}, {"index", index++}, {"data_name", panel.data_name}, {"values", heatmap->values.values}});
    } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
      nlohmann::json series = nlohmann::json::array();
      for (const Series& one : plot->series) series.push_back({{"label", one.label}, {"x", one.x}, {"y", one.y}});
      shown_numbers.push_back({{"kind", "figure-plot"}, {"data_name", panel.data_name}, {"series", series}});
    }
}

void draw_waiting(const Workbench& bench, const char* idle) {
  ImGui::TextDisabled("%s", bench.worker.busy || bench.jobs->busy() ? "computing..." : idle);
}

namespace {

std::map<std::string, AnalysisPanelFactory>& analysis_panel_factories() {
  static std::map<std::string, AnalysisPanelFactory> factories;
  return factories;
}

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
    if (!bench.job_computed_with.empty())
      about["job"] = {{"computed_with", bench.job_computed_with},
                      {"running", bench.outcome->analysis_running && bench.jobs->busy()}};
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
