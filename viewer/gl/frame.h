// The window's framebuffer from the main thread: clearing it before ImGui draws, and reading it
// back as an RGB image (for screenshots and for benchmarks that wait until pixels are really drawn).
#pragma once

#include <opencv2/core.hpp>

namespace attnscope::gl {

void clear_frame(int width, int height, float red, float green, float blue);

// The back buffer's pixels, top row first, 8-bit RGB.
cv::Mat read_frame_rgb(int width, int height);

// Blocks until the GPU has executed every command issued so far.
void finish();

}  // namespace attnscope::gl
