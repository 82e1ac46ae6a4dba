# Build-time step: writes a C++ file holding every shaders/*.glsl as a string, looked up by file name.
# Run as: cmake -DOUTPUT=file.cpp -DSOURCES="a.glsl;b.glsl" -P EmbedShaders.cmake
set(body "// Generated from shaders/*.glsl by cmake/EmbedShaders.cmake; do not edit.\n")
string(APPEND body "#include \"viewer/gl/shader_sources.h\"\n\nnamespace attnscope::gl {\n\n")
string(APPEND body "const char* shader_source(const std::string& name) {\n")
foreach(source ${SOURCES})
  get_filename_component(name ${source} NAME)
  file(READ ${source} text)
  string(APPEND body "  if (name == \"${name}\") return R\"glsl(${text})glsl\";\n")
endforeach()
string(APPEND body "  return nullptr;\n}\n\n}  // namespace attnscope::gl\n")
file(WRITE ${OUTPUT}.tmp "${body}")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
