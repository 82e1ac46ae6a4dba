// The matrix view: the selected head's T x T attention matrix of one panel (coloured in the shader
// on the session's scale mode, with its colour bar, the query row marked; above kMatrixTexels tokens
// a side, its block means, with the exact entry under the cursor), its singular-value spectrum
// drawn by the figures' code (log axis, tolerance line, rank marker), numerical and effective rank
// (ranges where only the leading values were computed). Linear attention's low rank shows here
// next to softmax's full rank. The ranks option and the worker's progress and cancel sit on top.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/panel_maps.h"
#include "views/plot_views.h"

namespace attnscope {

namespace {

// The spectrum's numbers in words: exact values give a rank, leading ones a range.
std::string spectrum_words(const HeadSpectrum& spectrum, int smallest_side) {
  char text[160];
  if (spectrum.exact())
    std::snprintf(text, sizeof text, "rank %d of %d, effective rank %.1f", spectrum.numerical_rank, smallest_side,
                  spectrum.effective_rank);
  else
    std::snprintf(text, sizeof text, "rank %d to %lld of %d, effective rank %.1f to %.1f", spectrum.numerical_rank,
                  static_cast<long long>(spectrum.rank_at_most), smallest_side, spectrum.effective_rank,
                  spectrum.effective_rank_high);
  return text;
}

struct MatrixPanel : AnalysisPanel {
  int panel_index = 0;  // which side-by-side panel's matrix is shown
  gl::MapValues matrix_values;
  std::string values_key;
  gl::OverlayView overlay;
  PlotImage spectrum_plot;
  const PanelMatrix* shown = nullptr;  // drawn this frame
  // The last exact row read under the cursor (an overview of blocks holds only their means).
  uint64_t row_request = 0;  // the outcome's request id (addresses can repeat, ids do not)
  int row_panel = -1, row_query = -1;
  std::vector<float> row_values;

  // The exact entry (query, key) of the shown matrix: from the overview when it is the matrix
  // itself, else from the query's row, read from the captured q and k once per row.
  float exact_entry(const InferenceOutcome& outcome, const PanelMatrix& view, int query, int key) {
    if (view.block == 1) return view.matrix[size_t(query) * size_t(view.cols) + size_t(key)];
    if (row_request != outcome.request_id || row_panel != panel_index || row_query != query) {
      row_values = view.row(query);
      row_request = outcome.request_id;
      row_panel = panel_index;
      row_query = query;
    }
    return row_values[size_t(key)];
  }

  void draw(Workbench& bench, const AnalysisEntry& entry) override {
    shown = nullptr;
    draw_analysis_options(bench, entry);
    const InferenceOutcome* outcome = bench.outcome.get();
    const auto* views = outcome ? analysis_result<std::vector<PanelMatrix>>(*outcome) : nullptr;
    if (!views || views->empty() || views->front().matrix.empty()) {
      draw_waiting(bench, "waiting for a result");
      return;
    }
    if (outcome->panels.size() > 1) {
      ImGui::SetNextItemWidth(-1);
      int number = panel_index + 1;  // panels are numbered from 1 on screen
      if (ImGui::SliderInt("##matrix_panel", &number, 1, int(outcome->panels.size()), "panel %d"))
        panel_index = number - 1;
    }
    panel_index = std::clamp(panel_index, 0, int(views->size()) - 1);
    const PanelMaps& panel = outcome->panels[size_t(panel_index)];
    const PanelMatrix& view = (*views)[size_t(panel_index)];
    if (view.matrix.empty()) {
      ImGui::TextWrapped("panel %d: %s", panel_index + 1, panel.error.empty() ? "no matrix" : panel.error.c_str());
      return;
    }
    shown = &view;
    const std::string key = std::to_string(outcome->request_id) + "|" + std::to_string(panel_index);
    if (key != values_key) {
      matrix_values.assign(view.matrix.data(), view.cols, view.rows);
      values_key = key;
    }
    const int head = view.head;
    ImGui::TextWrapped("%s, layer %d, head %d", panel.description.c_str(), panel.layer, head);
    const int queries = panel.layout.total_tokens(), keys = panel.key_layout.total_tokens();

    // The matrix on its own scale (its entries, not the patch maps, set the range), in the
    // session's scale mode; FLatten's DWC band makes entries negative: a diverging map then.
    ValueRange range;
    range.include(view.matrix.data(), view.matrix.size());
    ScaleSpec spec = bench.state.scale;
    if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;  // the texture holds weights
    const ValueScale scale = resolve_value_scale(spec, bench.state.colormap, range);
    const float side = std::floor(std::min(ImGui::GetContentRegionAvail().x, 420.0f));
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    bench.renderer->draw(overlay, nullptr, matrix_values, scale, 1.0f, OverlayAlpha::Constant, ImVec2(side, side));
    const float row_y = pos.y + side * float(panel.query_token) / float(queries);
    ImGui::GetWindowDrawList()->AddRect(ImVec2(pos.x, row_y), ImVec2(pos.x + side, row_y + side / queries + 1),
                                        IM_COL32(255, 60, 60, 255));
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int query = std::clamp(int((mouse.y - pos.y) / side * queries), 0, queries - 1);
      const int key_token = std::clamp(int((mouse.x - pos.x) / side * keys), 0, keys - 1);
      const float exact = exact_entry(*outcome, view, query, key_token);
      if (view.block == 1) {
        ImGui::SetTooltip("query %s -> key %s: %.5f", panel.layout.token_name(query).c_str(),
                          panel.key_layout.token_name(key_token).c_str(), double(exact));
      } else {
        const int block = view.block;
        const float mean = view.matrix[size_t(query / block) * size_t(view.cols) + size_t(key_token / block)];
        ImGui::SetTooltip("query %s -> key %s: %.6f\n(the %dx%d block's mean drawn here: %.6f)",
                          panel.layout.token_name(query).c_str(), panel.key_layout.token_name(key_token).c_str(),
                          double(exact), block, block, double(mean));
      }
    }
    draw_colour_bar(bench, scale, side, scale_caption(scale) + "; query row marked");
    if (view.block > 1)
      ImGui::TextWrapped("%d x %d entries drawn as the means of %dx%d blocks; hover for the exact entry", queries, keys,
                         view.block, view.block);

    ImGui::Separator();
    if (!view.spectra_note.empty()) ImGui::TextWrapped("%s", view.spectra_note.c_str());
    if (size_t(head) < view.spectra.size()) {
      const HeadSpectrum& spectrum = view.spectra[size_t(head)];
      ImGui::TextWrapped("%s; %s", spectrum_words(spectrum, std::min(queries, keys)).c_str(), spectrum.method.c_str());
      const int width = std::max(60, int(bench.layout.analysis_size.x) - 24);
      try {
        refresh_plot(spectrum_plot, key + "|" + std::to_string(head), width,
                     [&] { return spectrum_view_figure(spectrum); });
      } catch (const std::exception& e) {
        bench.report_error(std::string("plot: ") + e.what());
      }
      if (spectrum_plot.texture.valid()) {
        const ImVec2 plot_pos = ImGui::GetCursorScreenPos();
        gl::opaque_image(spectrum_plot.texture.imgui_id(),
                         ImVec2(float(spectrum_plot.width), float(spectrum_plot.height)));
        bench.drawn.views.push_back(
            {-3, head, plot_pos.x, plot_pos.y, float(spectrum_plot.width), float(spectrum_plot.height), 0, 0});
      }
      ImGui::Text("every head of this layer:");
      for (size_t h = 0; h < view.spectra.size(); ++h)
        ImGui::Text("  head %zu: %s", h, spectrum_words(view.spectra[h], std::min(queries, keys)).c_str());
    } else if (view.spectra_note.empty()) {
      ImGui::TextDisabled("computing the spectrum...");
    }
  }

  void report(const Workbench&, nlohmann::json&, nlohmann::json& shown_numbers) const override {
    if (shown) shown_numbers.push_back({{"kind", "matrix"}, {"panel", panel_index}, {"values", shown->matrix}});
  }
};

}  // namespace

ATTNSCOPE_ANALYSIS_PANEL("spectrum", MatrixPanel)

}  // namespace attnscope
