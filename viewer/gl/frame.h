// The window's framebuffer from the main thread: clearing it before ImGui draws, reading what it
// shows back as an RGB image (screenshots), waiting until GL has drawn (benchmarks).
#pragma once

#include <functional>
#include <opencv2/core.hpp>

namespace attnscope::gl {

void clear_frame(int width, int height, float red, float green, float blue);
// Clears the part [x0, x1) x [y0, y1) alone, rows counted from the top.
void clear_frame_part(int width, int height, float red, float green, float blue, int x0, int y0, int x1, int y1);

// Whether the back buffer still holds the frame just swapped after each swap, so a frame may
// redraw only what changed over it: tried with three swaps of one corner pixel in alternating
// colours (`swap` swaps the window's buffers). GLX leaves it undefined; Mesa's software
// rasteriser on X keeps it. A single-buffered window draws into what it shows and keeps it anyway.
bool swap_keeps_back_buffer(const std::function<void()>& swap);

// Whether the current context rasterises on the CPU (Mesa's llvmpipe or softpipe, SwiftShader):
// its frames then take the cores a forward runs on.
bool renders_on_cpu();

// The front buffer's pixels, top row first, 8-bit RGB: what the window shows.
cv::Mat read_frame_rgb(int width, int height);

// Blocks until the GPU has executed every command issued so far.
void finish();

}  // namespace attnscope::gl
