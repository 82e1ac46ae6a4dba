// The matrix view: the selected head's T x T attention matrix of one panel (coloured in the shader
// on the session's scale mode, with its colour bar, the query row marked; above kMatrixTexels tokens
// a side, its block means, with the exact entry under the cursor), its singular-value spectrum
// drawn by the figures' code (log axis, tolerance line, rank marker), numerical and effective rank
// (ranges where only the leading values were computed). Linear attention's low rank shows here
// next to softmax's full rank. The ranks option and the worker's progress and cancel sit on top.
#include <algorithm>
#include <cmath>

#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

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

struct MatrixPanel : WorkbenchPanel {
  gl::RenderTarget target;
  // The last exact row read under the cursor (an overview of blocks holds only their means).
  uint64_t row_request = 0;  // the outcome's request id (addresses can repeat, ids do not)
  int row_panel = -1, row_query = -1;
  std::vector<float> row_values;

  // The exact entry (query, key) of the shown matrix: from the overview when it is the matrix
  // itself, else from the query's row, read from the captured q and k once per row.
  float exact_entry(const InferenceOutcome& outcome, int panel_index, const PanelMaps& panel, int query, int key) {
    if (panel.matrix_block == 1) return panel.matrix[size_t(query) * size_t(panel.matrix_cols) + size_t(key)];
    if (row_request != outcome.request_id || row_panel != panel_index || row_query != query) {
      row_values = panel.matrix_row(query);
      row_request = outcome.request_id;
      row_panel = panel_index;
      row_query = query;
    }
    return row_values[size_t(key)];
  }

  void draw(Workbench& bench) override {
    if (bench.state.analysis != "spectrum") return;
    if (!begin_fixed_window("Matrix and spectrum", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    if (const AnalysisEntry* entry = find_analysis("spectrum")) draw_analysis_options(bench, *entry);
    draw_worker_progress(bench);
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !bench.matrix_texture.valid() || outcome->panels.front().matrix.empty()) {
      ImGui::TextDisabled(bench.worker_busy ? "computing..." : "waiting for a result");
      ImGui::End();
      return;
    }
    if (outcome->panels.size() > 1) {
      ImGui::SetNextItemWidth(-1);
      int shown = bench.matrix_panel + 1;  // panels are numbered from 1 on screen
      if (ImGui::SliderInt("##matrix_panel", &shown, 1, int(outcome->panels.size()), "panel %d"))
        bench.matrix_panel = shown - 1;
    }
    const int panel_index = std::clamp(bench.matrix_panel, 0, int(outcome->panels.size()) - 1);
    const PanelMaps& panel = outcome->panels[size_t(panel_index)];
    if (panel.matrix.empty()) {
      ImGui::TextWrapped("panel %d: %s", panel_index + 1, panel.error.empty() ? "no matrix" : panel.error.c_str());
      ImGui::End();
      return;
    }
    const int head = std::min(bench.state.head, panel.heads - 1);
    ImGui::TextWrapped("%s, layer %d, head %d", panel.description.c_str(), panel.layer, head);
    const int queries = panel.layout.total_tokens(), keys = panel.key_layout.total_tokens();

    // The matrix on its own scale (its entries, not the patch maps, set the range), in the
    // session's scale mode; FLatten's DWC band makes entries negative: a diverging map then.
    ValueRange range;
    range.include(panel.matrix.data(), panel.matrix.size());
    ScaleSpec spec = bench.state.scale;
    if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;  // the texture holds weights
    const ValueScale scale = resolve_value_scale(spec, bench.state.colormap, range);
    const float side = std::floor(std::min(ImGui::GetContentRegionAvail().x, 420.0f));
    target.resize(int(side), int(side));
    bench.renderer->render(target, nullptr, bench.matrix_texture, scale, 1.0f, OverlayAlpha::Constant);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(target.imgui_id(), ImVec2(side, side));
    const float row_y = pos.y + side * float(panel.query_token) / float(queries);
    ImGui::GetWindowDrawList()->AddRect(ImVec2(pos.x, row_y), ImVec2(pos.x + side, row_y + side / queries + 1),
                                        IM_COL32(255, 60, 60, 255));
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int query = std::clamp(int((mouse.y - pos.y) / side * queries), 0, queries - 1);
      const int key = std::clamp(int((mouse.x - pos.x) / side * keys), 0, keys - 1);
      const float exact = exact_entry(*outcome, panel_index, panel, query, key);
      if (panel.matrix_block == 1) {
        ImGui::SetTooltip("query %s -> key %s: %.5f", panel.layout.token_name(query).c_str(),
                          panel.key_layout.token_name(key).c_str(), double(exact));
      } else {
        const int block = panel.matrix_block;
        const float mean = panel.matrix[size_t(query / block) * size_t(panel.matrix_cols) + size_t(key / block)];
        ImGui::SetTooltip("query %s -> key %s: %.6f\n(the %dx%d block's mean drawn here: %.6f)",
                          panel.layout.token_name(query).c_str(), panel.key_layout.token_name(key).c_str(),
                          double(exact), block, block, double(mean));
      }
    }
    draw_colour_bar(bench, scale, side, scale_caption(scale) + "; query row marked");
    if (panel.matrix_block > 1)
      ImGui::TextWrapped("%d x %d entries drawn as the means of %dx%d blocks; hover for the exact entry", queries, keys,
                         panel.matrix_block, panel.matrix_block);

    ImGui::Separator();
    if (!panel.spectra_note.empty()) ImGui::TextWrapped("%s", panel.spectra_note.c_str());
    if (size_t(head) < panel.spectra.size()) {
      const HeadSpectrum& spectrum = panel.spectra[size_t(head)];
      ImGui::TextWrapped("%s; %s", spectrum_words(spectrum, std::min(queries, keys)).c_str(), spectrum.method.c_str());
      if (bench.spectrum_plot.texture.valid()) {
        const ImVec2 plot_pos = ImGui::GetCursorScreenPos();
        gl::opaque_image(bench.spectrum_plot.texture.imgui_id(),
                         ImVec2(float(bench.spectrum_plot.width), float(bench.spectrum_plot.height)));
        bench.drawn_views.push_back({-3, head, plot_pos.x, plot_pos.y, float(bench.spectrum_plot.width),
                                     float(bench.spectrum_plot.height), 0, 0});
      }
      ImGui::Text("every head of this layer:");
      for (size_t h = 0; h < panel.spectra.size(); ++h)
        ImGui::Text("  head %zu: %s", h, spectrum_words(panel.spectra[h], std::min(queries, keys)).c_str());
    } else if (panel.spectra_note.empty()) {
      ImGui::TextDisabled("computing the spectrum...");
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_matrix_panel() { return std::make_unique<MatrixPanel>(); }

}  // namespace attnscope
