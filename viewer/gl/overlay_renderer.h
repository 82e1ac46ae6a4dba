// Colours scalar maps in a GLSL fragment shader (shaders/attention_overlay.frag.glsl): an attention
// map over its image, or a bare matrix, rendered into an offscreen texture that a panel shows.
#pragma once

#include <imgui.h>

#include <map>
#include <string>

#include "core/colormap.h"
#include "core/colormap_image.h"
#include "core/value_scale.h"
#include "viewer/gl/texture.h"

namespace attnscope::gl {

// An offscreen colour texture with its framebuffer; reallocated when the requested size changes.
class RenderTarget {
 public:
  RenderTarget() = default;
  ~RenderTarget();
  RenderTarget(const RenderTarget&) = delete;
  RenderTarget& operator=(const RenderTarget&) = delete;
  RenderTarget(RenderTarget&& other) noexcept;
  RenderTarget& operator=(RenderTarget&& other) noexcept;

  void resize(int width, int height);
  unsigned framebuffer() const { return framebuffer_; }
  int width() const { return width_; }
  int height() const { return height_; }
  ImTextureID imgui_id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture_)); }

 private:
  unsigned framebuffer_ = 0, texture_ = 0;
  int width_ = 0, height_ = 0;
  std::string content_;  // what was last rendered into it
  friend class OverlayRenderer;
};

class OverlayRenderer {
 public:
  OverlayRenderer();  // compiles the program; needs a current GL context
  ~OverlayRenderer();
  OverlayRenderer(const OverlayRenderer&) = delete;
  OverlayRenderer& operator=(const OverlayRenderer&) = delete;

  // Renders `values` (display units of `scale`) coloured over `image` (or alone when image is null)
  // into `target` at its size; skipped when the target already shows exactly these inputs (frames
  // cost nothing when idle).
  void render(RenderTarget& target, const Texture* image, const Texture& values, const ValueScale& scale, float opacity,
              OverlayAlpha alpha = OverlayAlpha::Constant);

  // The 256 x 1 table of a colour map, as uploaded for the shader: the colour bar shows this texture.
  const Texture& colormap_table(Colormap colormap);

 private:
  unsigned program_ = 0, vertex_array_ = 0;
  std::map<Colormap, Texture> tables_;
};

}  // namespace attnscope::gl
