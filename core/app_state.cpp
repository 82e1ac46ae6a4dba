#include "core/app_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/focus_metrics.h"
#include "analysis/gradcam.h"
#include "core/excerpt.h"
#include "models/token_layout.h"

namespace attnscope {

namespace {

// "ROW,COL" with two non-negative whole numbers of at most 6 digits.
bool parse_patch_query(const std::string& text, int& row, int& col) {
  const auto comma = text.find(',');
  if (comma == std::string::npos) return false;
  const std::string first = text.substr(0, comma), second = text.substr(comma + 1);
  for (const auto& part : {first, second})
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return false;
  row = std::stoi(first);
  col = std::stoi(second);
  return true;
}

}  // namespace

int parse_int_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects an integer, got '" + excerpt(value) + "'");
}

double parse_double_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects a number, got '" + excerpt(value) + "'");
}

namespace {

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Re-throws a parser's std::invalid_argument with the option's name in front.
template <typename Parse>
auto with_option_name(const std::string& name, Parse parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--" + name + ": " + e.what());
  }
}

void add_export_options(std::vector<OptionSpec>& options) {
  auto on_off = [&](const char* name, const char* help, bool ExportSettings::*field) {
    options.push_back({name, "on|off", help,
                       [name, field](AppState& s, const std::string& v) {
                         if (v != "on" && v != "off")
                           throw std::invalid_argument(std::string("--") + name + " expects on or off, got '" +
                                                       excerpt(v) + "'");
                         s.figure.*field = v == "on";
                       },
                       [field](const AppState& s) { return std::string(s.figure.*field ? "on" : "off"); }, "on"});
  };
  options.push_back({"layout", "NAME", "figure layout (see attnscope export --help)",
                     [](AppState& s, const std::string& v) {
                       if (v.empty()) throw std::invalid_argument("--layout needs a name");
                       s.figure.layout = v;
                     },
                     [](const AppState& s) { return s.figure.layout; }});
  options.push_back({"format", "png|svg|pdf", "figure file format",
                     [](AppState& s, const std::string& v) {
                       if (v != "png" && v != "svg" && v != "pdf")
                         throw std::invalid_argument("--format expects png, svg or pdf, got '" + excerpt(v) + "'");
                       s.figure.format = v;
                     },
                     [](const AppState& s) { return s.figure.format; }});
  options.push_back({"dpi", "DPI", "PNG resolution in pixels per inch",
                     [](AppState& s, const std::string& v) {
                       const double dpi = parse_double_option("dpi", v);
                       if (!(dpi >= 10 && dpi <= 2400)) throw std::invalid_argument("--dpi must be in [10, 2400]");
                       s.figure.dpi = dpi;
                     },
                     [](const AppState& s) { return format_double(s.figure.dpi); }});
  options.push_back({"png-width", "PX", "PNG width in pixels (0: from --dpi)",
                     [](AppState& s, const std::string& v) {
                       const int width = parse_int_option("png-width", v);
                       if (width < 0 || width > 20000) throw std::invalid_argument("--png-width must be in [0, 20000]");
                       s.figure.png_width = width;
                     },
                     [](const AppState& s) { return std::to_string(s.figure.png_width); }});
  on_off("transparent", "figure without a background fill", &ExportSettings::transparent);
  on_off("overwrite", "replace existing files (otherwise they are an error)", &ExportSettings::overwrite);
  options.push_back({"variants", "V[:K=X],..", "rows of a comparison, e.g. softmax,focused:p=2 (default: --variant)",
                     [](AppState& s, const std::string& v) {
                       parse_variant_list(v, s.attention);  // validates
                       s.figure.variants = v;
                     },
                     [](const AppState& s) { return s.figure.variants; }});
  options.push_back({"layers", "all|L,..", "layer columns of grid-layers (negative: from the end)",
                     [](AppState& s, const std::string& v) {
                       parse_index_list("layers", v);
                       s.figure.layers = v;
                     },
                     [](const AppState& s) { return s.figure.layers; }});
  options.push_back({"heads", "all|H,..", "head columns of grid-heads",
                     [](AppState& s, const std::string& v) {
                       for (int head : parse_index_list("heads", v))
                         if (head < 0) throw std::invalid_argument("--heads must be >= 0");
                       s.figure.heads = v;
                     },
                     [](const AppState& s) { return s.figure.heads; }});
}

std::vector<OptionSpec> make_options() {
  std::vector<OptionSpec> options;
  auto text_option = [&](const char* name, const char* value_name, const char* help, std::string AppState::*field) {
    options.push_back({name, value_name, help, [field](AppState& s, const std::string& v) { s.*field = v; },
                       [field](const AppState& s) { return s.*field; }});
  };
  text_option("model", "FILE", "checkpoint: .safetensors, or a PyTorch .pth/.bin zip holding a state_dict",
              &AppState::model);
  text_option("image", "FILE", "input image (anything OpenCV reads)", &AppState::image);
  text_option("arch", "K=V,..", "architecture facts the file cannot tell: heads=N, eps=X", &AppState::arch);
  text_option("device", "DEV", "auto (CUDA when available), cpu or cuda", &AppState::device);
  text_option("out", "DIR", "output folder", &AppState::out);
  options.push_back({"resize", "MODE",
                     "timm (eval transform), fit (squash) or none (the image as it is: with --size native any size the "
                     "patches tile, else exactly --size)",
                     [](AppState& s, const std::string& v) {
                       s.resize = with_option_name("resize", [&] { return parse_resize_mode(v); });
                     },
                     [](const AppState& s) { return to_string(s.resize); }});
  options.push_back({"size", "S|HxW", "input resolution in pixels (default: the model's native size)",
                     [](AppState& s, const std::string& v) {
                       resolve_input_size(v, 224, 224, 1);  // validates the syntax
                       s.input_size = v;
                     },
                     [](const AppState& s) { return s.input_size; }});
  options.push_back({"max-pixels", "N",
                     "largest image accepted, in pixels, judged from its header before decoding (default 89478485, "
                     "Pillow's decompression bomb guard; at most 2^30)",
                     [](AppState& s, const std::string& v) {
                       const int pixels = parse_int_option("max-pixels", v);
                       if (pixels < 1 || pixels > kLargestMaxPixels)
                         throw std::invalid_argument("--max-pixels must be from 1 to " +
                                                     std::to_string(kLargestMaxPixels));
                       s.max_pixels = pixels;
                     },
                     [](const AppState& s) { return std::to_string(s.max_pixels); }});
  options.push_back({"variant", "NAME", "native, softmax, linear, focused, enhanced, window or anchor",
                     [](AppState& s, const std::string& v) {
                       s.attention.variant = with_option_name("variant", [&] { return parse_variant(v); });
                     },
                     [](const AppState& s) { return to_string(s.attention.variant); }});
  options.push_back({"p", "P", "FLatten focusing factor (default 3)",
                     [](AppState& s, const std::string& v) {
                       const double p = parse_double_option("p", v);
                       if (!(p > 0)) throw std::invalid_argument("--p must be positive");
                       s.attention.p = p;
                     },
                     [](const AppState& s) { return format_double(s.attention.p); }});
  options.push_back({"window", "W", "window size in patches (0: global; the window variant defaults to 7)",
                     [](AppState& s, const std::string& v) {
                       const int w = parse_int_option("window", v);
                       if (w < 0) throw std::invalid_argument("--window must be >= 0");
                       s.attention.window = w;
                     },
                     [](const AppState& s) { return std::to_string(s.attention.window); }});
  options.push_back({"anchors", "M", "anchor count (0: all learned anchors, or 30 pooled from K)",
                     [](AppState& s, const std::string& v) {
                       const int m = parse_int_option("anchors", v);
                       if (m < 0) throw std::invalid_argument("--anchors must be >= 0");
                       s.attention.anchors = m;
                     },
                     [](const AppState& s) { return std::to_string(s.attention.anchors); }});
  options.push_back({"dwc", "on|off", "FLatten's depthwise conv on V, where the checkpoint has it",
                     [](AppState& s, const std::string& v) {
                       if (v != "on" && v != "off")
                         throw std::invalid_argument("--dwc expects on or off, got '" + excerpt(v) + "'");
                       s.attention.dwc = v == "on";
                     },
                     [](const AppState& s) { return std::string(s.attention.dwc ? "on" : "off"); }});
  options.push_back({"norm", "all|head", "f_p norms over all channels (authors' code) or per head (paper)",
                     [](AppState& s, const std::string& v) {
                       s.attention.norm = with_option_name("norm", [&] { return parse_focus_norm(v); });
                     },
                     [](const AppState& s) { return to_string(s.attention.norm); }});
  options.push_back({"layer", "L", "block, from 0 (-1: the last)",
                     [](AppState& s, const std::string& v) { s.layer = parse_int_option("layer", v); },
                     [](const AppState& s) { return std::to_string(s.layer); }});
  options.push_back({"head", "H", "head, from 0",
                     [](AppState& s, const std::string& v) {
                       const int h = parse_int_option("head", v);
                       if (h < 0) throw std::invalid_argument("--head must be >= 0");
                       s.head = h;
                     },
                     [](const AppState& s) { return std::to_string(s.head); }});
  options.push_back(
      {"query", "cls|dist|regN|ROW,COL", "query token: the class, distillation or register token N, or a patch",
       [](AppState& s, const std::string& v) {
         int row = 0, col = 0;
         const bool prefix = v == "cls" || v == "dist" ||
                             (v.size() > 3 && v.size() < 9 && v.rfind("reg", 0) == 0 &&
                              v.find_first_not_of("0123456789", 3) == std::string::npos);
         if (!prefix && !parse_patch_query(v, row, col))
           throw std::invalid_argument("--query expects cls, dist, regN or ROW,COL, got '" + excerpt(v) + "'");
         s.query = v;
       },
       [](const AppState& s) { return s.query; }});
  options.push_back({"compare", "V,V,..", "side by side: variants of panels 2 to 4 (panel 1 is --variant)",
                     [](AppState& s, const std::string& v) {
                       std::vector<Variant> variants;
                       std::istringstream in(v);
                       std::string name;
                       while (std::getline(in, name, ','))
                         if (!name.empty())
                           variants.push_back(with_option_name("compare", [&] { return parse_variant(name); }));
                       if (int(variants.size()) > kMaxPanels - 1)
                         throw std::invalid_argument("--compare takes at most " + std::to_string(kMaxPanels - 1) +
                                                     " variants, got " + std::to_string(variants.size()));
                       s.compare = variants;
                     },
                     [](const AppState& s) {
                       std::string text;
                       for (Variant variant : s.compare) text += (text.empty() ? "" : ",") + to_string(variant);
                       return text;
                     }});
  options.push_back({"view", "head|mean|heads", "the selected head, the mean over heads, or a grid of all heads",
                     [](AppState& s, const std::string& v) {
                       const auto& names = view_names();
                       if (std::find(names.begin(), names.end(), v) == names.end())
                         throw std::invalid_argument("--view expects head, mean or heads, got '" + excerpt(v) + "'");
                       s.view = v;
                     },
                     [](const AppState& s) { return s.view; }});
  options.push_back({"direction", "out|in",
                     "maps show the query's row (out: where it looks) or its column (in: how much each patch looks "
                     "at it)",
                     [](AppState& s, const std::string& v) {
                       if (v != "out" && v != "in")
                         throw std::invalid_argument("--direction expects out or in, got '" + excerpt(v) + "'");
                       s.direction = v;
                     },
                     [](const AppState& s) { return s.direction; }});
  options.push_back(
      {"analysis", "NAME", "analysis view: none, spectrum (matrix, rank), gradcam, fp (f_p), rollout or metrics",
       [](AppState& s, const std::string& v) {
         const auto& names = analysis_names();
         if (std::find(names.begin(), names.end(), v) == names.end())
           throw std::invalid_argument("--analysis expects none, spectrum, gradcam, fp, rollout or metrics, got '" +
                                       excerpt(v) + "'");
         s.analysis = v;
       },
       [](const AppState& s) { return s.analysis; }});
  options.push_back({"class", "C",
                     "Grad-CAM target: class C (-1: the top-1 class); on models without classes output dimension C "
                     "(-1: the output's norm)",
                     [](AppState& s, const std::string& v) {
                       const int c = parse_int_option("class", v);
                       if (c < -1) throw std::invalid_argument("--class must be >= 0, or -1 for the top-1 class");
                       s.target_class = c;
                     },
                     [](const AppState& s) { return std::to_string(s.target_class); }});
  options.push_back({"gradcam-layer", "NAME",
                     "Grad-CAM layer: blocks.N.norm1 (default N=-1, the last), blocks.N.norm2, blocks.N or norm",
                     [](AppState& s, const std::string& v) {
                       // Syntax only here; the block index is checked against the model when it runs.
                       resolve_gradcam_layer(v, 1 << 20, true);
                       s.gradcam_layer = v;
                     },
                     [](const AppState& s) { return s.gradcam_layer; }});
  options.push_back({"fusion", "mean|max|min", "attention rollout: how the heads of a layer are fused",
                     [](AppState& s, const std::string& v) {
                       s.fusion = with_option_name("fusion", [&] { return parse_head_fusion(v); });
                     },
                     [](const AppState& s) { return to_string(s.fusion); }});
  options.push_back({"discard", "R", "attention rollout: fraction of the weakest links dropped per layer, in [0, 1)",
                     [](AppState& s, const std::string& v) {
                       const double r = parse_double_option("discard", v);
                       if (!(r >= 0.0 && r < 1.0)) throw std::invalid_argument("--discard must be in [0, 1)");
                       s.discard = r;
                     },
                     [](const AppState& s) { return format_double(s.discard); }});
  options.push_back({"box", "R0,C0,R1,C1", "focus metrics: a box of patches (end-exclusive) to measure mass in",
                     [](AppState& s, const std::string& v) {
                       if (!v.empty()) parse_patch_box(v);
                       s.box = v;
                     },
                     [](const AppState& s) { return s.box; }});
  options.push_back({"colormap", "NAME", "colour map: viridis, magma, inferno, turbo, jet or gray",
                     [](AppState& s, const std::string& v) {
                       s.colormap = with_option_name("colormap", [&] { return parse_colormap(v); });
                     },
                     [](const AppState& s) { return to_string(s.colormap); }});
  options.push_back({"opacity", "A", "weight of the colour map over the image in overlays, 0..1",
                     [](AppState& s, const std::string& v) {
                       const double a = parse_double_option("opacity", v);
                       if (!(a >= 0 && a <= 1)) throw std::invalid_argument("--opacity must be in [0, 1]");
                       s.opacity = a;
                     },
                     [](const AppState& s) { return format_double(s.opacity); }});
  add_export_options(options);
  return options;
}

}  // namespace

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = {"head", "mean", "heads"};
  return names;
}

const std::vector<std::string>& analysis_names() {
  static const std::vector<std::string> names = {"none", "spectrum", "gradcam", "fp", "rollout", "metrics"};
  return names;
}

std::vector<AttentionSettings> AppState::panel_settings() const {
  std::vector<AttentionSettings> panels = {attention};
  for (Variant variant : compare) {
    panels.push_back(attention);
    panels.back().variant = variant;
  }
  return panels;
}

const std::vector<OptionSpec>& app_options() {
  static const std::vector<OptionSpec> options = make_options();
  return options;
}

const OptionSpec* find_option(const std::string& name) {
  for (const auto& option : app_options())
    if (option.name == name) return &option;
  return nullptr;
}

void set_option(AppState& state, const std::string& name, const std::string& value) {
  const OptionSpec* option = find_option(name);
  if (!option) throw std::invalid_argument("unknown option --" + excerpt(name));
  // Paths are the longest values (PATH_MAX is 4096); anything longer is not an option value.
  if (value.size() > kMaxOptionValueBytes)
    throw std::invalid_argument("--" + name + ": the value is " + std::to_string(value.size()) +
                                " bytes long, at most " + std::to_string(kMaxOptionValueBytes) + " are accepted");
  option->set(state, value);
}

nlohmann::json to_json(const AppState& state) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& option : app_options()) json[option.name] = option.get(state);
  return json;
}

void apply_json(AppState& state, const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("a session must be a JSON object");
  for (const auto& item : json.items()) {
    const auto& value = item.value();
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_number() || value.is_boolean())
      text = value.dump();
    else
      throw std::invalid_argument("session key '" + excerpt(item.key()) + "' must be a string or a number");
    set_option(state, item.key(), text);
  }
}

std::vector<int> parse_index_list(const std::string& name, const std::string& text) {
  if (text == "all") return {};
  std::vector<int> indices;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) indices.push_back(parse_int_option(name, item));
  if (indices.empty() || text.back() == ',')
    throw std::invalid_argument("--" + name + " expects all or a comma-separated list, got '" + excerpt(text) + "'");
  return indices;
}

std::vector<VariantChoice> parse_variant_list(const std::string& text, const AttentionSettings& base) {
  if (text.empty()) return {{to_string(base.variant), base}};
  std::vector<VariantChoice> choices;
  std::stringstream in(text);
  std::string spec;
  while (std::getline(in, spec, ',')) {
    // Each key goes through the option registry, so a spec accepts exactly what the flags do.
    AppState scratch;
    scratch.attention = base;
    std::stringstream parts(spec);
    std::string part, label;
    bool first = true;
    while (std::getline(parts, part, ':')) {
      if (first) {
        set_option(scratch, "variant", part);
      } else {
        const auto eq = part.find('=');
        const std::string key = part.substr(0, eq);
        if (eq == std::string::npos ||
            (key != "p" && key != "window" && key != "anchors" && key != "dwc" && key != "norm"))
          throw std::invalid_argument("--variants: '" + excerpt(part) + "' in '" + excerpt(spec) +
                                      "' is not one of p=, window=, anchors=, dwc=, norm=");
        set_option(scratch, key, part.substr(eq + 1));
      }
      // Labels use the papers' letters: "window:window=7" reads "window w=7".
      std::string shown = part;
      if (part.rfind("window=", 0) == 0) shown = "w=" + part.substr(7);
      if (part.rfind("anchors=", 0) == 0) shown = "m=" + part.substr(8);
      label += (first ? "" : " ") + shown;
      first = false;
    }
    if (first) throw std::invalid_argument("--variants has an empty entry in '" + excerpt(text) + "'");
    choices.push_back({label, scratch.attention});
  }
  if (text.back() == ',') throw std::invalid_argument("--variants has an empty entry in '" + excerpt(text) + "'");
  return choices;
}

std::pair<int, int> resolve_input_size(const std::string& spec, int native_height, int native_width, int patch) {
  if (spec.empty() || spec == "native") return {native_height, native_width};
  int height = 0, width = 0;
  char separator = 0, extra = 0;
  std::istringstream in(spec);
  in >> height;
  if (in >> separator) {
    if (separator != 'x' || !(in >> width) || (in >> extra)) height = 0;
  } else {
    width = height;
  }
  if (height <= 0 || width <= 0)
    throw std::invalid_argument("--size expects native, S or HxW in pixels, got '" + spec.substr(0, 40) + "'");
  if (height > kMaxInputSide || width > kMaxInputSide)
    throw std::invalid_argument("--size " + spec.substr(0, 40) + ": each side must be at most " +
                                std::to_string(kMaxInputSide) + " pixels");
  if (height % patch || width % patch)
    throw std::invalid_argument("--size " + excerpt(spec) + " is not a multiple of the patch size " +
                                std::to_string(patch));
  return {height, width};
}

int resolve_layer_index(int layer, int depth) {
  const int resolved = layer < 0 ? depth + layer : layer;
  if (resolved < 0 || resolved >= depth)
    throw std::invalid_argument("--layer " + std::to_string(layer) + ": the model has " + std::to_string(depth) +
                                " blocks (0.." + std::to_string(depth - 1) + ")");
  return resolved;
}

void check_head_index(int head, int heads) {
  if (head < 0 || head >= heads)
    throw std::invalid_argument("--head " + std::to_string(head) + ": the model has " + std::to_string(heads) +
                                " heads (0.." + std::to_string(heads - 1) + ")");
}

ResolvedQuery resolve_query(const std::string& query, const TokenLayout& layout) {
  ResolvedQuery resolved;
  if (query == "cls") {
    if (layout.has_class_token) return resolved;
    resolved.token = layout.patch_token(layout.grid_h / 2, layout.grid_w / 2);
    resolved.note = "the model has no class token: using the centre patch";
    return resolved;
  }
  if (query == "dist") {
    if (!layout.has_dist_token) throw std::invalid_argument("--query dist: the model has no distillation token");
    resolved.token = int(layout.has_class_token);
    return resolved;
  }
  if (query.rfind("reg", 0) == 0) {
    const std::string number = query.substr(3);
    const bool digits =
        !number.empty() && number.size() < 6 && number.find_first_not_of("0123456789") == std::string::npos;
    const int index = digits ? std::stoi(number) : -1;
    if (index < 0 || index >= layout.register_tokens)
      throw std::invalid_argument("--query " + query.substr(0, 40) + ": " +
                                  (layout.register_tokens == 0
                                       ? std::string("the model has no register tokens")
                                       : "the model has " + std::to_string(layout.register_tokens) +
                                             " register tokens (reg0 .. reg" +
                                             std::to_string(layout.register_tokens - 1) + ")"));
    resolved.token = int(layout.has_class_token) + int(layout.has_dist_token) + index;
    return resolved;
  }
  int row = 0, col = 0;
  if (!parse_patch_query(query, row, col))
    throw std::invalid_argument("--query expects cls, dist, regN or ROW,COL, got '" + excerpt(query) + "'");
  if (row < 0 || row >= layout.grid_h || col < 0 || col >= layout.grid_w)
    throw std::invalid_argument("--query " + excerpt(query) + " is outside the " + std::to_string(layout.grid_h) + "x" +
                                std::to_string(layout.grid_w) + " patch grid");
  resolved.token = layout.patch_token(row, col);
  return resolved;
}

}  // namespace attnscope
