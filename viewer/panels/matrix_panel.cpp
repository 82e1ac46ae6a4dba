// The matrix view: the selected head's full T x T attention matrix of one panel (coloured in the
// shader, the query row marked), its singular-value spectrum on a log scale, numerical and
// effective rank. Linear attention's low rank shows here next to softmax's full rank.
#include <algorithm>
#include <cmath>

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
    const int head = std::min(bench.state.head, outcome->heads - 1);
    ImGui::TextWrapped("%s, layer %d, head %d", panel.description.c_str(), outcome->layer, head);
    const int rows = panel.matrix_rows, cols = panel.matrix_cols;

    // The matrix on its own scale (its rows, not the patch maps, set the range).
    const float* matrix = panel.matrix.data();
    const size_t count = panel.matrix.size();
    gl::ColorScale scale;
    scale.colormap = bench.state.colormap;
    scale.vmin = *std::min_element(matrix, matrix + count);
    scale.vmax = std::max(*std::max_element(matrix, matrix + count), scale.vmin + 1e-12f);
    const float side = std::floor(std::min(ImGui::GetContentRegionAvail().x, 420.0f));
    target.resize(int(side), int(side));
    bench.renderer->render(target, nullptr, bench.matrix_texture, scale, 1.0f);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    gl::opaque_image(target.imgui_id(), ImVec2(side, side));
    const float row_y = pos.y + side * float(outcome->query_token) / float(rows);
    ImGui::GetWindowDrawList()->AddRect(ImVec2(pos.x, row_y), ImVec2(pos.x + side, row_y + side / rows + 1),
                                        IM_COL32(255, 60, 60, 255));
    if (ImGui::IsItemHovered()) {
      const ImVec2 mouse = ImGui::GetIO().MousePos;
      const int row = std::clamp(int((mouse.y - pos.y) / side * rows), 0, rows - 1);
      const int col = std::clamp(int((mouse.x - pos.x) / side * cols), 0, cols - 1);
      ImGui::SetTooltip("query %s -> key %s: %.5f", outcome->layout.token_name(row).c_str(),
                        outcome->key_layout.token_name(col).c_str(), double(matrix[size_t(row) * cols + col]));
    }
    ImGui::Text("range %.3g .. %.3g, query row marked", double(scale.vmin), double(scale.vmax));

    if (size_t(head) < panel.spectra.size()) {
      const HeadSpectrum& spectrum = panel.spectra[size_t(head)];
      std::vector<float> log_values;
      for (float s : spectrum.singular_values) log_values.push_back(std::log10(std::max(s, 1e-12f)));
      ImGui::Separator();
      ImGui::Text("numerical rank %d of %d, effective rank %.1f", spectrum.numerical_rank, std::min(rows, cols),
                  spectrum.effective_rank);
      ImGui::PlotLines("##spectrum", log_values.data(), int(log_values.size()), 0, "log10 singular values", -8.0f,
                       std::max(1.0f, log_values.empty() ? 1.0f : log_values.front() + 0.5f),
                       ImVec2(ImGui::GetContentRegionAvail().x, 150));
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
