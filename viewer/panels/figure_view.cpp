// An analysis's view as its figure (viewer/panels/figure_view.h).
#include "viewer/panels/figure_view.h"

#include <imgui.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"
#include "views/plot_views.h"
#include "views/screen_export.h"

namespace attnscope {

void FigureView::draw(Workbench& bench, const AnalysisEntry& entry) {
  draw_analysis_options(bench, entry);
  const InferenceOutcome* outcome = bench.outcome.get();
  if (!outcome || !outcome->analysis_view) {
    draw_waiting(bench);
    return;
  }
  const int width = std::max(60, int(bench.layout.analysis_size.x) - 24);
  const std::string key = std::to_string(outcome->view_id) + "|" + entry.name + "|" +
                          bench.state.DisplaySettings::key() + "|" + bench.state.ViewSelection::key();
  try {
    refresh_plot(picture, key, width, [&] {
      Figure figure = analysis_view_figure(*outcome, bench.state);
      FigureGeometry laid_out = layout_figure(figure, screen_figure_style(figure, width));
      shown = std::move(figure);  // the figure and its geometry change together or not at all
      geometry = std::move(laid_out);
      return shown;
    });
  } catch (const std::exception& e) {
    shown = {};
    geometry = {};
    bench.report_error(std::string("plot: ") + e.what());
    return;
  }
  hovered_cell = {};
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
        {-2 - heatmaps++, -1, x, y, width_px, height_px, heatmap->values.grid_h, heatmap->values.grid_w});
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    if (!hovered || mouse.x < x || mouse.y < y || mouse.x >= x + width_px || mouse.y >= y + height_px) continue;
    const int row = std::clamp(int((mouse.y - y) / height_px * heatmap->values.grid_h), 0, heatmap->values.grid_h - 1);
    const int col = std::clamp(int((mouse.x - x) / width_px * heatmap->values.grid_w), 0, heatmap->values.grid_w - 1);
    hovered_cell = {int(index), row, col};
    ImGui::SetTooltip("(%d, %d): %.5f", row, col, double(heatmap->values.at(row, col)));
    // A heatmap on the selected layer's patch grid picks the query where it is clicked.
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && heatmap->values.grid_h == outcome->layout.grid_h &&
        heatmap->values.grid_w == outcome->layout.grid_w)
      bench.pick_query(row, col, outcome->layout);
  }
}

void FigureView::report(nlohmann::json& shown_numbers) const { report_figure_numbers(shown, shown_numbers); }

}  // namespace attnscope
