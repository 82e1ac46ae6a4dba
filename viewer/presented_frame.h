// What the last presented frame was drawn from, triangle by triangle: each one's corners, clip
// rectangle, texture with that texture's pixel version, and the render state callbacks left it in;
// and the frame's size and clear colour. A frame equal in all of them shows the same pixels, so the
// loop skips rendering and the swap. A frame that differs in a few triangles differs only inside
// their bounding boxes, old and new (its damage), and the loop redraws those rectangles alone where
// the framebuffer keeps the last frame's pixels. Under a software rasteriser a whole 1600 x 1000
// frame costs 10-13 ms of the cores a running forward needs, while a slider's change or a new map
// covers a small part of it. No GL here: the main loop passes the texture versions in.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace attnscope {

// Framebuffer pixels, row 0 at the top, ends exclusive.
struct PixelRect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  long long area() const { return empty() ? 0 : (long long)(x1 - x0) * (y1 - y0); }
  bool operator==(const PixelRect& other) const {
    return x0 == other.x0 && y0 == other.y0 && x1 == other.x1 && y1 == other.y1;
  }
};

class PresentedFrame {
 public:
  // The pixel version of a texture (gl::texture_pixels_version): it changes whenever its pixels may.
  using TextureVersion = std::function<uint64_t(ImTextureID)>;

  // Records this frame and whether it would show other pixels than the last presented one.
  bool differs(const ImDrawData& draw, int width, int height, const ImVec4& clear_colour,
               uint64_t texture_pixels_version, const TextureVersion& texture_version);
  // Where this frame's pixels may differ from the last presented frame's: nothing when it does not
  // differ; the whole framebuffer when nothing was presented yet, the size, the clear colour or
  // the list of windows changed, or the changes cover most of it. A few disjoint rectangles.
  const std::vector<PixelRect>& damage() const { return damage_; }
  // Whether a texture changed since the last presented frame: new pixels from the worker, not
  // only ImGui's own drawing (a tooltip, a hover highlight).
  bool textures_changed(uint64_t texture_pixels_version) const {
    return !presented_ || texture_pixels_version != texture_pixels_version_;
  }
  // The frame last given to differs() was rendered (in whole, or its damage over the last one) and
  // swapped.
  void presented();
  // The window's pixels were lost (uncovered, damaged): the next frame draws whole.
  void forget() { presented_ = false; }

  // Renders `draw` inside `rect` alone: every command's clip rectangle cut to it, `render` called,
  // the clip rectangles put back.
  static void render_inside(ImDrawData& draw, const PixelRect& rect, const std::function<void()>& render);

  // What one triangle's pixels depend on. Exposed for the tests.
  struct Triangle {
    ImTextureID texture = nullptr;
    uint64_t texture_version = 0;
    ImDrawCallback state = nullptr;  // the last callback before it (blending off, the backend's reset)
    void* state_data = nullptr;
    ImVec4 clip;
    ImDrawVert corners[3];
    bool operator==(const Triangle& other) const;
  };

 private:
  struct Header {
    int width = 0, height = 0;
    ImVec4 clear_colour;
    ImVec2 display_pos, display_size, framebuffer_scale;
    bool operator==(const Header& other) const;
  };
  void compute_damage();
  PixelRect pixels_of(const Triangle& triangle) const;

  Header last_header_, next_header_;
  std::vector<std::vector<Triangle>> last_, next_;  // per draw list, in drawing order
  std::vector<PixelRect> damage_;
  uint64_t texture_pixels_version_ = 0, next_texture_pixels_version_ = 0;
  bool presented_ = false;
};

}  // namespace attnscope
