#include "viewer/gl/texture.h"

#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "viewer/gl/gl_api.h"

namespace attnscope::gl {

namespace {
// Textures live on the main thread only.
uint64_t pixels_counter = 0;
std::unordered_map<unsigned, uint64_t> pixels_versions;  // by GL name
}  // namespace

uint64_t texture_pixels_version() { return pixels_counter; }

uint64_t texture_pixels_version(ImTextureID texture) {
  const auto found = pixels_versions.find(unsigned(reinterpret_cast<intptr_t>(texture)));
  return found == pixels_versions.end() ? 0 : found->second;
}

void texture_pixels_changed(unsigned name) { pixels_versions[name] = ++pixels_counter; }

Texture::~Texture() {
  if (name_) {
    glDeleteTextures(1, &name_);
    pixels_versions.erase(name_);  // GL may give the name to a new texture: it starts a new version
  }
}

Texture::Texture(Texture&& other) noexcept { *this = std::move(other); }

Texture& Texture::operator=(Texture&& other) noexcept {
  std::swap(name_, other.name_);
  std::swap(width_, other.width_);
  std::swap(height_, other.height_);
  std::swap(internal_format_, other.internal_format_);
  std::swap(version_, other.version_);
  return *this;
}

void Texture::ensure(int width, int height, int internal_format, int filter) {
  if (!name_) glGenTextures(1, &name_);
  glBindTexture(GL_TEXTURE_2D, name_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, filter);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, filter);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  width_ = width;
  height_ = height;
  internal_format_ = internal_format;
  texture_pixels_changed(name_);
  version_ = texture_pixels_version();
}

void Texture::upload_rgb(const cv::Mat& rgb) {
  if (rgb.type() != CV_8UC3) throw std::invalid_argument("Texture::upload_rgb expects 8-bit RGB");
  const cv::Mat packed = rgb.isContinuous() ? rgb : rgb.clone();
  ensure(packed.cols, packed.rows, GL_RGB8, GL_LINEAR);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);  // rows of 3-byte pixels are not 4-byte aligned
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, packed.cols, packed.rows, 0, GL_RGB, GL_UNSIGNED_BYTE, packed.data);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
}

void Texture::upload_rgba(const float* rgba, int width, int height) {
  ensure(width, height, GL_RGBA32F, GL_NEAREST);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA32F, width, height, 0, GL_RGBA, GL_FLOAT, rgba);
}

void opaque_image(ImTextureID texture, ImVec2 size, ImVec2 uv0, ImVec2 uv1) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glDisable(GL_BLEND); }, nullptr);
  ImGui::Image(texture, size, uv0, uv1);
  draw->AddCallback(ImDrawCallback_ResetRenderState, nullptr);  // the backend's state, blending on
}

}  // namespace attnscope::gl
