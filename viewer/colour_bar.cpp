#include "viewer/colour_bar.h"
#include "core/colormap_image.h"

#include "figures/ticks.h"
#include "viewer/workbench.h"

namespace attnscope {

std::string scale_caption(const ValueScale& scale) {
  return to_string(scale.colormap) + (scale.label.empty() ? "" : ", " + scale.label);
}

void draw_colour_bar(Workbench& bench, const ValueScale& scale, float width, const std::string& caption) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float bar_height = 14.0f, tick = 4.0f;
  ImGui::Image(bench.renderer->colormap_table(scale.colormap).imgui_id(), ImVec2(width, bar_height));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImU32 ink = ImGui::GetColorU32(ImGuiCol_Text);
  const float label_y = origin.y + bar_height + tick + 1.0f;
  float last_right = -1e9f;
  for (const Tick& t : scale_ticks(scale)) {
    const float x = origin.x + float(scale.position(t.value)) * width;
    draw->AddLine(ImVec2(x, origin.y + bar_height), ImVec2(x, origin.y + bar_height + tick), ink);
    const std::string text = plain_tick_text(t);
    const float text_width = ImGui::CalcTextSize(text.c_str()).x;
    const float left = std::min(std::max(x - text_width / 2, origin.x - 4.0f), origin.x + width - text_width + 4.0f);
    if (left < last_right + 6.0f) continue;  // never let two labels touch
    draw->AddText(ImVec2(left, label_y), ink, text.c_str());
    last_right = left + text_width;
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, label_y + ImGui::GetTextLineHeight() + 2.0f));
  if (!caption.empty()) ImGui::TextDisabled("%s", caption.c_str());
}

}  // namespace attnscope
