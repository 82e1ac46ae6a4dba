#include "viewer/gl/overlay_renderer.h"
#include "core/colormap_image.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "viewer/gl/gl_api.h"
#include "viewer/gl/shader_sources.h"

namespace attnscope::gl {

namespace {

unsigned compile_shader(GLenum kind, const std::string& file) {
  const char* source = shader_source(file);
  if (!source) throw std::runtime_error("shader " + file + " was not embedded in this build");
  const unsigned shader = glCreateShader(kind);
  glShaderSource(shader, 1, &source, nullptr);
  glCompileShader(shader);
  GLint ok = 0;
  glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char log[2048] = {};
    glGetShaderInfoLog(shader, sizeof(log), nullptr, log);
    glDeleteShader(shader);
    throw std::runtime_error("shader " + file + " does not compile: " + log);
  }
  return shader;
}

unsigned link_program(const std::string& vertex_file, const std::string& fragment_file) {
  const unsigned vertex = compile_shader(GL_VERTEX_SHADER, vertex_file);
  const unsigned fragment = compile_shader(GL_FRAGMENT_SHADER, fragment_file);
  const unsigned program = glCreateProgram();
  glAttachShader(program, vertex);
  glAttachShader(program, fragment);
  glLinkProgram(program);
  glDeleteShader(vertex);
  glDeleteShader(fragment);
  GLint ok = 0;
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  if (!ok) {
    char log[2048] = {};
    glGetProgramInfoLog(program, sizeof(log), nullptr, log);
    glDeleteProgram(program);
    throw std::runtime_error("shader program " + fragment_file + " does not link: " + log);
  }
  return program;
}

}  // namespace

RenderTarget::~RenderTarget() {
  if (framebuffer_) glDeleteFramebuffers(1, &framebuffer_);
  if (texture_) glDeleteTextures(1, &texture_);
}

RenderTarget::RenderTarget(RenderTarget&& other) noexcept { *this = std::move(other); }

RenderTarget& RenderTarget::operator=(RenderTarget&& other) noexcept {
  std::swap(framebuffer_, other.framebuffer_);
  std::swap(texture_, other.texture_);
  std::swap(width_, other.width_);
  std::swap(height_, other.height_);
  std::swap(content_, other.content_);
  return *this;
}

void RenderTarget::resize(int width, int height) {
  width = std::max(width, 1);
  height = std::max(height, 1);
  if (framebuffer_ && width == width_ && height == height_) return;
  if (!framebuffer_) {
    glGenFramebuffers(1, &framebuffer_);
    glGenTextures(1, &texture_);
  }
  glBindTexture(GL_TEXTURE_2D, texture_);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  GLint previous = 0;
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &previous);
  glBindFramebuffer(GL_FRAMEBUFFER, framebuffer_);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture_, 0);
  const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  glBindFramebuffer(GL_FRAMEBUFFER, GLuint(previous));
  if (status != GL_FRAMEBUFFER_COMPLETE) throw std::runtime_error("offscreen framebuffer is incomplete");
  width_ = width;
  height_ = height;
  content_.clear();
  texture_pixels_changed(texture_);
}

OverlayRenderer::OverlayRenderer() {
  program_ = link_program("fullscreen.vert.glsl", "attention_overlay.frag.glsl");
  glGenVertexArrays(1, &vertex_array_);  // core profile draws need one bound, even without attributes
}

OverlayRenderer::~OverlayRenderer() {
  if (vertex_array_) glDeleteVertexArrays(1, &vertex_array_);
  if (program_) glDeleteProgram(program_);
}

const Texture& OverlayRenderer::colormap_table(Colormap colormap) {
  auto found = tables_.find(colormap);
  if (found != tables_.end()) return found->second;
  Texture table;
  table.upload_rgb(attnscope::colormap_table(colormap).reshape(3, 1));  // 256 x 1
  glBindTexture(GL_TEXTURE_2D, table.name());
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);  // exact entries, no blending
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  return tables_.emplace(colormap, std::move(table)).first->second;
}

void OverlayRenderer::render(RenderTarget& target, const Texture* image, const Texture& values, const ValueScale& scale,
                             float opacity, OverlayAlpha alpha) {
  const Texture& table = colormap_table(scale.colormap);
  const bool alpha_follows_value = alpha == OverlayAlpha::Value;
  char content[200];  // exact (hex) floats: a tiny change of scale must re-render
  std::snprintf(content, sizeof(content), "%llu|%llu|%d|%a|%a|%d%d|%a|%d",
                static_cast<unsigned long long>(image ? image->version() : 0),
                static_cast<unsigned long long>(values.version()), int(scale.colormap), scale.vmin, scale.vmax,
                int(scale.log), int(scale.diverging), double(opacity), int(alpha_follows_value));
  if (content == target.content_) return;
  target.content_ = content;
  texture_pixels_changed(target.texture_);
  GLint previous_framebuffer = 0, previous_program = 0, previous_vertex_array = 0, previous_texture = 0;
  GLint previous_active = 0, viewport[4] = {};
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &previous_framebuffer);
  glGetIntegerv(GL_CURRENT_PROGRAM, &previous_program);
  glGetIntegerv(GL_VERTEX_ARRAY_BINDING, &previous_vertex_array);
  glGetIntegerv(GL_ACTIVE_TEXTURE, &previous_active);
  glGetIntegerv(GL_VIEWPORT, viewport);
  const GLboolean blend = glIsEnabled(GL_BLEND), scissor = glIsEnabled(GL_SCISSOR_TEST);

  glBindFramebuffer(GL_FRAMEBUFFER, target.framebuffer());
  glViewport(0, 0, target.width(), target.height());
  glDisable(GL_BLEND);
  glDisable(GL_SCISSOR_TEST);
  glUseProgram(program_);
  glBindVertexArray(vertex_array_);
  const unsigned textures[3] = {image ? image->name() : values.name(), values.name(), table.name()};
  const char* samplers[3] = {"image", "values", "colormap"};
  glActiveTexture(GL_TEXTURE0);
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &previous_texture);
  for (int unit = 0; unit < 3; ++unit) {
    glActiveTexture(GL_TEXTURE0 + unit);
    glBindTexture(GL_TEXTURE_2D, textures[unit]);
    glUniform1i(glGetUniformLocation(program_, samplers[unit]), unit);
  }
  glUniform1f(glGetUniformLocation(program_, "vmin"), float(scale.vmin));
  glUniform1f(glGetUniformLocation(program_, "vmax"), float(scale.vmax));
  glUniform1i(glGetUniformLocation(program_, "log_scale"), scale.log ? 1 : 0);
  glUniform1i(glGetUniformLocation(program_, "diverging"), scale.diverging ? 1 : 0);
  glUniform1f(glGetUniformLocation(program_, "opacity"), opacity);
  glUniform1i(glGetUniformLocation(program_, "alpha_follows_value"), alpha_follows_value ? 1 : 0);
  glUniform1i(glGetUniformLocation(program_, "has_image"), image ? 1 : 0);
  glDrawArrays(GL_TRIANGLES, 0, 3);

  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_2D, GLuint(previous_texture));
  glActiveTexture(GLenum(previous_active));
  glBindVertexArray(GLuint(previous_vertex_array));
  glUseProgram(GLuint(previous_program));
  glBindFramebuffer(GL_FRAMEBUFFER, GLuint(previous_framebuffer));
  glViewport(viewport[0], viewport[1], viewport[2], viewport[3]);
  if (blend) glEnable(GL_BLEND);
  if (scissor) glEnable(GL_SCISSOR_TEST);
}

}  // namespace attnscope::gl
