#include "viewer/gl/frame.h"

#include <opencv2/core.hpp>
#include <string>

#include "viewer/gl/gl_api.h"

namespace attnscope::gl {

void clear_frame(int width, int height, float red, float green, float blue) {
  clear_frame_part(width, height, red, green, blue, 0, 0, width, height);
}

void clear_frame_part(int width, int height, float red, float green, float blue, int x0, int y0, int x1, int y1) {
  glViewport(0, 0, width, height);
  glEnable(GL_SCISSOR_TEST);
  glScissor(x0, height - y1, x1 - x0, y1 - y0);
  glClearColor(red, green, blue, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  glDisable(GL_SCISSOR_TEST);
}

bool swap_keeps_back_buffer(const std::function<void()>& swap) {
  GLint buffer = 0;
  glGetIntegerv(GL_DRAW_BUFFER, &buffer);
  if (buffer != GL_BACK && buffer != GL_BACK_LEFT) return false;  // single-buffered: not this question
  bool kept = true;
  glEnable(GL_SCISSOR_TEST);
  glScissor(0, 0, 1, 1);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  for (int round = 0; round < 3 && kept; ++round) {
    const unsigned char red = round % 2 ? 0 : 255;
    glClearColor(red / 255.0f, 0.0f, 1.0f - red / 255.0f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    swap();
    unsigned char pixel[3] = {};
    glReadPixels(0, 0, 1, 1, GL_RGB, GL_UNSIGNED_BYTE, pixel);
    kept = pixel[0] == red && pixel[2] == 255 - red;
  }
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glDisable(GL_SCISSOR_TEST);
  return kept;
}

bool renders_on_cpu() {
  const auto* renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  if (!renderer) return false;
  const std::string name(renderer);
  for (const char* software : {"llvmpipe", "softpipe", "Software Rasterizer", "SWR", "SwiftShader"})
    if (name.find(software) != std::string::npos) return true;
  return false;
}

cv::Mat read_frame_rgb(int width, int height) {
  cv::Mat bottom_up(height, width, CV_8UC3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_FRONT);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, bottom_up.data);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  cv::Mat top_down;
  cv::flip(bottom_up, top_down, 0);  // GL rows start at the bottom
  return top_down;
}

void finish() { glFinish(); }

}  // namespace attnscope::gl
