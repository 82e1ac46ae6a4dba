// The head statistics view (analysis "headstats"): the folder field and head order, the worker's
// progress over the folder, and the scatter of every head's mean attention distance and entropy
// against depth, drawn by the same figure code "Export what is on screen" writes. Its own panel
// because a head under the pointer shows its mean attention around the query, which the generic
// figure view cannot.
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "figures/render_image.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"
#include "views/head_stats_view.h"
#include "views/plot_hover.h"
#include "views/plot_views.h"
#include "views/screen_export.h"

namespace attnscope {

namespace {

// The mean map around the query as an image: the colour map over 0..its max, each cell a block of
// pixels about `side` wide in all.
cv::Mat offset_map_image(const OffsetMap& map, Colormap colormap, int side) {
  HeatmapPanel heatmap;
  heatmap.values.grid_h = map.rows;
  heatmap.values.grid_w = map.cols;
  heatmap.values.values.assign(map.values.begin(), map.values.end());
  const auto& values = heatmap.values.values;
  const float peak = values.empty() ? 0.0f : *std::max_element(values.begin(), values.end());
  ColorScale scale;
  scale.colormap = colormap;
  scale.vmax = peak > 0 ? float(peak) : 1.0f;
  const cv::Mat cells = heatmap_image(heatmap, scale);
  const int cell = std::max(1, side / std::max(map.rows, map.cols));
  cv::Mat image;
  cv::resize(cells, image, cv::Size(map.cols * cell, map.rows * cell), 0, 0, cv::INTER_NEAREST);
  return image;
}

}  // namespace

struct HeadStatsPanel : AnalysisPanel {
  PlotImage picture;
  Figure shown;
  FigureGeometry geometry;
  gl::Texture hovered_map;
  std::string hovered_key;

  void draw(Workbench& bench, const AnalysisEntry& entry) override {
    draw_analysis_options(bench, entry);
    const InferenceOutcome* outcome = bench.outcome.get();
    const auto* view = outcome ? analysis_view_as<HeadStatsViewData>(*outcome) : nullptr;
    if (!view) {
      draw_waiting(bench);
      return;
    }
    refresh(bench, *outcome);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(picture.texture.imgui_id(), ImVec2(float(picture.width), float(picture.height)));
    if (ImGui::IsItemHovered()) show_hovered_head(bench, *outcome, *view, pos);
  }

  void report(const Workbench&, nlohmann::json&, nlohmann::json& shown_numbers) const override {
    report_figure_numbers(shown, shown_numbers);
  }

  // The figure as export writes it, re-rendered when the result, the colours or the width change.
  void refresh(Workbench& bench, const InferenceOutcome& outcome) {
    const int width = std::max(60, int(bench.layout.analysis_size.x) - 24);
    const std::string key =
        std::to_string(outcome.view_id) + "|" + bench.state.DisplaySettings::key() + "|" + std::to_string(width);
    if (picture.key == key) return;
    picture.key = key;
    shown = analysis_view_figure(outcome, bench.state);
    geometry = layout_figure(shown, screen_figure_style(shown, width));
    const cv::Mat image = render_figure_image(shown, screen_figure_style(shown, width));
    picture.texture.upload_rgb(image);
    picture.width = image.cols;
    picture.height = image.rows;
  }

  // The head under the pointer: its statistics and its mean attention around the query.
  void show_hovered_head(Workbench& bench, const InferenceOutcome& outcome, const HeadStatsViewData& view, ImVec2 pos) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const double scale = geometry.pixels_per_point;
    const double x = (mouse.x - pos.x) / scale, y = (mouse.y - pos.y) / scale;
    for (size_t index = 0; index < shown.panels.size(); ++index) {
      const auto* plot = std::get_if<PlotPanel>(&shown.panels[index].content);
      if (!plot) continue;
      const auto hit = plot_point_at(*plot, geometry.panels[index].content, x, y, 5.0);
      if (!hit || hit->series >= view.models.size()) continue;
      const HeadStatsModel& model = view.models[hit->series];
      const std::vector<HeadPoint> points = head_points(model, view.order);
      if (hit->index >= points.size()) continue;
      const HeadPoint& point = points[hit->index];
      const LayerHeadStatistics& layer = model.layers[point.layer];
      ImGui::BeginTooltip();
      ImGui::Text("%s", model.label.c_str());
      ImGui::Text("layer %d (%s), head %d", layer.layer, layer.name.c_str(), point.head);
      ImGui::Text("mean distance %.2f px, entropy %.3f nats", point.statistic.mean_distance, point.statistic.entropy);
      if (size_t(point.head) < layer.offset_maps.size()) {
        const std::string key = std::to_string(outcome.view_id) + "|" + std::to_string(hit->series) + "|" +
                                std::to_string(point.layer) + "|" + std::to_string(point.head) + "|" +
                                to_string(bench.state.colormap);
        if (key != hovered_key) {
          hovered_key = key;
          hovered_map.upload_rgb(offset_map_image(layer.offset_maps[size_t(point.head)], bench.state.colormap, 180));
        }
        ImGui::TextDisabled("mean attention around the query (centre), over patch queries and images");
        gl::opaque_image(hovered_map.imgui_id(), ImVec2(float(hovered_map.width()), float(hovered_map.height())));
      } else {
        ImGui::TextDisabled("no map: this layer's keys lie on another grid than its queries");
      }
      ImGui::EndTooltip();
      return;
    }
  }
};

ATTNSCOPE_ANALYSIS_PANEL("headstats", HeadStatsPanel)

}  // namespace attnscope
