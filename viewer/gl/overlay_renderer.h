// Colours scalar maps in a GLSL fragment shader (shaders/attention_overlay.frag.glsl): an attention
// map over its image, or a bare matrix, drawn as an ImGui image straight into the frame.
#pragma once

#include <imgui.h>

#include <map>
#include <memory>
#include <string>

#include "core/colormap.h"
#include "core/colormap_image.h"
#include "core/value_scale.h"
#include "viewer/gl/texture.h"

namespace attnscope::gl {

class OverlayRenderer;

// One map a panel draws, kept across frames. A 1 x 1 stand-in texture names it in ImGui's draw
// lists; its pixel version changes when the map's inputs do, so a frame's damage covers the map
// exactly when its pixels change (PresentedFrame).
class OverlayView {
 public:
  OverlayView() = default;
  ~OverlayView();
  OverlayView(const OverlayView&) = delete;
  OverlayView& operator=(const OverlayView&) = delete;
  OverlayView(OverlayView&& other) noexcept;
  OverlayView& operator=(OverlayView&& other) noexcept;

  // What the shader reads when the frame is rendered.
  struct Inputs {
    OverlayRenderer* renderer = nullptr;
    unsigned image = 0, values = 0, table = 0;
    float vmin = 0, vmax = 1, opacity = 1;
    bool log = false, diverging = false, alpha_follows_value = false, has_image = false;
  };

 private:
  unsigned stand_in_ = 0;
  std::unique_ptr<Inputs> inputs_;  // a fixed address for the draw callback, however the view moves
  std::string content_;             // what the inputs were at the last pixel version
  friend class OverlayRenderer;
};

class OverlayRenderer {
 public:
  OverlayRenderer();  // compiles the program; needs a current GL context
  ~OverlayRenderer();
  OverlayRenderer(const OverlayRenderer&) = delete;
  OverlayRenderer& operator=(const OverlayRenderer&) = delete;

  // Draws `values` (display units of `scale`) coloured over `image` (or alone when image is null)
  // as an ImGui image of `size` at the cursor, the part [uv0, uv1] of the map (a zoomed view shows
  // less), shaded per screen pixel when the frame is rendered. Opaque: blending off.
  void draw(OverlayView& view, const Texture* image, const Texture& values, const ValueScale& scale, float opacity,
            OverlayAlpha alpha, ImVec2 size, ImVec2 uv0 = ImVec2(0, 0), ImVec2 uv1 = ImVec2(1, 1));

  // The 256 x 1 table of a colour map, as uploaded for the shader: the colour bar shows this texture.
  const Texture& colormap_table(Colormap colormap);

 private:
  // ImGui's draw callback before a view's quad: this program and the view's inputs in place of
  // the backend's program, whose attribute locations and projection it takes over.
  static void use_program(const ImDrawList* list, const ImDrawCmd* command);
  void bind(const OverlayView::Inputs& inputs);
  unsigned linked_program(unsigned backend_program);

  unsigned program_ = 0;
  unsigned linked_for_ = 0;  // the backend program whose attribute locations program_ has
  std::map<Colormap, Texture> tables_;
};

}  // namespace attnscope::gl
