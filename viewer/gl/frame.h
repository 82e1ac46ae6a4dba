// The window's framebuffer from the main thread: clearing it before ImGui draws, reading what it
// shows back as an RGB image (screenshots), waiting until GL has drawn (benchmarks).
#pragma once

#include <opencv2/core.hpp>

namespace attnscope::gl {

void clear_frame(int width, int height, float red, float green, float blue);

// Whether the current context rasterises on the CPU (Mesa's llvmpipe or softpipe, SwiftShader):
// its frames then take the cores a forward runs on.
bool renders_on_cpu();

// The front buffer's pixels, top row first, 8-bit RGB: what the window shows.
cv::Mat read_frame_rgb(int width, int height);

// Blocks until the GPU has executed every command issued so far.
void finish();

}  // namespace attnscope::gl
