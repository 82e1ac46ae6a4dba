// Which frames the workbench draws (viewer/presented_frame.h, viewer/frame_pacing.h): a frame equal
// to the one on screen in its draw lists, size and textures is skipped; under a software rasteriser
// a frame with nothing new from the worker waits its turn while a forward shares the CPU, and comes
// at most 60 a second otherwise.
#include <gtest/gtest.h>
#include <imgui.h>

#include <memory>
#include <vector>

#include "viewer/frame_pacing.h"
#include "viewer/presented_frame.h"

namespace attnscope {

namespace {

// Quads (two triangles each) in window draw lists, one command per quad.
struct Quad {
  ImVec2 min, max;
  ImU32 colour = 0xff00ff00;
  ImTextureID texture = reinterpret_cast<ImTextureID>(intptr_t(3));
};

void add_quad(ImDrawList& list, const Quad& quad) {
  const auto first = ImDrawIdx(list.VtxBuffer.Size);
  for (const ImVec2 corner : {quad.min, ImVec2(quad.max.x, quad.min.y), quad.max, ImVec2(quad.min.x, quad.max.y)})
    list.VtxBuffer.push_back(ImDrawVert{corner, ImVec2(corner.x / 100, corner.y / 100), quad.colour});
  ImDrawCmd command;
  command.ClipRect = ImVec4(0, 0, 200, 200);
  command.TextureId = quad.texture;
  command.IdxOffset = unsigned(list.IdxBuffer.Size);
  command.ElemCount = 6;
  for (const int index : {0, 1, 2, 0, 2, 3}) list.IdxBuffer.push_back(ImDrawIdx(first + index));
  list.CmdBuffer.push_back(command);
}

// A 200 x 200 frame of windows, each a list of quads.
struct Frame {
  std::vector<std::unique_ptr<ImDrawList>> lists;
  std::vector<ImDrawList*> pointers;
  ImDrawData data;

  explicit Frame(const std::vector<std::vector<Quad>>& windows) {
    for (const auto& quads : windows) {
      lists.push_back(std::make_unique<ImDrawList>(nullptr));
      for (const Quad& quad : quads) add_quad(*lists.back(), quad);
      pointers.push_back(lists.back().get());
    }
    data.Valid = true;
    data.CmdLists = pointers.data();
    data.CmdListsCount = int(pointers.size());
    data.DisplaySize = ImVec2(200, 200);
    data.FramebufferScale = ImVec2(1, 1);
  }
  ImDrawList& list(int index) { return *lists[size_t(index)]; }
};

const ImVec4 kClear(0.1f, 0.1f, 0.1f, 1.0f);
const Quad kLeft{ImVec2(10, 10), ImVec2(90, 60)};
const Quad kRight{ImVec2(100, 100), ImVec2(150, 150)};

Quad recoloured(Quad quad, ImU32 colour) {
  quad.colour = colour;
  return quad;
}

// Texture versions as gl::texture_pixels_version gives them: texture 3 at `version`, others never.
struct Versions {
  uint64_t version = 7;
  PresentedFrame::TextureVersion lookup() const {
    return [this](ImTextureID texture) { return texture == reinterpret_cast<ImTextureID>(intptr_t(3)) ? version : 0; };
  }
};

}  // namespace

TEST(PresentedFrame, AFrameEqualToTheOneOnScreenIsSkipped) {
  PresentedFrame presented;
  Versions versions;
  const auto differs = [&](Frame&& frame, int width = 200, const ImVec4& clear = kClear) {
    return presented.differs(frame.data, width, 200, clear, versions.version, versions.lookup());
  };
  const auto one = [](const Quad& quad) { return Frame({{quad}}); };
  EXPECT_TRUE(differs(one(kLeft)));  // nothing on screen yet
  presented.presented();
  EXPECT_FALSE(differs(one(kLeft)));
  EXPECT_TRUE(presented.damage().empty());
  EXPECT_FALSE(presented.textures_changed(7));
  // Each part that changes pixels makes it differ.
  EXPECT_TRUE(differs(one(kLeft), 201));                      // the window's size
  EXPECT_TRUE(differs(one(kLeft), 200, ImVec4(0, 0, 0, 1)));  // the clear colour
  versions.version = 8;
  EXPECT_TRUE(differs(one(kLeft)));  // the texture's pixels
  EXPECT_TRUE(presented.textures_changed(8));
  versions.version = 7;
  EXPECT_TRUE(differs(one(recoloured(kLeft, 0xff0000ff))));  // a vertex's colour
  Quad other_texture = kLeft;
  other_texture.texture = reinterpret_cast<ImTextureID>(intptr_t(4));
  EXPECT_TRUE(differs(one(other_texture)));
  Frame clipped = one(kLeft);
  clipped.list(0).CmdBuffer[0].ClipRect.z = 50;
  EXPECT_TRUE(differs(std::move(clipped)));
  // The same quad drawn after a callback (blending off) is drawn in another state.
  Frame after_callback(std::vector<std::vector<Quad>>(1));
  ImDrawCmd callback;
  callback.UserCallback = ImDrawCallback_ResetRenderState;
  after_callback.list(0).CmdBuffer.push_back(callback);
  add_quad(after_callback.list(0), kLeft);
  EXPECT_TRUE(differs(std::move(after_callback)));
  // Compared against the frame presented last, not the last one looked at.
  EXPECT_FALSE(differs(one(kLeft)));
  // A frame drawn becomes the one compared against.
  EXPECT_TRUE(differs(one(recoloured(kLeft, 0xff0000ff))));
  presented.presented();
  EXPECT_FALSE(differs(one(recoloured(kLeft, 0xff0000ff))));
  EXPECT_TRUE(differs(one(kLeft)));
  // Pixels lost (the window uncovered): drawn again though nothing changed.
  presented.forget();
  EXPECT_TRUE(differs(one(recoloured(kLeft, 0xff0000ff))));
  EXPECT_TRUE(presented.textures_changed(8));
}

// A frame's damage is the bounding boxes, old and new, of the triangles that changed, with a pixel
// of margin; the rest is drawn by the same triangles in the same order as on screen.
TEST(PresentedFrame, OnlyWhatChangedIsRedrawn) {
  PresentedFrame presented;
  Versions versions;
  const PixelRect whole{0, 0, 200, 200};
  const auto damage_over = [&](Frame&& shown, Frame&& next) {
    presented.forget();
    presented.differs(shown.data, 200, 200, kClear, 1, versions.lookup());
    EXPECT_EQ(presented.damage(), std::vector<PixelRect>{whole});  // nothing on screen: all of it
    presented.presented();
    presented.differs(next.data, 200, 200, kClear, 1, versions.lookup());
    return presented.damage();
  };
  const PixelRect left{9, 9, 91, 61}, right{99, 99, 151, 151};
  // One window's quad recoloured: its box alone.
  EXPECT_EQ(damage_over(Frame({{kLeft}, {kRight}}), Frame({{kLeft}, {recoloured(kRight, 0xff0000ff)}})),
            std::vector<PixelRect>{right});
  // A texture's new pixels: what it covers.
  Quad other_texture = kRight;
  other_texture.texture = reinterpret_cast<ImTextureID>(intptr_t(4));
  presented.forget();
  Frame shown({{kLeft}, {other_texture}});
  presented.differs(shown.data, 200, 200, kClear, 1, versions.lookup());
  presented.presented();
  versions.version = 8;
  presented.differs(shown.data, 200, 200, kClear, 2, versions.lookup());
  EXPECT_EQ(presented.damage(), std::vector<PixelRect>{left});
  // A quad inserted in the middle of a window (a longer text): its box, not what follows it.
  const Quad a{ImVec2(10, 100), ImVec2(20, 110)}, b{ImVec2(30, 100), ImVec2(40, 110)},
      c{ImVec2(50, 100), ImVec2(60, 110)}, inserted{ImVec2(10, 120), ImVec2(20, 130)};
  EXPECT_EQ(damage_over(Frame({{a, b, c}}), Frame({{a, inserted, b, c}})),
            (std::vector<PixelRect>{PixelRect{9, 119, 21, 131}}));
  // Changes in two windows: two rectangles; overlapping ones become one.
  EXPECT_EQ(damage_over(Frame({{kLeft}, {kRight}}), Frame({{recoloured(kLeft, 1)}, {recoloured(kRight, 1)}})),
            (std::vector<PixelRect>{left, right}));
  const Quad near_right{ImVec2(140, 140), ImVec2(160, 160)};
  EXPECT_EQ(damage_over(Frame({{kRight}, {near_right}}), Frame({{recoloured(kRight, 1)}, {recoloured(near_right, 1)}})),
            (std::vector<PixelRect>{PixelRect{99, 99, 161, 161}}));
  // A quad that moved: where it was and where it is.
  const Quad moved{ImVec2(10, 150), ImVec2(20, 160)};
  EXPECT_EQ(damage_over(Frame({{a}}), Frame({{moved}})), (std::vector<PixelRect>{PixelRect{9, 99, 21, 161}}));
  // Windows added or reordered, or most of the frame changed: all of it.
  EXPECT_EQ(damage_over(Frame({{kLeft}}), Frame({{kLeft}, {kRight}})), std::vector<PixelRect>{whole});
  const Quad large{ImVec2(0, 0), ImVec2(180, 180)};
  EXPECT_EQ(damage_over(Frame({{large}}), Frame({{recoloured(large, 1)}})), std::vector<PixelRect>{whole});
  // Clipped away entirely: no pixels change.
  Frame hidden({{kLeft}});
  hidden.list(0).CmdBuffer[0].ClipRect = ImVec4(150, 150, 200, 200);
  Frame hidden_recoloured({{recoloured(kLeft, 1)}});
  hidden_recoloured.list(0).CmdBuffer[0].ClipRect = ImVec4(150, 150, 200, 200);
  EXPECT_TRUE(damage_over(std::move(hidden), std::move(hidden_recoloured)).empty());
}

// Inside a damage rectangle, each command is clipped to exactly the pixels the backend's scissor
// box gives it in a whole frame (the backend truncates a clip rectangle to whole pixels); after
// rendering, the clip rectangles are as ImGui made them.
TEST(PresentedFrame, RenderingInsideARectangleClipsAsTheBackend) {
  Frame frame({{kLeft, kRight}});
  frame.list(0).CmdBuffer[0].ClipRect = ImVec4(10.5f, 20.25f, 100.7f, 80.9f);
  frame.list(0).CmdBuffer[1].ClipRect = ImVec4(100, 100, 150, 150);
  std::vector<ImVec4> seen;
  PresentedFrame::render_inside(frame.data, PixelRect{50, 0, 80, 200}, [&] {
    for (const ImDrawCmd& command : frame.list(0).CmdBuffer) seen.push_back(command.ClipRect);
  });
  ASSERT_EQ(seen.size(), 2u);
  // The backend's box for the first: x 10 + int(90.2) = [10, 100); GL rows int(200 - 80.9) = 119,
  // plus int(60.65) = [119, 179), rows [21, 81) from the top. Cut to x [50, 80).
  EXPECT_EQ(seen[0].x, 50.0f);
  EXPECT_EQ(seen[0].y, 21.0f);
  EXPECT_EQ(seen[0].z, 80.0f);
  EXPECT_EQ(seen[0].w, 81.0f);
  EXPECT_FALSE(seen[1].z > seen[1].x);  // outside the rectangle: skipped
  EXPECT_EQ(frame.list(0).CmdBuffer[0].ClipRect.x, 10.5f);
  EXPECT_EQ(frame.list(0).CmdBuffer[1].ClipRect.z, 150.0f);
}

// Rendering takes at most a fifth of the time between frames that bring nothing new, and they come
// 40 ms apart at least: a 10 ms frame is followed by one 40 ms after it at the earliest, and so is
// a 3 ms one.
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
  // A cheap frame (redrawn in parts) still waits 40 ms: the next one 40 ms after it ended.
  pace.drawn(2.000, 2.003);
  EXPECT_NEAR(pace.wait_before_drawing(2.003 + 1.0 / 60, unknown), 0.040 - 1.0 / 60, 1e-12);
  EXPECT_DOUBLE_EQ(pace.wait_before_drawing(2.043, unknown), 0.0);
  EXPECT_NEAR(pace.wait_before_drawing(2.020, 2.070), 0.023, 1e-12);  // the pace's own wait, then
  EXPECT_NEAR(pace.wait_before_drawing(2.043, 2.070), 0.027, 1e-12);  // the result, due within 40 ms
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
