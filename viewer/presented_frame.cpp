#include "viewer/presented_frame.h"

#include <algorithm>
#include <cmath>

namespace attnscope {

namespace {

bool same(const ImVec2& a, const ImVec2& b) { return a.x == b.x && a.y == b.y; }
bool same(const ImVec4& a, const ImVec4& b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }

PixelRect united(const PixelRect& a, const PixelRect& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {std::min(a.x0, b.x0), std::min(a.y0, b.y0), std::max(a.x1, b.x1), std::max(a.y1, b.y1)};
}

bool overlap_or_touch(const PixelRect& a, const PixelRect& b) {
  return a.x0 <= b.x1 && b.x0 <= a.x1 && a.y0 <= b.y1 && b.y0 <= a.y1;
}

// More rectangles than this are redrawn as their union: each one is a pass over the draw lists.
constexpr size_t kMostRectangles = 6;
// Damage over this share of the framebuffer is redrawn whole.
constexpr double kWholeFrameShare = 0.6;

}  // namespace

bool PresentedFrame::Triangle::operator==(const Triangle& other) const {
  if (texture != other.texture || texture_version != other.texture_version || state != other.state ||
      state_data != other.state_data || !same(clip, other.clip))
    return false;
  for (int corner = 0; corner < 3; ++corner) {
    const ImDrawVert &a = corners[corner], &b = other.corners[corner];
    if (!same(a.pos, b.pos) || !same(a.uv, b.uv) || a.col != b.col) return false;
  }
  return true;
}

bool PresentedFrame::Header::operator==(const Header& other) const {
  return width == other.width && height == other.height && same(clear_colour, other.clear_colour) &&
         same(display_pos, other.display_pos) && same(display_size, other.display_size) &&
         same(framebuffer_scale, other.framebuffer_scale);
}

bool PresentedFrame::differs(const ImDrawData& draw, int width, int height, const ImVec4& clear_colour,
                             uint64_t texture_pixels_version, const TextureVersion& texture_version) {
  next_texture_pixels_version_ = texture_pixels_version;
  next_header_ = {width, height, clear_colour, draw.DisplayPos, draw.DisplaySize, draw.FramebufferScale};
  next_.resize(size_t(std::max(draw.CmdListsCount, 0)));
  // The backend keeps a callback's GL state across lists until the next reset.
  ImDrawCallback state = nullptr;
  void* state_data = nullptr;
  for (int list = 0; list < draw.CmdListsCount; ++list) {
    const ImDrawList& commands = *draw.CmdLists[list];
    std::vector<Triangle>& triangles = next_[size_t(list)];
    triangles.clear();
    for (const ImDrawCmd& command : commands.CmdBuffer) {
      if (command.UserCallback) {
        state = command.UserCallback;
        state_data = command.UserCallbackData;
        continue;
      }
      Triangle triangle;
      triangle.texture = command.TextureId;
      triangle.texture_version = texture_version(command.TextureId);
      triangle.state = state;
      triangle.state_data = state_data;
      triangle.clip = command.ClipRect;
      const ImDrawIdx* indices = commands.IdxBuffer.Data + command.IdxOffset;
      const ImDrawVert* vertices = commands.VtxBuffer.Data + command.VtxOffset;
      for (unsigned first = 0; first + 3 <= command.ElemCount; first += 3) {
        for (int corner = 0; corner < 3; ++corner) triangle.corners[corner] = vertices[indices[first + corner]];
        triangles.push_back(triangle);
      }
    }
  }
  compute_damage();
  return !damage_.empty();
}

PixelRect PresentedFrame::pixels_of(const Triangle& triangle) const {
  const Header& frame = next_header_;
  float min_x = triangle.corners[0].pos.x, max_x = min_x, min_y = triangle.corners[0].pos.y, max_y = min_y;
  for (int corner = 1; corner < 3; ++corner) {
    min_x = std::min(min_x, triangle.corners[corner].pos.x);
    max_x = std::max(max_x, triangle.corners[corner].pos.x);
    min_y = std::min(min_y, triangle.corners[corner].pos.y);
    max_y = std::max(max_y, triangle.corners[corner].pos.y);
  }
  // One pixel of margin on the clip rectangle (the backend truncates it to whole pixels) and on
  // the box: a pixel whose centre lies on an edge belongs to either side.
  min_x = std::max(min_x, triangle.clip.x - 1.0f);
  min_y = std::max(min_y, triangle.clip.y - 1.0f);
  max_x = std::min(max_x, triangle.clip.z + 1.0f);
  max_y = std::min(max_y, triangle.clip.w + 1.0f);
  if (!(max_x > min_x && max_y > min_y)) return {};  // clipped away, no area, or NaN: draws nothing
  const auto to_pixels = [](float value, float origin, float scale) { return (value - origin) * scale; };
  PixelRect rect{int(std::floor(to_pixels(min_x, frame.display_pos.x, frame.framebuffer_scale.x))) - 1,
                 int(std::floor(to_pixels(min_y, frame.display_pos.y, frame.framebuffer_scale.y))) - 1,
                 int(std::ceil(to_pixels(max_x, frame.display_pos.x, frame.framebuffer_scale.x))) + 1,
                 int(std::ceil(to_pixels(max_y, frame.display_pos.y, frame.framebuffer_scale.y))) + 1};
  rect.x0 = std::max(rect.x0, 0);
  rect.y0 = std::max(rect.y0, 0);
  rect.x1 = std::min(rect.x1, frame.width);
  rect.y1 = std::min(rect.y1, frame.height);
  return rect;
}

void PresentedFrame::compute_damage() {
  damage_.clear();
  const PixelRect whole{0, 0, next_header_.width, next_header_.height};
  if (!presented_ || !(next_header_ == last_header_) || next_.size() != last_.size()) {
    if (!whole.empty()) damage_.push_back(whole);
    return;
  }
  // Per draw list, the triangles between the common beginning and the common end: a change in the
  // middle of a window (a slider's value, a longer text) leaves the rest of it in place. A pixel
  // outside every such triangle is covered by the same triangles in the same order as before.
  std::vector<PixelRect> rects;
  for (size_t list = 0; list < next_.size(); ++list) {
    const std::vector<Triangle>&old_list = last_[list], &new_list = next_[list];
    const size_t shorter = std::min(old_list.size(), new_list.size());
    size_t begin = 0;
    while (begin < shorter && old_list[begin] == new_list[begin]) ++begin;
    size_t end = 0;  // common triangles at the end, after `begin`
    while (end < shorter - begin && old_list[old_list.size() - 1 - end] == new_list[new_list.size() - 1 - end]) ++end;
    PixelRect changed;
    for (size_t i = begin; i < old_list.size() - end; ++i) changed = united(changed, pixels_of(old_list[i]));
    for (size_t i = begin; i < new_list.size() - end; ++i) changed = united(changed, pixels_of(new_list[i]));
    if (!changed.empty()) rects.push_back(changed);
  }
  // Overlapping or touching rectangles become one, until none are left to join.
  for (bool joined = true; joined;) {
    joined = false;
    for (size_t a = 0; a < rects.size() && !joined; ++a)
      for (size_t b = a + 1; b < rects.size() && !joined; ++b)
        if (overlap_or_touch(rects[a], rects[b])) {
          rects[a] = united(rects[a], rects[b]);
          rects.erase(rects.begin() + long(b));
          joined = true;
        }
  }
  if (rects.size() > kMostRectangles) {
    PixelRect all;
    for (const PixelRect& rect : rects) all = united(all, rect);
    rects = {all};
  }
  long long area = 0;
  for (const PixelRect& rect : rects) area += rect.area();
  // Parts are redrawn only where ImGui's units are the framebuffer's pixels (render_inside).
  const bool pixel_units = same(next_header_.display_pos, ImVec2(0, 0)) &&
                           same(next_header_.framebuffer_scale, ImVec2(1, 1)) &&
                           same(next_header_.display_size, ImVec2(float(whole.x1), float(whole.y1)));
  if (!rects.empty() && (!pixel_units || double(area) > kWholeFrameShare * double(whole.area()))) rects = {whole};
  damage_ = std::move(rects);
}

void PresentedFrame::presented() {
  last_.swap(next_);
  last_header_ = next_header_;
  texture_pixels_version_ = next_texture_pixels_version_;
  presented_ = true;
}

void PresentedFrame::render_inside(ImDrawData& draw, const PixelRect& rect, const std::function<void()>& render) {
  // Each command's new clip rectangle gives the backend's scissor box exactly: the box it computes
  // for the whole frame (it truncates to whole pixels) cut to `rect`, so a pixel inside `rect` is
  // drawn by the same commands as in a whole frame. Damage is partial only at scale 1 and origin 0
  // (compute_damage), where ImGui units are pixels.
  const int height = int(draw.DisplaySize.y);
  std::vector<ImVec4> kept;
  for (int list = 0; list < draw.CmdListsCount; ++list)
    for (ImDrawCmd& command : draw.CmdLists[list]->CmdBuffer) {
      kept.push_back(command.ClipRect);
      const ImVec4 clip = command.ClipRect;
      if (!(clip.z > clip.x && clip.w > clip.y)) continue;  // skipped by the backend as it is
      // The backend's box: glScissor(x, height - max_y, width, box_height), in whole pixels.
      const int x0 = int(clip.x), x1 = x0 + int(clip.z - clip.x);
      const int gl_y0 = int(float(height) - clip.w), gl_y1 = gl_y0 + int(clip.w - clip.y);
      const int cut_x0 = std::max(x0, rect.x0), cut_x1 = std::min(x1, rect.x1);
      const int cut_gl_y0 = std::max(gl_y0, height - rect.y1), cut_gl_y1 = std::min(gl_y1, height - rect.y0);
      if (cut_x1 <= cut_x0 || cut_gl_y1 <= cut_gl_y0) {
        command.ClipRect = ImVec4(0, 0, 0, 0);  // empty: skipped
        continue;
      }
      command.ClipRect = ImVec4(float(cut_x0), float(height - cut_gl_y1), float(cut_x1), float(height - cut_gl_y0));
    }
  render();
  size_t next = 0;
  for (int list = 0; list < draw.CmdListsCount; ++list)
    for (ImDrawCmd& command : draw.CmdLists[list]->CmdBuffer) command.ClipRect = kept[next++];
}

}  // namespace attnscope
