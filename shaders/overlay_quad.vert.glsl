#version 330 core
// ImGui's image quad for a map, drawn with the overlay's fragment shader straight into the frame:
// the attributes and projection are the ImGui backend's (OverlayRenderer binds them to its
// locations), and uv is the quad's own, so a zoomed view samples the map at screen resolution.
in vec2 Position;
in vec2 UV;
uniform mat4 ProjMtx;
out vec2 uv;

void main() {
  uv = UV;
  gl_Position = ProjMtx * vec4(Position, 0.0, 1.0);
}
