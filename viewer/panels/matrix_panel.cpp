// The matrix view: the selected head's full T x T attention matrix of one panel (coloured in the
// shader on the session's scale mode, with its colour bar, the query row marked), its singular-value
// spectrum drawn by the figures' code (log axis, tolerance line, rank marker), numerical and
// effective rank. Linear attention's low rank shows here next to softmax's full rank.
#include <algorithm>
#include <cmath>

#include "viewer/colour_bar.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

struct MatrixPanel : WorkbenchPanel {
  gl::RenderTarget target;

  void draw(Workbench& bench) override {
    if (bench.state.analysis != "spectrum") return;
    if (!begin_fixed_window("Matrix and spectrum", bench.layout.analysis_pos, bench.layout.analysis_size)) {
      ImGui::End();
      return;
    }
    draw_analysis_switch(bench);
    const InferenceOutcome* outcome = bench.outcome.get();
    if (!outcome || !bench.matrix_texture.valid() || outcome->panels.front().matrix.empty()) {
      ImGui::TextDisabled("waiting for a result");
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
    const int rows = panel.matrix_rows, cols = panel.matrix_cols;

    // The matrix on its own scale (its entries, not the patch maps, set the range), in the
    // session's scale mode; FLatten's DWC band makes entries negative: a diverging map then.
    const float* matrix = panel.matrix.data();
    ValueRange range;
    range.include(matrix, panel.matrix.size());
    ScaleSpec spec = bench.state.scale;
    if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;  // the texture holds weights
    const ValueScale scale = resolve_value_scale(spec, bench.state.colormap, range);
    const float side = std::floor(std::min(ImGui::GetContentRegionAvail().x, 420.0f));
    target.resize(int(side), int(side));
    bench.renderer->render(target, nullptr, bench.matrix_texture, scale, 1.0f, OverlayAlpha::Constant);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(target.imgui_id(), ImVec2(side, side));
    const float row_y = pos.y + side * float(panel.query_token) / float(rows);
    ImGui::GetWindowDrawList()->AddRect(ImVec2(pos.x, row_y), ImVec2(pos.x + side, row_y + side / rows + 1),
                                        IM_COL32(255, 60, 60, 255));
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int row = std::clamp(int((mouse.y - pos.y) / side * rows), 0, rows - 1);
      const int col = std::clamp(int((mouse.x - pos.x) / side * cols), 0, cols - 1);
      ImGui::SetTooltip("query %s -> key %s: %.5f", panel.layout.token_name(row).c_str(),
                        panel.key_layout.token_name(col).c_str(), double(matrix[size_t(row) * cols + col]));
    }
    draw_colour_bar(bench, scale, side, scale_caption(scale) + "; query row marked");

    if (size_t(head) < panel.spectra.size()) {
      const HeadSpectrum& spectrum = panel.spectra[size_t(head)];
      ImGui::Separator();
      ImGui::Text("numerical rank %d of %d, effective rank %.1f", spectrum.numerical_rank, std::min(rows, cols),
                  spectrum.effective_rank);
      if (bench.spectrum_plot.texture.valid()) {
        const ImVec2 plot_pos = ImGui::GetCursorScreenPos();
        gl::opaque_image(bench.spectrum_plot.texture.imgui_id(),
                         ImVec2(float(bench.spectrum_plot.width), float(bench.spectrum_plot.height)));
        bench.drawn_views.push_back({-3, head, plot_pos.x, plot_pos.y, float(bench.spectrum_plot.width),
                                     float(bench.spectrum_plot.height), 0, 0});
      }
      ImGui::Text("ranks of every head in this layer:");
      for (size_t h = 0; h < panel.spectra.size(); ++h)
        ImGui::Text("  head %zu: rank %d, effective %.1f", h, panel.spectra[h].numerical_rank,
                    panel.spectra[h].effective_rank);
    } else {
      ImGui::TextDisabled("computing the spectrum...");
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_matrix_panel() { return std::make_unique<MatrixPanel>(); }

}  // namespace attnscope
