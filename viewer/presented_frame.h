// What the last presented frame was drawn from: its framebuffer size and clear colour, every draw
// list's vertices, indices and commands (texture, clip rectangle, callback), and the textures'
// pixel version (gl::texture_pixels_version). A frame equal in all of them shows the same pixels,
// so the loop skips rendering and the swap: under a software rasteriser a 1600 x 1000 frame costs
// 10-13 ms of the cores a running forward needs, and the frames that settle a change, or follow a
// pointer moving over parts of the window that do not change, mostly redraw what is shown. No GL
// here: the main loop passes the version in.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <vector>

namespace attnscope {

class PresentedFrame {
 public:
  // Whether this frame would show other pixels than the last presented one.
  bool differs(const ImDrawData& draw, int width, int height, const ImVec4& clear_colour,
               uint64_t texture_pixels_version);
  // Whether a texture changed since the last presented frame: new pixels from the worker, not
  // only ImGui's own drawing (a tooltip, a hover highlight).
  bool textures_changed(uint64_t texture_pixels_version) const {
    return !presented_ || texture_pixels_version != texture_pixels_version_;
  }
  // The frame last given to differs() was rendered and swapped.
  void presented();
  // The window's pixels were lost (uncovered, damaged): the next frame draws.
  void forget() { presented_ = false; }

 private:
  std::vector<unsigned char> last_, next_;
  uint64_t texture_pixels_version_ = 0, next_texture_pixels_version_ = 0;
  bool presented_ = false;
};

}  // namespace attnscope
