#version 330 core
// One triangle covering the target; uv (0,0) is the first texel row of every input texture.
out vec2 uv;

void main() {
  vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  uv = corner;
  gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
