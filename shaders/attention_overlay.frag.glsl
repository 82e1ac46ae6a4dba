#version 330 core
// A map's cells blended over the image per screen pixel. Each cell's colour (RGB) and weight (A)
// were computed on the CPU by the exporter's colouring (colour_and_weight_values in
// core/value_overlay.cpp), so the screen and the figures agree; the cells are sampled with nearest
// filtering, so a patch stays one flat block, and the image bilinearly.
in vec2 uv;
out vec4 color;

uniform sampler2D image;  // RGB photograph (ignored when has_image is false)
uniform sampler2D cells;  // RGBA32F: colour and weight per cell
uniform bool has_image;

void main() {
  vec4 cell = texture(cells, uv);
  color = vec4(has_image ? mix(texture(image, uv).rgb, cell.rgb, cell.a) : cell.rgb, 1.0);
}
