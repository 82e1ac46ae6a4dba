#include "viewer/gl/frame.h"

#include <opencv2/core.hpp>
#include <string>

#include "viewer/gl/gl_api.h"

namespace attnscope::gl {

void clear_frame(int width, int height, float red, float green, float blue) {
  glViewport(0, 0, width, height);
  glClearColor(red, green, blue, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
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
