// A GPU texture the panels show: an RGB8 image, a map's per-cell colours or a colour-map table.
// It owns its GL name; everything outside viewer/gl/ sees it only as an ImTextureID.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <opencv2/core.hpp>

namespace attnscope::gl {

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  Texture(Texture&& other) noexcept;
  Texture& operator=(Texture&& other) noexcept;

  // 8-bit RGB [H x W] (CV_8UC3), bilinear filtering: photographs.
  void upload_rgb(const cv::Mat& rgb);
  // Float RGBA [H x W x 4] row-major, nearest filtering: each patch or matrix cell stays one block.
  void upload_rgba(const float* rgba, int width, int height);

  bool valid() const { return name_ != 0; }
  int width() const { return width_; }
  int height() const { return height_; }
  unsigned name() const { return name_; }
  // Changes with every upload (unique across textures), so views can tell when to re-render.
  uint64_t version() const { return version_; }
  ImTextureID imgui_id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(name_)); }

 private:
  void ensure(int width, int height, int internal_format, int filter);
  unsigned name_ = 0;
  int width_ = 0, height_ = 0, internal_format_ = 0;
  uint64_t version_ = 0;
};

// Rises whenever any texture's pixels may have changed (an upload, an OverlayView's new inputs):
// a frame with the same draw commands and the same number shows the same pixels (PresentedFrame).
uint64_t texture_pixels_version();
// The version at which this texture's pixels last changed; 0 for one that never did here (ImGui's
// font atlas). A frame's damage includes whatever a texture with a new version covers.
uint64_t texture_pixels_version(ImTextureID texture);
// Raises both; viewer/gl/ code that writes a texture other than by an upload calls it.
void texture_pixels_changed(unsigned name);

// ImGui::Image for an opaque texture, drawn with blending off: under a software rasteriser blending
// reads back every covered pixel, and a panel's map covers most of the window.
// `uv0` and `uv1` select the part shown (the whole texture by default: a zoomed view shows less).
void opaque_image(ImTextureID texture, ImVec2 size, ImVec2 uv0 = ImVec2(0, 0), ImVec2 uv1 = ImVec2(1, 1));

}  // namespace attnscope::gl
