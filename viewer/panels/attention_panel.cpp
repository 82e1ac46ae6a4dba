// The attention views: for each side-by-side panel (its own model and variant) the image as that
// model saw it with its attention overlay (the selected head, the mean over heads, or a grid of
// every head), coloured in the shader on one shared scale, with the query patch outlined. Each
// panel is headed by its model and attention, its prediction, and any note that changes how to read
// it (a near-uniform swapped kernel, a layer or head it does not have). Hovering shows a patch's
// value, clicking makes it the query; a right drag (or shift + left drag) draws the focus metrics'
// box. A colour bar with round ticks under the views names the map and the scale mode.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/focus_metrics.h"
#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

// Columns and rows of `count` tiles of aspect `aspect` (w/h) with the largest size in `area`.
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

// Panels side by side: as many columns as panels, except that four may make a 2 x 2 grid when
// that gives larger maps. Never a grid with a hole (three panels are three columns).
std::pair<int, int> panel_tiling(int count, ImVec2 area, float aspect) {
  if (count == 4) {
    const float wide = std::min(area.x / 4, area.y * aspect), square = std::min(area.x / 2, area.y / 2 * aspect);
    if (square > wide) return {2, 2};
  }
  return {std::max(count, 1), 1};
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

const ImVec4 kNoteColour(1.0f, 0.72f, 0.3f, 1.0f);

// The lines that head a panel: what it runs, what it predicts, and notes that change how to read it.
struct PanelHeading {
  std::string title, prediction, note;
};

PanelHeading heading_of(const Workbench& bench, size_t index, const PanelMaps& panel) {
  PanelHeading heading;
  const std::string model = std::filesystem::path(panel.model_path).filename().string();
  heading.title = std::to_string(index + 1) + ": " + model;
  if (!panel.error.empty()) {
    heading.note = panel.error;
    return heading;
  }
  heading.title += " \xc2\xb7 " + panel.description;  // U+00B7, in ImGui's default font
  // What changes the panel's computation besides its kernel, in its title: ablated heads and the
  // SAE's interventions.
  for (const char* name : {"ablate", "sae-off", "sae-add"}) {
    const AttentionKnob* knob = find_attention_knob(name);
    if (knob && !knob->equal(panel.settings, AttentionSettings{}))
      heading.title += std::string(" \xc2\xb7 ") + name + " " + knob->text(panel.settings);
  }
  if (!panel.top.empty()) {
    char text[200];
    std::snprintf(text, sizeof text, "top-1: %s (%.1f %%)", panel.top.front().name.substr(0, 60).c_str(),
                  100.0 * panel.top.front().probability);
    heading.prediction = text;
  } else {
    heading.prediction = to_string(panel.output_kind) + ", no classes";
  }
  const HeadView view = bench.state.view;
  if (view == HeadView::Mean) heading.prediction += "  \xc2\xb7  mean of " + std::to_string(panel.heads) + " heads";
  if (panel.swapped) {
    const int head = std::min(bench.state.head, int(panel.uniformity.size()) - 1);
    const double shown = view == HeadView::Head && head >= 0 ? panel.uniformity[size_t(head)] : panel.mean_uniformity;
    heading.note = near_uniform_note(to_string(panel.kernel), shown);
  }
  if (!panel.note.empty()) heading.note += (heading.note.empty() ? "" : "; ") + panel.note;
  return heading;
}

}  // namespace

// A box being dragged out: the patch where the drag started; the box follows the mouse on the view
// it started on and is written to the state on every frame of the drag.
struct BoxDrag {
  bool active = false;
  ImVec2 view_pos;
  float cell = 1;
  int row = 0, col = 0;
  TokenLayout grid;
};

struct AttentionPanel : WorkbenchPanel {
  std::vector<gl::OverlayView> overlays;  // one per drawn map, reused across frames
  BoxDrag drag;
  // The canvas: every map shows the same part of its image, `zoom` times magnified (whole steps,
  // so a patch stays a block of whole pixels), from `corner` (the part's top-left, in fractions of
  // the map). The wheel zooms about the cursor, a left drag pans, a double click shows it whole.
  int zoom = 1;
  ImVec2 corner{0, 0};
  static constexpr int kMaxZoom = 16;

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
            "%s", bench.worker.busy ? "Loading the model and running the first forward pass..." : "No result yet.");
      ImGui::End();
      return;
    }
    const bool incoming = bench.state.direction == MapDirection::In;
    const size_t panel_count = std::min(bench.shown.maps.size(), outcome->panels.size());
    // The bar, its tick labels, and two lines under them (three with CARE's channel line).
    const float colorbar_height = outcome->placement.channels.empty() ? 78.0f : 98.0f;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 area(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y - colorbar_height);
    const float line = ImGui::GetTextLineHeightWithSpacing();
    // The tiling follows panel 1's grid aspect; every panel keeps its own grid within its tile.
    const TokenLayout& first_grid = incoming ? outcome->layout : outcome->key_layout;
    const auto [columns, rows] = panel_tiling(int(panel_count), area, float(first_grid.grid_w) / first_grid.grid_h);
    const ImVec2 tile(area.x / columns, area.y / rows);
    const float text_width = tile.x - 12;

    // Headings first: each wraps within its tile, and every tile of a row starts its maps at the
    // same height, below the tallest heading.
    std::vector<PanelHeading> headings;
    float heading_height = 0;
    for (size_t p = 0; p < panel_count; ++p) {
      headings.push_back(heading_of(bench, p, outcome->panels[p]));
      bench.drawn.headings.push_back({headings.back().title, headings.back().prediction, headings.back().note});
      float height = 0;
      for (const std::string* text : {&headings.back().title, &headings.back().prediction, &headings.back().note})
        if (!text->empty())
          height += ImGui::CalcTextSize(text->c_str(), nullptr, false, text_width).y + ImGui::GetStyle().ItemSpacing.y;
      heading_height = std::max(heading_height, height + 2);
    }

    size_t overlay_index = 0;
    // The colour bar goes right under the lowest map, and never over a heading (a panel that
    // only says why it has no map).
    float maps_bottom = origin.y + heading_height;
    for (size_t p = 0; p < panel_count; ++p) {
      const ImVec2 tile_pos(origin.x + float(int(p) % columns) * tile.x, origin.y + float(int(p) / columns) * tile.y);
      const PanelMaps& panel = outcome->panels[p];
      ImGui::SetCursorScreenPos(tile_pos);
      ImGui::BeginGroup();  // keeps every heading line at the tile's left edge
      ImGui::PushTextWrapPos(tile_pos.x + text_width - ImGui::GetWindowPos().x);  // ImGui wraps in window space
      ImGui::TextWrapped("%s", headings[p].title.c_str());
      // Which files made this panel: the name as given, what it resolved to, the commit and blobs.
      if (ImGui::IsItemHovered() && !panel.provenance.empty()) ImGui::SetTooltip("%s", panel.provenance.c_str());
      if (!headings[p].prediction.empty()) ImGui::TextWrapped("%s", headings[p].prediction.c_str());
      if (!headings[p].note.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, kNoteColour);
        ImGui::TextWrapped("%s", headings[p].note.c_str());
        ImGui::PopStyleColor();
      }
      ImGui::PopTextWrapPos();
      ImGui::EndGroup();
      if (!panel.error.empty()) continue;

      const auto& maps = bench.shown.maps[p];
      const bool analysis_map = !maps.empty() && maps.front().head == kAnalysisMapHead;
      // The maps lie on the key grid (a row) or the query grid (a column): PVT's keys are coarser.
      // An analysis view's map (attribution) lies on the key grid, where the worker resamples it.
      const TokenLayout& tokens = incoming && !analysis_map ? panel.layout : panel.key_layout;
      const int query_cell = follow_query(panel.query_token, panel.layout, tokens);
      const std::optional<PatchBox> box = box_on_grid(bench.state.box, tokens);
      const float top = tile_pos.y + heading_height;
      const ImVec2 maps_area(tile.x - 8, tile.y - heading_height - 8);
      const int head_label = bench.state.view == HeadView::Heads && !analysis_map ? int(line) : 0;
      const float aspect = float(tokens.grid_w) / float(tokens.grid_h);
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
                   top + float(int(m) / map_columns) * (cell_area_h + head_label));
        pos = ImVec2(std::floor(pos.x), std::floor(pos.y));
        if (head_label) {
          ImGui::SetCursorScreenPos(pos);
          ImGui::Text("head %d", map.head);
          pos.y += float(head_label);
        }
        if (overlays.size() <= overlay_index) overlays.emplace_back();
        ImGui::SetCursorScreenPos(pos);
        const float shown = 1.0f / float(zoom);
        bench.renderer->draw(overlays[overlay_index++], &bench.shown.images[p], map.values, bench.shown.scale,
                             float(bench.state.opacity), bench.state.alpha, size, corner,
                             ImVec2(corner.x + shown, corner.y + shown));
        bench.drawn.views.push_back({map.panel, map.head, pos.x, pos.y, size.x, size.y, tokens.grid_h, tokens.grid_w});
        maps_bottom = std::max(maps_bottom, pos.y + size.y);
        const bool hovered = ImGui::IsItemHovered();
        // Where the whole map would lie at this zoom, and its patch size: every overlay and the
        // mouse go through these, clipped to the view.
        const float zoomed_cell = cell * float(zoom);
        const ImVec2 whole(pos.x - corner.x * size.x * float(zoom), pos.y - corner.y * size.y * float(zoom));
        ImDrawList* draw = ImGui::GetWindowDrawList();
        draw->PushClipRect(pos, ImVec2(pos.x + size.x, pos.y + size.y), true);
        if (tokens.is_patch(query_cell) && panel.layout.is_patch(panel.query_token)) {
          const ImVec2 a(whole.x + zoomed_cell * tokens.col_of(query_cell),
                         whole.y + zoomed_cell * tokens.row_of(query_cell));
          draw->AddRect(a, ImVec2(a.x + zoomed_cell, a.y + zoomed_cell), IM_COL32(255, 60, 60, 255), 0, 0, 2.0f);
        }
        if (bench.state.windows) draw_windows(draw, *outcome, tokens, whole, zoomed_cell);
        if (box)
          draw->AddRect(ImVec2(whole.x + zoomed_cell * box->col_begin, whole.y + zoomed_cell * box->row_begin),
                        ImVec2(whole.x + zoomed_cell * box->col_end, whole.y + zoomed_cell * box->row_end),
                        IM_COL32(60, 200, 255, 255), 0, 0, 2.0f);
        if (hovered) hover(bench, map, tokens, whole, zoomed_cell);
        draw->PopClipRect();
        if (hovered) zoom_and_pan(pos, size);
      }
    }
    if (drag.active) update_box_drag(bench);
    ImGui::SetCursorScreenPos(ImVec2(origin.x, std::min(maps_bottom, origin.y + area.y) + 10));
    draw_colour_bar(bench, bench.shown.scale, std::min(area.x * 0.6f, 560.0f), "");
    ImGui::Text("%s: one scale for every view", scale_caption(bench.shown.scale).c_str());
    ImGui::TextDisabled("layer %d (%s), query %s, %s", outcome->layer, outcome->placement.name.c_str(),
                        outcome->layout.token_name(outcome->query_token).c_str(),
                        incoming ? "in: the attention patches give it" : "out: where it looks");
    if (zoom > 1) {
      ImGui::SameLine();
      ImGui::TextDisabled("| zoom %dx (wheel; drag to pan; double-click: whole)", zoom);
    }
    if (!outcome->placement.channels.empty()) {
      // CARE: the map is the linear part's, which sees only its own slice of the channels.
      std::string parts;
      for (const ChannelPart& part : outcome->placement.channels)
        parts += (parts.empty() ? "" : ", ") + part.name + " " + std::to_string(part.begin) + ".." +
                 std::to_string(part.end - 1) + (part.attention ? " (this map)" : "");
      ImGui::TextDisabled("channels: %s", parts.c_str());
    }
    ImGui::End();
  }

  // The layer's window boundaries (shifted where the block shifts) and the outline of the cells the
  // query attends within, when the maps lie on the grid the windows partition.
  static void draw_windows(ImDrawList* draw, const InferenceOutcome& outcome, const TokenLayout& grid, ImVec2 pos,
                           float cell) {
    const LayerPlacement& at = outcome.placement;
    if (grid.grid_h != outcome.layout.grid_h || grid.grid_w != outcome.layout.grid_w) return;
    const ImU32 line = IM_COL32(255, 255, 255, 150), own = IM_COL32(255, 160, 40, 255);
    if (at.window_h > 0) {
      for (int r = at.shift_h % at.window_h; r < grid.grid_h; r += at.window_h)
        if (r > 0)
          draw->AddLine(ImVec2(pos.x, pos.y + cell * r), ImVec2(pos.x + cell * grid.grid_w, pos.y + cell * r), line);
      for (int c = at.shift_w % at.window_w; c < grid.grid_w; c += at.window_w)
        if (c > 0)
          draw->AddLine(ImVec2(pos.x + cell * c, pos.y), ImVec2(pos.x + cell * c, pos.y + cell * grid.grid_h), line);
    }
    std::vector<char> inside(size_t(grid.grid_h) * size_t(grid.grid_w), 0);
    for (int index : outcome.query_window)
      if (index >= 0 && size_t(index) < inside.size()) inside[size_t(index)] = 1;
    auto in = [&](int r, int c) {
      return r >= 0 && c >= 0 && r < grid.grid_h && c < grid.grid_w &&
             inside[size_t(r) * size_t(grid.grid_w) + size_t(c)];
    };
    // The union's border: every cell edge with the window on one side only (a shifted window that
    // wraps around the image shows as its pieces).
    for (int r = 0; r < grid.grid_h; ++r)
      for (int c = 0; c < grid.grid_w; ++c) {
        if (!in(r, c)) continue;
        const float x0 = pos.x + cell * c, y0 = pos.y + cell * r, x1 = x0 + cell, y1 = y0 + cell;
        if (!in(r - 1, c)) draw->AddLine(ImVec2(x0, y0), ImVec2(x1, y0), own, 2.0f);
        if (!in(r + 1, c)) draw->AddLine(ImVec2(x0, y1), ImVec2(x1, y1), own, 2.0f);
        if (!in(r, c - 1)) draw->AddLine(ImVec2(x0, y0), ImVec2(x0, y1), own, 2.0f);
        if (!in(r, c + 1)) draw->AddLine(ImVec2(x1, y0), ImVec2(x1, y1), own, 2.0f);
      }
  }

  void hover(Workbench& bench, const PatchMap& map, const TokenLayout& tokens, ImVec2 pos, float cell) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int col = std::clamp(int((mouse.x - pos.x) / cell), 0, tokens.grid_w - 1);
    const int row = std::clamp(int((mouse.y - pos.y) / cell), 0, tokens.grid_h - 1);
    const ImVec2 a(pos.x + cell * col, pos.y + cell * row);
    ImGui::GetWindowDrawList()->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 255, 255, 200), 0, 0, 1.0f);
    const double value = double(map.map->at(row, col));
    if (!drag.active) {
      const std::string what = map.head == kAnalysisMapHead ? bench.outcome->analysis_view->panel_map_label()
                               : map.head < 0               ? "mean over heads"
                                                            : "head " + std::to_string(map.head);
      if (map.factor != 1.0)
        ImGui::SetTooltip("patch (%d, %d)  %s: %.5f (%.3f x uniform)\nclick: make it the query; right drag: draw a box",
                          row, col, what.c_str(), value, value * map.factor);
      else
        ImGui::SetTooltip("patch (%d, %d)  %s: %.5f\nclick: make it the query; right drag: draw a box", row, col,
                          what.c_str(), value);
    }
    const ImGuiIO& io = ImGui::GetIO();
    const bool shift = io.KeyShift;
    if (ImGui::IsItemClicked(ImGuiMouseButton_Right) || (shift && ImGui::IsItemClicked(ImGuiMouseButton_Left)))
      drag = {true, pos, cell, row, col, tokens};
    else if (zoom == 1 ? ImGui::IsItemClicked(ImGuiMouseButton_Left)
                       // Zoomed, a left drag pans: the query is the patch of a press released in place.
                       : ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 16.0f)
      bench.pick_query(row, col, tokens);
  }

  void report(const Workbench&, nlohmann::json& about, nlohmann::json&) const override {
    about["zoom"] = zoom;
    about["zoom_corner"] = {corner.x, corner.y};
  }

  // The wheel zooms in whole steps about the cursor (the image point under it stays there); a left
  // drag pans a zoomed view; a double click shows the whole map.
  void zoom_and_pan(ImVec2 pos, ImVec2 size) {
    const ImGuiIO& io = ImGui::GetIO();
    const ImVec2 at((io.MousePos.x - pos.x) / size.x, (io.MousePos.y - pos.y) / size.y);  // 0..1 in the view
    if (io.MouseWheel != 0.0f) {
      // A notch a step; a trackpad's fraction of one still counts as one.
      const int notches = io.MouseWheel > 0 ? std::max(1, int(std::lround(io.MouseWheel)))
                                            : std::min(-1, int(std::lround(io.MouseWheel)));
      const int next = std::clamp(zoom + notches, 1, kMaxZoom);
      const ImVec2 point(corner.x + at.x / float(zoom), corner.y + at.y / float(zoom));
      zoom = next;
      corner = ImVec2(point.x - at.x / float(zoom), point.y - at.y / float(zoom));
    }
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) zoom = 1;
    if (zoom > 1 && !io.KeyShift && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 4.0f)) {
      corner.x -= io.MouseDelta.x / size.x / float(zoom);
      corner.y -= io.MouseDelta.y / size.y / float(zoom);
    }
    const float largest = 1.0f - 1.0f / float(zoom);
    corner = ImVec2(std::clamp(corner.x, 0.0f, largest), std::clamp(corner.y, 0.0f, largest));
  }

  // The box spans the patches from the drag's start to the one under the mouse, both included.
  void update_box_drag(Workbench& bench) {
    const ImGuiIO& io = ImGui::GetIO();
    const TokenLayout& tokens = drag.grid;
    const int col = std::clamp(int(std::floor((io.MousePos.x - drag.view_pos.x) / drag.cell)), 0, tokens.grid_w - 1);
    const int row = std::clamp(int(std::floor((io.MousePos.y - drag.view_pos.y) / drag.cell)), 0, tokens.grid_h - 1);
    bench.state.box = std::to_string(std::min(row, drag.row)) + "," + std::to_string(std::min(col, drag.col)) + "," +
                      std::to_string(std::max(row, drag.row) + 1) + "," + std::to_string(std::max(col, drag.col) + 1);
    if (!io.MouseDown[ImGuiMouseButton_Right] && !io.MouseDown[ImGuiMouseButton_Left]) drag.active = false;
  }
};

std::unique_ptr<WorkbenchPanel> make_attention_panel() { return std::make_unique<AttentionPanel>(); }

}  // namespace attnscope
