#include "viewer/gl/overlay_renderer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/value_overlay.h"
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

OverlayView::~OverlayView() {
  if (stand_in_) glDeleteTextures(1, &stand_in_);
}

OverlayView::OverlayView(OverlayView&& other) noexcept { *this = std::move(other); }

OverlayView& OverlayView::operator=(OverlayView&& other) noexcept {
  std::swap(stand_in_, other.stand_in_);
  std::swap(inputs_, other.inputs_);
  std::swap(content_, other.content_);
  std::swap(cells_, other.cells_);
  return *this;
}

OverlayRenderer::OverlayRenderer() {
  // Linked here so a shader that does not compile or link fails at start; relinked with the
  // backend's attribute locations at the first draw (linked_program).
  program_ = link_program("overlay_quad.vert.glsl", "attention_overlay.frag.glsl");
}

OverlayRenderer::~OverlayRenderer() {
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

void MapValues::assign(const float* values, int width, int height) {
  values_.assign(values, values + size_t(std::max(width, 0)) * size_t(std::max(height, 0)));
  width_ = width;
  height_ = height;
  static uint64_t assigned = 0;  // main thread only, as every texture
  version_ = ++assigned;
}

void OverlayRenderer::draw(OverlayView& view, const Texture* image, const MapValues& values, const ValueScale& scale,
                           float opacity, OverlayAlpha alpha, ImVec2 size, ImVec2 uv0, ImVec2 uv1) {
  if (!view.stand_in_) {
    glGenTextures(1, &view.stand_in_);
    glBindTexture(GL_TEXTURE_2D, view.stand_in_);
    const unsigned char black[4] = {0, 0, 0, 255};
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, 1, 1, 0, GL_RGBA, GL_UNSIGNED_BYTE, black);
    view.inputs_ = std::make_unique<OverlayView::Inputs>();
  }
  char content[200];  // exact (hex) floats: a tiny change of scale is a change of pixels
  std::snprintf(content, sizeof(content), "%llu|%llu|%d|%a|%a|%d%d|%a|%d",
                static_cast<unsigned long long>(image ? image->version() : 0),
                static_cast<unsigned long long>(values.version()), int(scale.colormap), scale.vmin, scale.vmax,
                int(scale.log), int(scale.diverging), double(opacity), int(alpha));
  if (content != view.content_) {
    view.content_ = content;
    const ValueGrid grid{values.values().data(), values.height(), values.width()};
    const std::vector<float> cells = colour_and_weight_values(grid, scale, opacity, alpha);
    view.cells_.upload_rgba(cells.data(), values.width(), values.height());
    texture_pixels_changed(view.stand_in_);
  }
  OverlayView::Inputs& inputs = *view.inputs_;
  inputs.renderer = this;
  inputs.has_image = image != nullptr;
  inputs.image = image ? image->name() : view.cells_.name();
  inputs.cells = view.cells_.name();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddCallback(&OverlayRenderer::use_program, view.inputs_.get());
  ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(view.stand_in_)), size, uv0, uv1);
  draw->AddCallback(ImDrawCallback_ResetRenderState, nullptr);  // the backend's program and state
}

void OverlayRenderer::use_program(const ImDrawList*, const ImDrawCmd* command) {
  const auto& inputs = *static_cast<const OverlayView::Inputs*>(command->UserCallbackData);
  inputs.renderer->bind(inputs);
}

unsigned OverlayRenderer::linked_program(unsigned backend_program) {
  if (backend_program == linked_for_) return program_;
  const GLint position = glGetAttribLocation(backend_program, "Position"),
              uv = glGetAttribLocation(backend_program, "UV");
  if (position < 0 || uv < 0) return 0;
  glBindAttribLocation(program_, GLuint(position), "Position");
  glBindAttribLocation(program_, GLuint(uv), "UV");
  glLinkProgram(program_);  // the same shaders, which linked at construction
  GLint ok = 0;
  glGetProgramiv(program_, GL_LINK_STATUS, &ok);
  if (!ok) return 0;
  linked_for_ = backend_program;
  return program_;
}

void OverlayRenderer::bind(const OverlayView::Inputs& inputs) {
  GLint backend = 0;
  glGetIntegerv(GL_CURRENT_PROGRAM, &backend);
  const unsigned program = linked_program(unsigned(backend));
  if (!program) {
    static bool told = false;  // a driver that links a program once and not again: said once
    if (!told) std::fprintf(stderr, "attnscope: the map shader does not link against ImGui's vertex layout\n");
    told = true;
    return;  // the quad shows its black stand-in
  }
  GLfloat projection[16] = {};
  glGetUniformfv(GLuint(backend), glGetUniformLocation(GLuint(backend), "ProjMtx"), projection);
  glUseProgram(program);
  glUniformMatrix4fv(glGetUniformLocation(program, "ProjMtx"), 1, GL_FALSE, projection);
  // Unit 0 stays the backend's: it binds the quad's stand-in there.
  const unsigned textures[2] = {inputs.image, inputs.cells};
  const char* samplers[2] = {"image", "cells"};
  for (int unit = 0; unit < 2; ++unit) {
    glActiveTexture(GL_TEXTURE1 + unit);
    glBindTexture(GL_TEXTURE_2D, textures[unit]);
    glUniform1i(glGetUniformLocation(program, samplers[unit]), 1 + unit);
  }
  glActiveTexture(GL_TEXTURE0);
  glUniform1i(glGetUniformLocation(program, "has_image"), inputs.has_image ? 1 : 0);
  glDisable(GL_BLEND);  // opaque: a software rasteriser would read back every covered pixel
}

}  // namespace attnscope::gl
