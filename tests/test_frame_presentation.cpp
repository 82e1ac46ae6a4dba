// Which frames the workbench draws (viewer/presented_frame.h, viewer/frame_pacing.h): a frame equal
// to the one on screen in its draw lists, size and textures is skipped; under a software rasteriser
// a frame with nothing new from the worker waits its turn while a forward shares the CPU, and comes
// at most 60 a second otherwise.
#include <gtest/gtest.h>
#include <imgui.h>

#include "viewer/frame_pacing.h"
#include "viewer/presented_frame.h"

namespace attnscope {

namespace {

// One window's draw list: a textured quad and, when `with_callback`, a callback command after it.
struct OneList {
  ImDrawList list{nullptr};
  ImDrawList* lists[1] = {&list};
  ImDrawData data;

  explicit OneList(ImU32 colour = 0xff00ff00, ImTextureID texture = reinterpret_cast<ImTextureID>(intptr_t(3))) {
    for (const ImVec2 corner : {ImVec2(10, 10), ImVec2(90, 10), ImVec2(90, 60), ImVec2(10, 60)})
      list.VtxBuffer.push_back(ImDrawVert{corner, ImVec2(corner.x / 100, corner.y / 100), colour});
    for (const ImDrawIdx index : {0, 1, 2, 0, 2, 3}) list.IdxBuffer.push_back(index);
    ImDrawCmd quad;
    quad.ClipRect = ImVec4(0, 0, 100, 100);
    quad.TextureId = texture;
    quad.ElemCount = 6;
    list.CmdBuffer.push_back(quad);
    data.Valid = true;
    data.CmdLists = lists;
    data.CmdListsCount = 1;
    data.TotalVtxCount = list.VtxBuffer.Size;
    data.TotalIdxCount = list.IdxBuffer.Size;
    data.DisplaySize = ImVec2(100, 100);
    data.FramebufferScale = ImVec2(1, 1);
  }
};

const ImVec4 kClear(0.1f, 0.1f, 0.1f, 1.0f);

}  // namespace

TEST(PresentedFrame, AFrameEqualToTheOneOnScreenIsSkipped) {
  PresentedFrame presented;
  OneList frame;
  EXPECT_TRUE(presented.differs(frame.data, 100, 100, kClear, 7));  // nothing on screen yet
  presented.presented();
  OneList same;
  EXPECT_FALSE(presented.differs(same.data, 100, 100, kClear, 7));
  EXPECT_FALSE(presented.textures_changed(7));
  // Each part that changes pixels makes it differ.
  EXPECT_TRUE(presented.differs(same.data, 101, 100, kClear, 7));              // the window's size
  EXPECT_TRUE(presented.differs(same.data, 100, 100, ImVec4(0, 0, 0, 1), 7));  // the clear colour
  EXPECT_TRUE(presented.differs(same.data, 100, 100, kClear, 8));              // a texture's pixels
  EXPECT_TRUE(presented.textures_changed(8));
  EXPECT_TRUE(presented.differs(OneList(0xff0000ff).data, 100, 100, kClear, 7));  // a vertex's colour
  const auto other_texture = reinterpret_cast<ImTextureID>(intptr_t(4));
  EXPECT_TRUE(presented.differs(OneList(0xff00ff00, other_texture).data, 100, 100, kClear, 7));
  OneList clipped;
  clipped.list.CmdBuffer[0].ClipRect.z = 50;
  EXPECT_TRUE(presented.differs(clipped.data, 100, 100, kClear, 7));
  OneList with_callback;
  ImDrawCmd callback;
  callback.UserCallback = ImDrawCallback_ResetRenderState;
  with_callback.list.CmdBuffer.push_back(callback);
  EXPECT_TRUE(presented.differs(with_callback.data, 100, 100, kClear, 7));
  // Compared against the frame presented last, not the last one looked at.
  EXPECT_FALSE(presented.differs(same.data, 100, 100, kClear, 7));
  // A frame drawn becomes the one compared against.
  EXPECT_TRUE(presented.differs(OneList(0xff0000ff).data, 100, 100, kClear, 8));
  presented.presented();
  EXPECT_FALSE(presented.differs(OneList(0xff0000ff).data, 100, 100, kClear, 8));
  EXPECT_TRUE(presented.differs(same.data, 100, 100, kClear, 8));
  // Pixels lost (the window uncovered): drawn again though nothing changed.
  presented.forget();
  EXPECT_TRUE(presented.differs(OneList(0xff0000ff).data, 100, 100, kClear, 8));
  EXPECT_TRUE(presented.textures_changed(8));
}

// Rendering takes at most a fifth of the time between frames that bring nothing new: a 10 ms frame
// is followed by one 40 ms after it at the earliest, a 3 ms one (60 Hz and cheaper) not held back.
// A result expected within one more such wait is waited for; an overdue one is not.
TEST(SharedCoresPace, RenderingHasAtMostAFifthOfTheTime) {
  const double unknown = 0.0;
  SharedCoresPace pace;
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(0.0, unknown), 0.0);  // nothing drawn yet
  pace.drawn(1.000, 1.010);
  EXPECT_NEAR(pace.wait_before_drawing(1.010, unknown), 0.040, 1e-12);
  EXPECT_NEAR(pace.wait_before_drawing(1.030, unknown), 0.020, 1e-12);
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(1.050, unknown), 0.0);
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(2.0, unknown), 0.0);
  // The result due 30 ms after the wait ends (within the next 40): the frame waits for it.
  EXPECT_NEAR(pace.wait_before_drawing(1.030, 1.080), 0.020, 1e-12);  // first the pace's own wait
  EXPECT_NEAR(pace.wait_before_drawing(1.050, 1.080), 0.030, 1e-12);
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(1.050, 1.200), 0.0);  // too far off: drawn now
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(1.090, 1.080), 0.0);  // late: not waited for again
  pace.drawn(2.000, 2.003);
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(2.003 + 1.0 / 60, unknown), 0.0);
  EXPECT_DOUBLE_EQ(SharedCoresPace::kMostRenderingShare, 0.2);
}

// With no run, frames with nothing new come at most 60 a second, counted from each drawn frame's
// start, as a display's vsync would pace them.
TEST(SharedCoresPace, SixtyFramesASecondWithNoRun) {
  SharedCoresPace pace;
  EXPECT_DOUBLE_EQ(pace.wait_for_frame_interval(0.5), 0.0);
  pace.drawn(1.000, 1.010);
  EXPECT_NEAR(pace.wait_for_frame_interval(1.010), 1.0 / 60 - 0.010, 1e-12);
  EXPECT_DOUBLE_EQ(pace.wait_for_frame_interval(1.0 + 1.0 / 60), 0.0);
  pace.drawn(2.000, 2.030);  // a frame longer than the interval: the next one at once
  EXPECT_DOUBLE_EQ(pace.wait_for_frame_interval(2.030), 0.0);
}

}  // namespace attnscope
