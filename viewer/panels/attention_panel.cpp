// The attention views: for each side-by-side panel (one variant each) the image with its attention
// overlay (the selected head, the mean over heads, or a grid of every head), coloured in the shader
// on one shared scale, with the query patch outlined; hovering shows a patch's value, clicking makes
// it the query; a right drag (or shift + left drag) draws the focus metrics' box of patches, outlined
// on every view. A colour bar under the views shows the scale.
#include <algorithm>
#include <cmath>
#include <optional>

#include "analysis/focus_metrics.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

// The grid (columns, rows) that gives `count` tiles of aspect `aspect` (w/h) the largest size in `area`.
std::pair<int, int> best_tiling(int count, ImVec2 area, float aspect) {
  std::pair<int, int> best{1, count};
  float best_size = -1;
  for (int columns = 1; columns <= count; ++columns) {
    const int rows = (count + columns - 1) / columns;
    const float width = std::min(area.x / columns, area.y / rows * aspect);
    if (width > best_size) {
      best_size = width;
      best = {columns, rows};
    }
  }
  return best;
}

// The session's box when it is one on this grid (the metrics view says what is wrong otherwise).
std::optional<PatchBox> box_on_grid(const std::string& text, const TokenLayout& tokens) {
  if (text.empty()) return std::nullopt;
  try {
    const PatchBox box = parse_patch_box(text);
    if (box.row_end > tokens.grid_h || box.col_end > tokens.grid_w) return std::nullopt;
    return box;
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

// A box being dragged out: the patch where the drag started; the box follows the mouse on the view
// it started on and is written to the state on every frame of the drag.
struct BoxDrag {
  bool active = false;
  ImVec2 view_pos;
  float cell = 1;
  int row = 0, col = 0;
};

struct AttentionPanel : WorkbenchPanel {
  std::vector<gl::RenderTarget> targets;  // one per drawn map, reused across frames
  BoxDrag drag;

  void draw(Workbench& bench) override {
    const ScreenLayout& layout = bench.layout;
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 8));
    const bool visible = begin_fixed_window("Attention", layout.views_pos, layout.views_size,
                                            ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    ImGui::PopStyleVar();
    if (!visible) {
      ImGui::End();
      return;
    }
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome) {
      if (bench.state.model.empty())
        ImGui::TextWrapped(
            "No model is open. Open a checkpoint (.safetensors or .pth) with Open... in the sidebar, drop one on "
            "the window, or train a demo model:  attnscope train --variant softmax --steps 300 --out m.safetensors");
      else
        ImGui::TextWrapped(
            "%s", bench.worker_busy ? "Loading the model and running the first forward pass..." : "No result yet.");
      ImGui::End();
      return;
    }
    // The maps lie on the key grid (a row) or the query grid (a column): PVT's keys are a coarser grid.
    const TokenLayout& tokens = bench.state.direction == "in" ? outcome->layout : outcome->key_layout;
    const int query_cell = follow_query(outcome->query_token, outcome->layout, tokens);
    const size_t panel_count = bench.maps.size();
    const float colorbar_height = 46.0f;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 area(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y - colorbar_height);
    const float label_height = ImGui::GetTextLineHeightWithSpacing();
    const float aspect = float(tokens.grid_w) / float(tokens.grid_h);
    const auto [columns, rows] = best_tiling(int(panel_count), area, aspect);
    const ImVec2 tile(area.x / columns, area.y / rows);
    size_t target_index = 0;
    const std::optional<PatchBox> box = box_on_grid(bench.state.box, tokens);

    for (size_t p = 0; p < panel_count; ++p) {
      const ImVec2 tile_pos(origin.x + float(int(p) % columns) * tile.x, origin.y + float(int(p) / columns) * tile.y);
      const PanelMaps& panel = outcome->panels[p];
      ImGui::SetCursorScreenPos(tile_pos);
      // Clipped to the tile: a long description (an attribution's readout) must not run into the next one.
      ImGui::PushClipRect(tile_pos, ImVec2(tile_pos.x + tile.x - 8, tile_pos.y + label_height), true);
      ImGui::Text("%d: %s", int(p) + 1, panel.description.c_str());
      ImGui::PopClipRect();
      const auto& maps = bench.maps[p];
      const ImVec2 maps_area(tile.x - 8, tile.y - label_height - 8);
      const bool attribution = !maps.empty() && maps.front().head == kAttributionHead;
      const int head_label = bench.state.view == "heads" && !attribution ? int(label_height) : 0;
      const auto [map_columns, map_rows] =
          best_tiling(int(maps.size()), ImVec2(maps_area.x, maps_area.y - head_label * 1.0f), aspect);
      for (size_t m = 0; m < maps.size(); ++m) {
        const PatchMap& map = maps[m];
        const float cell_area_w = maps_area.x / map_columns, cell_area_h = maps_area.y / map_rows - head_label;
        // Whole pixels per patch, so every patch is the same block on screen.
        const float cell =
            std::max(1.0f, std::floor(std::min(cell_area_w / tokens.grid_w, cell_area_h / tokens.grid_h)));
        const ImVec2 size(cell * tokens.grid_w, cell * tokens.grid_h);
        ImVec2 pos(tile_pos.x + float(int(m) % map_columns) * cell_area_w,
                   tile_pos.y + label_height + float(int(m) / map_columns) * (cell_area_h + head_label));
        pos = ImVec2(std::floor(pos.x), std::floor(pos.y));
        if (head_label) {
          ImGui::SetCursorScreenPos(pos);
          ImGui::Text("head %d", map.head);
          pos.y += float(head_label);
        }
        if (targets.size() <= target_index) targets.emplace_back();
        gl::RenderTarget& target = targets[target_index++];
        target.resize(int(size.x), int(size.y));
        bench.renderer->render(target, &bench.image_texture, map.texture, bench.scale, float(bench.state.opacity));
        ImGui::SetCursorScreenPos(pos);
        gl::opaque_image(target.imgui_id(), size);
        bench.drawn_views.push_back({map.panel, map.head, pos.x, pos.y, size.x, size.y});
        ImDrawList* draw = ImGui::GetWindowDrawList();
        if (tokens.is_patch(query_cell) && outcome->layout.is_patch(outcome->query_token)) {
          const ImVec2 a(pos.x + cell * tokens.col_of(query_cell), pos.y + cell * tokens.row_of(query_cell));
          draw->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 60, 60, 255), 0, 0, 2.0f);
        }
        if (box)
          draw->AddRect(ImVec2(pos.x + cell * box->col_begin, pos.y + cell * box->row_begin),
                        ImVec2(pos.x + cell * box->col_end, pos.y + cell * box->row_end), IM_COL32(60, 200, 255, 255),
                        0, 0, 2.0f);
        if (ImGui::IsItemHovered()) {
          const ImVec2 mouse = ImGui::GetIO().MousePos;
          const int col = std::clamp(int((mouse.x - pos.x) / cell), 0, tokens.grid_w - 1);
          const int row = std::clamp(int((mouse.y - pos.y) / cell), 0, tokens.grid_h - 1);
          const ImVec2 a(pos.x + cell * col, pos.y + cell * row);
          draw->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 255, 255, 200), 0, 0, 1.0f);
          const std::string shown = map.head == kAttributionHead ? bench.state.method
                                    : map.head < 0               ? "mean over heads"
                                                                 : "head " + std::to_string(map.head);
          if (!drag.active)
            ImGui::SetTooltip("patch (%d, %d)  %s: %.5f\nclick: make it the query; right drag: draw a box", row, col,
                              shown.c_str(), double(map.map->at(row, col)));
          const bool shift = ImGui::GetIO().KeyShift;
          if (ImGui::IsItemClicked(ImGuiMouseButton_Right) || (shift && ImGui::IsItemClicked(ImGuiMouseButton_Left)))
            drag = {true, pos, cell, row, col};
          else if (ImGui::IsItemClicked(ImGuiMouseButton_Left))
            bench.pick_query(row, col, tokens);
        }
      }
    }
    if (drag.active) update_box_drag(bench, tokens);
    draw_colorbar(bench, ImVec2(origin.x, origin.y + area.y + 6), std::min(area.x * 0.55f, 520.0f));
    ImGui::End();
  }

  // The box spans the patches from the drag's start to the one under the mouse, both included.
  void update_box_drag(Workbench& bench, const TokenLayout& tokens) {
    const ImGuiIO& io = ImGui::GetIO();
    const int col = std::clamp(int(std::floor((io.MousePos.x - drag.view_pos.x) / drag.cell)), 0, tokens.grid_w - 1);
    const int row = std::clamp(int(std::floor((io.MousePos.y - drag.view_pos.y) / drag.cell)), 0, tokens.grid_h - 1);
    bench.state.box = std::to_string(std::min(row, drag.row)) + "," + std::to_string(std::min(col, drag.col)) + "," +
                      std::to_string(std::max(row, drag.row) + 1) + "," + std::to_string(std::max(col, drag.col) + 1);
    if (!io.MouseDown[ImGuiMouseButton_Right] && !io.MouseDown[ImGuiMouseButton_Left]) drag.active = false;
  }

  static void draw_colorbar(Workbench& bench, ImVec2 pos, float width) {
    const gl::Texture& table = bench.renderer->colormap_table(bench.scale.colormap);
    ImGui::SetCursorScreenPos(pos);
    ImGui::Image(table.imgui_id(), ImVec2(width, 16));
    ImGui::SetCursorScreenPos(ImVec2(pos.x, pos.y + 20));
    ImGui::Text("%.4g", double(bench.scale.vmin));
    const std::string right = [&] {
      char text[32];
      std::snprintf(text, sizeof(text), "%.4g", double(bench.scale.vmax));
      return std::string(text);
    }();
    ImGui::SameLine(width - ImGui::CalcTextSize(right.c_str()).x);
    ImGui::TextUnformatted(right.c_str());
    ImGui::SetCursorScreenPos(ImVec2(pos.x + width + 16, pos.y));
    ImGui::Text("%s: one scale for every view", to_string(bench.scale.colormap).c_str());
    ImGui::SetCursorScreenPos(ImVec2(pos.x + width + 16, pos.y + 20));
    const InferenceOutcome& outcome = *bench.outcome;
    ImGui::TextDisabled("layer %d (%s), query %s, %s", outcome.layer, outcome.placement.name.c_str(),
                        outcome.layout.token_name(outcome.query_token).c_str(),
                        bench.state.direction == "in" ? "in: the attention patches give it" : "out: where it looks");
  }
};

std::unique_ptr<WorkbenchPanel> make_attention_panel() { return std::make_unique<AttentionPanel>(); }

}  // namespace attnscope
