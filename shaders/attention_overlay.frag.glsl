#version 330 core
// A scalar map (patch attention or a matrix) coloured through a 256-entry colour-map table and
// blended over the image. The map is sampled with nearest filtering, so a patch stays one flat
// block. position() and alpha() are core/value_scale.cpp's ValueScale::position and ::alpha: values
// outside [vmin, vmax] clamp to the table's ends; on a log scale values <= 0 sit at the bottom.
in vec2 uv;
out vec4 color;

uniform sampler2D image;     // RGB photograph (ignored when has_image is false)
uniform sampler2D values;    // R32F map, in the scale's display units
uniform sampler2D colormap;  // 256 x 1 RGB table
uniform float vmin;
uniform float vmax;
uniform bool log_scale;
uniform bool diverging;      // alpha follows the distance from the table's middle (0)
uniform float opacity;
uniform bool alpha_follows_value;
uniform bool has_image;

float position(float value) {
  float t;
  if (log_scale) {
    if (value <= 0.0) return 0.0;
    t = (log(value) - log(vmin)) / max(log(vmax) - log(vmin), 1e-20);
  } else {
    t = (value - vmin) / max(vmax - vmin, 1e-20);
  }
  return clamp(t, 0.0, 1.0);
}

void main() {
  float t = position(texture(values, uv).r);
  // Entry round(t * 255), the same one the CPU exporter picks.
  vec3 mapped = texture(colormap, vec2((floor(t * 255.0 + 0.5) + 0.5) / 256.0, 0.5)).rgb;
  vec3 base = has_image ? texture(image, uv).rgb : mapped;
  float weight = opacity;
  if (alpha_follows_value) weight = opacity * (diverging ? abs(2.0 * t - 1.0) : t);
  color = vec4(mix(base, mapped, has_image ? weight : 1.0), 1.0);
}
