// Draws scalar maps as ImGui images straight into the frame: an attention map over its image, or a
// bare matrix. Each cell's colour and weight come from the exporter's own colouring
// (colour_and_weight_values, on the CPU once per change); the fragment shader
// (shaders/attention_overlay.frag.glsl) only blends them over the image per screen pixel.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/colormap.h"
#include "core/colormap_image.h"
#include "core/value_scale.h"
#include "viewer/gl/texture.h"

namespace attnscope::gl {

class OverlayRenderer;

// A scalar map as a view draws it: row-major values in the scale's display units, kept on the CPU
// (the colours are computed there), and a version that changes with every assign.
class MapValues {
 public:
  void assign(const float* values, int width, int height);
  const std::vector<float>& values() const { return values_; }
  int width() const { return width_; }
  int height() const { return height_; }
  uint64_t version() const { return version_; }

 private:
  std::vector<float> values_;
  int width_ = 0, height_ = 0;
  uint64_t version_ = 0;
};

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
    unsigned image = 0, cells = 0;
    bool has_image = false;
  };

 private:
  unsigned stand_in_ = 0;
  Texture cells_;                   // each cell's colour (RGB) and weight (A)
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
  // less), blended per screen pixel when the frame is rendered. Opaque: blending off.
  void draw(OverlayView& view, const Texture* image, const MapValues& values, const ValueScale& scale, float opacity,
            OverlayAlpha alpha, ImVec2 size, ImVec2 uv0 = ImVec2(0, 0), ImVec2 uv1 = ImVec2(1, 1));

  // The 256 x 1 table of a colour map as a texture: what the colour bar shows.
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
