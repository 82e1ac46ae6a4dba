// GLSL sources from shaders/*.glsl, embedded into the binary at build time (cmake/EmbedShaders.cmake).
#pragma once

#include <string>

namespace attnscope::gl {

// The text of shaders/<name>, or nullptr when no such file was embedded.
const char* shader_source(const std::string& name);

}  // namespace attnscope::gl
