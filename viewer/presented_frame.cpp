#include "viewer/presented_frame.h"

#include <cstring>

namespace attnscope {

namespace {

template <class T>
void append(std::vector<unsigned char>& record, const T& value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
  record.insert(record.end(), bytes, bytes + sizeof(T));
}

void append_bytes(std::vector<unsigned char>& record, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  record.insert(record.end(), bytes, bytes + size);
}

}  // namespace

bool PresentedFrame::differs(const ImDrawData& draw, int width, int height, const ImVec4& clear_colour,
                             uint64_t texture_pixels_version) {
  // Field by field, not whole commands: their padding bytes would make equal frames differ. A
  // vertex (two ImVec2 and a colour) has none.
  static_assert(sizeof(ImDrawVert) == 2 * sizeof(ImVec2) + sizeof(ImU32), "ImDrawVert is padded");
  next_.clear();
  next_texture_pixels_version_ = texture_pixels_version;
  append(next_, width);
  append(next_, height);
  append(next_, clear_colour);
  append(next_, texture_pixels_version);
  append(next_, draw.DisplayPos);
  append(next_, draw.DisplaySize);
  append(next_, draw.FramebufferScale);
  append(next_, draw.CmdListsCount);
  for (int list = 0; list < draw.CmdListsCount; ++list) {
    const ImDrawList& commands = *draw.CmdLists[list];
    append(next_, commands.CmdBuffer.Size);
    for (const ImDrawCmd& command : commands.CmdBuffer) {
      append(next_, command.ClipRect);
      append(next_, command.TextureId);
      append(next_, command.VtxOffset);
      append(next_, command.IdxOffset);
      append(next_, command.ElemCount);
      append(next_, reinterpret_cast<uintptr_t>(command.UserCallback));
      append(next_, command.UserCallbackData);
    }
    append(next_, commands.VtxBuffer.Size);
    append_bytes(next_, commands.VtxBuffer.Data, sizeof(ImDrawVert) * size_t(commands.VtxBuffer.Size));
    append(next_, commands.IdxBuffer.Size);
    append_bytes(next_, commands.IdxBuffer.Data, sizeof(ImDrawIdx) * size_t(commands.IdxBuffer.Size));
  }
  return !presented_ || next_.size() != last_.size() || std::memcmp(next_.data(), last_.data(), next_.size()) != 0;
}

void PresentedFrame::presented() {
  last_.swap(next_);
  texture_pixels_version_ = next_texture_pixels_version_;
  presented_ = true;
}

}  // namespace attnscope
