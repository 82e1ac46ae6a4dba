#version 330 core
// A scalar map (patch attention or a matrix) coloured through a 256-entry colour-map table and
// blended over the image at the chosen opacity. The map is sampled with nearest filtering, so a
// patch stays one flat block; values outside [vmin, vmax] clamp to the table's ends.
in vec2 uv;
out vec4 color;

uniform sampler2D image;     // RGB photograph (ignored when has_image is false)
uniform sampler2D values;    // R32F map
uniform sampler2D colormap;  // 256 x 1 RGB table
uniform float vmin;
uniform float vmax;
uniform float opacity;
uniform bool has_image;

void main() {
  float value = texture(values, uv).r;
  float t = clamp((value - vmin) / max(vmax - vmin, 1e-20), 0.0, 1.0);
  // Entry round(t * 255), the same one the CPU exporter picks.
  vec3 mapped = texture(colormap, vec2((floor(t * 255.0 + 0.5) + 0.5) / 256.0, 0.5)).rgb;
  vec3 base = has_image ? texture(image, uv).rgb : mapped;
  color = vec4(mix(base, mapped, has_image ? opacity : 1.0), 1.0);
}
