// The session's option table: every option's name, value syntax, help, parser and formatter,
// defined once; the analyses add theirs above (views/option_catalog.h). The CLI's flags, the
// session file's keys and the workbench's generated controls all read the whole table.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis/focus_metrics.h"
#include "core/excerpt.h"
#include "session/app_state.h"

namespace attnscope {

namespace {

// Re-throws a parser's std::invalid_argument with the option's name in front.
template <typename Parse>
auto with_option_name(const std::string& name, Parse parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--" + name + ": " + e.what());
  }
}

// An option whose values are an enum's name table (core/enum_names.h): parsing, help and the
// session file all read the table.
template <typename E, typename Part>
void add_enum_option(std::vector<OptionSpec>& options, const char* name, const std::string& help, E Part::*field) {
  options.push_back({name, enum_choices_bar<E>(), help,
                     [name, field](AppState& s, const std::string& v) { s.*field = parse_enum<E>(name, v); },
                     [field](const AppState& s) { return enum_name(s.*field); }});
}

void set_compare(AppState& state, std::vector<PanelSpec> specs) {
  if (int(specs.size()) > kMaxPanels - 1)
    throw std::invalid_argument("--compare takes at most " + std::to_string(kMaxPanels - 1) + " panels, got " +
                                std::to_string(specs.size()));
  state.compare = std::move(specs);
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
  options.push_back({"format", enum_choices_bar<FigureFormat>(), "figure file format",
                     [](AppState& s, const std::string& v) { s.figure.format = parse_enum<FigureFormat>("format", v); },
                     [](const AppState& s) { return to_string(s.figure.format); }});
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
  options.push_back({"width-pt", "PT|single|double",
                     "figure width in points (1/72 in), or a journal's column: single (3.25 in, 234 pt) or double "
                     "(6.75 in, 486 pt); 0: natural size",
                     [](AppState& s, const std::string& v) {
                       // The widths journals set figures at (Nature, IEEE, Elsevier: 3.25-3.5 and 6.75-7 in).
                       const double width = v == "single"   ? kSingleColumnPt
                                            : v == "double" ? kDoubleColumnPt
                                                            : parse_double_option("width-pt", v);
                       if (!(width == 0 || (width >= 50 && width <= 5000)))
                         throw std::invalid_argument("--width-pt must be 0 or in [50, 5000]");
                       s.figure.width_pt = width;
                     },
                     [](const AppState& s) { return format_double(s.figure.width_pt); }});
  on_off("transparent", "figure without a background fill", &ExportSettings::transparent);
  on_off("overwrite", "replace existing files (otherwise they are an error)", &ExportSettings::overwrite);
  OptionSpec variants{"variants", "SPEC,..",
                      "rows of a comparison, e.g. softmax,focused:p=2,native:model=F (panel specs as --compare; "
                      "default: --variant)",
                      [](AppState& s, const std::string& v) { s.figure.variants = parse_panel_list(v, "--variants"); },
                      [](const AppState& s) { return to_string(s.figure.variants); }};
  variants.panels = [](const AppState& s) -> const std::vector<PanelSpec>& { return s.figure.variants; };
  variants.set_panels = [](AppState& s, std::vector<PanelSpec> specs) { s.figure.variants = std::move(specs); };
  options.push_back(variants);
  options.push_back({"layers", "all|L,..", "layer columns of grid-layers (negative: from the end)",
                     [](AppState& s, const std::string& v) { s.figure.layers = parse_index_list("layers", v); },
                     [](const AppState& s) { return index_list_text(s.figure.layers); }});
  options.push_back({"heads", "all|H,..", "head columns of grid-heads",
                     [](AppState& s, const std::string& v) {
                       const std::vector<int> heads = parse_index_list("heads", v);
                       for (int head : heads)
                         if (head < 0) throw std::invalid_argument("--heads must be >= 0");
                       s.figure.heads = heads;
                     },
                     [](const AppState& s) { return index_list_text(s.figure.heads); }});
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
  text_option("arch", "K=V,..",
              "architecture values the weights cannot show, over every config: heads=1/2/5/8 ('/' splits stages), "
              "window=7, img_size=224, split_size=, la_split_size=, att_head_dim=, attn_type=LLSS, "
              "focusing_factor=3, eps=1e-6, act=gelu|quick_gelu",
              &AppState::arch);
  text_option("config", "FILE",
              "the model's config when it is not beside the weights: a timm config.json (architecture, model_args) "
              "or an authors' yaml (FLatten's cfgs/*.yaml)",
              &AppState::config);
  text_option("device", "DEV", "auto (CUDA when available), cpu or cuda", &AppState::device);
  text_option("out", "DIR", "output folder", &AppState::out);
  options.push_back({"resize", "MODE",
                     "auto (what the checkpoint declares; default), timm (eval transform: resize the shorter side to "
                     "size / crop, centre crop), fit (squash) or none (the image as it is: with --size native any size "
                     "the patches tile, else exactly --size)",
                     [](AppState& s, const std::string& v) {
                       s.resize = with_option_name("resize", [&] { return parse_resize_mode(v); });
                     },
                     [](const AppState& s) { return to_string(s.resize); }});
  options.push_back({"crop", "F",
                     "crop fraction of --resize timm (timm's crop_pct), in (0, 1]; default: the checkpoint's, else "
                     "0.875",
                     [](AppState& s, const std::string& v) {
                       s.crop.reset();
                       if (v.empty()) return;
                       const double crop = parse_double_option("crop", v);
                       if (!(crop > 0 && crop <= 1)) throw std::invalid_argument("--crop must be in (0, 1]");
                       s.crop = crop;
                     },
                     [](const AppState& s) { return s.crop ? format_double(*s.crop) : std::string(); }});
  options.push_back({"interpolation", "bicubic|bilinear",
                     "resize filter (Pillow-exact); default: the checkpoint's, else bicubic",
                     [](AppState& s, const std::string& v) {
                       s.interpolation.reset();
                       if (!v.empty())
                         s.interpolation = with_option_name("interpolation", [&] { return parse_interpolation(v); });
                     },
                     [](const AppState& s) { return s.interpolation ? to_string(*s.interpolation) : std::string(); }});
  options.push_back({"mean", "R,G,B", "input normalisation mean; default: the checkpoint's, else ImageNet's",
                     [](AppState& s, const std::string& v) {
                       s.mean.reset();
                       if (!v.empty()) s.mean = parse_channel_values(v, "--mean");
                     },
                     [](const AppState& s) { return channel_values_text(s.mean); }});
  options.push_back({"std", "R,G,B", "input normalisation std; default: the checkpoint's, else ImageNet's",
                     [](AppState& s, const std::string& v) {
                       s.std.reset();
                       if (v.empty()) return;
                       const std::array<float, 3> values = parse_channel_values(v, "--std");
                       for (float value : values)
                         if (!(value > 0)) throw std::invalid_argument("--std values must be positive");
                       s.std = values;
                     },
                     [](const AppState& s) { return channel_values_text(s.std); }});
  options.push_back({"size", "S|HxW", "input resolution in pixels (default: the model's native size)",
                     [](AppState& s, const std::string& v) { s.input_size = InputSize::parse(v); },
                     [](const AppState& s) { return s.input_size.text(); }});
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
  options.push_back({"variant", "NAME", variant_choices(),
                     [](AppState& s, const std::string& v) {
                       s.attention.variant = with_option_name("variant", [&] { return parse_variant(v); });
                     },
                     [](const AppState& s) { return to_string(s.attention.variant); }});
  // The attention knobs, one option each, from the knob table (models/attention_settings.h).
  for (const AttentionKnob& knob : attention_knobs()) {
    OptionSpec option{knob.name, knob.value_name, knob.help,
                      [&knob](AppState& s, const std::string& v) { knob.set(s.attention, v); },
                      [&knob](const AppState& s) { return knob.text(s.attention); }};
    option.group = OptionGroup::Attention;
    options.push_back(option);
  }
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
  options.push_back({"query", "cls|dist|regN|ROW,COL",
                     "query token: the class, distillation or register token N, or a patch",
                     [](AppState& s, const std::string& v) { s.query = QuerySpec::parse(v); },
                     [](const AppState& s) { return s.query.text(); }});
  std::string spec_keys;
  for (const AttentionKnob& knob : attention_knobs()) spec_keys += "[:" + knob.name + "=" + knob.value_name + "]";
  // Panels 2 to 4; set as text (the flag) or whole (a session's objects), checked alike.
  OptionSpec compare{"compare", "SPEC,..",
                     "side by side: panels 2 to 4, each VARIANT[:model=F]" + spec_keys +
                         " (panel 1 is --model with --variant; keys left out follow them)",
                     [](AppState& s, const std::string& v) { set_compare(s, parse_panel_list(v, "--compare")); },
                     [](const AppState& s) { return to_string(s.compare); }};
  compare.panels = [](const AppState& s) -> const std::vector<PanelSpec>& { return s.compare; };
  compare.set_panels = set_compare;
  options.push_back(compare);
  add_enum_option<HeadView>(options, "view", "the selected head, the mean over heads, or a grid of all heads",
                            &AppState::view);
  add_enum_option<MapDirection>(
      options, "direction",
      "maps show the query's row (out: where it looks) or its column (in: how much each patch "
      "looks at it)",
      &AppState::direction);
  options.push_back({"windows", "on|off", "outline the layer's attention windows and the query's own window",
                     [](AppState& s, const std::string& v) {
                       if (v != "on" && v != "off")
                         throw std::invalid_argument("--windows expects on or off, got '" + excerpt(v) + "'");
                       s.windows = v == "on";
                     },
                     [](const AppState& s) { return std::string(s.windows ? "on" : "off"); }, "on"});
  add_enum_option<RankMode>(
      options, "ranks",
      "singular spectra of run, analyze spectrum (auto is exact there; none is refused) and the matrix view: auto "
      "(run: every layer's exact ranks when every layer has at "
      "most 400 tokens; above, the selected layer's where the exact path is cheap: factors, windows or at most 400 "
      "keys; the matrix view: those exact, the others leading; nothing O(T^3) unless asked), exact (the selected "
      "layer's heads by the exact path: a full SVD per softmax head, about 17-24 s a head at 5,481 tokens on 2 cores, "
      "with a progress bar; the workbench's cancel stops it), leading (the selected layer's 32 leading singular "
      "values by randomised subspace iteration, O(T^2 k), with bounds; ranks as ranges) or none",
      &AppState::ranks);
  add_enum_option<MatrixFile>(
      options, "matrix",
      "run's matrix_*.npy (the selected head's T x T matrix): auto writes it up to 400 tokens, on "
      "always, off never",
      &AppState::matrix);
  add_enum_option<LcmView>(options, "lcm",
                           "L2ViT global layers: the map before or after the LCM's spatial mixing (C_conv A, BatchNorm "
                           "folded, GELU at slope 1/2); other layers have no LCM",
                           &AppState::lcm);
  // --class C is --target class:C. Sessions save both; "class" is read before "target" (a
  // session's keys are applied in name order), so a saved text or image target survives it.
  options.push_back({"class", "C",
                     "the gradient methods' class: --target class:C (-1: the top-1 class); on models without "
                     "classes output dimension C (-1: the output's norm)",
                     [](AppState& s, const std::string& v) {
                       const int c = parse_int_option("class", v);
                       if (c < -1) throw std::invalid_argument("--class must be >= 0, or -1 for the top-1 class");
                       s.target = TargetSpec::of_class(c);
                     },
                     [](const AppState& s) {
                       return std::to_string(s.target.kind == TargetKind::Class ? s.target.class_index : -1);
                     }});
  options.push_back({"target", "TARGET",
                     "what the gradient methods explain (Grad-CAM and its family, relevance, gradrollout, ig, "
                     "faithfulness): class:C the class logit (the default, top-1), text:PROMPT CLIP's logit of the "
                     "image and PROMPT (a CLIP file with its text tower), image:FILE the cosine similarity of the "
                     "output embedding to FILE's, norm the output's L2 norm",
                     [](AppState& s, const std::string& v) { s.target = parse_target_spec(v); },
                     [](const AppState& s) { return to_string(s.target); }});
  options.push_back(
      {"gradcam-layer", "NAME",
       "Grad-CAM layer: blocks.N.norm1 (default N=-1, the last attention block, counted across "
       "stages), blocks.N.norm2, blocks.N, norm, or a module name of the family (layers.3.blocks.1.norm1, "
       "stages.3.norm)",
       [](AppState& s, const std::string& v) {
         // Syntax only here; the model checks that the point exists when it runs.
         if (v.empty() || v.size() > 200 ||
             v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                 std::string::npos)
           throw std::invalid_argument("--gradcam-layer expects a module name such as blocks.-1.norm1");
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
                     [](const AppState& s) { return format_double(s.discard); }, "", 0.0, 0.99});
  options.push_back({"box", "R0,C0,R1,C1", "focus metrics: a box of patches (end-exclusive) to measure mass in",
                     [](AppState& s, const std::string& v) {
                       if (!v.empty()) parse_patch_box(v);
                       s.box = v;
                     },
                     [](const AppState& s) { return s.box; }});
  add_enum_option<FocusVectors>(options, "fp-vectors", "f_p view and fp-vectors figure: a head's keys or queries",
                                &AppState::fp_vectors);
  add_enum_option<FocusProjectionKind>(
      options, "fp-projection",
      "f_p view and fp-vectors figure: the two largest channels or the first two principal axes",
      &AppState::fp_projection);
  options.push_back({"scale", "MODE",
                     "colour scale of attention maps: zero-max (default), min-max, fixed:A,B, log, or uniform (weight "
                     "x keys: 1 = uniform); maps with negative values get a diverging map centred at 0",
                     [](AppState& s, const std::string& v) { s.scale = parse_scale_spec(v); },
                     [](const AppState& s) { return to_string(s.scale); }});
  options.push_back({"alpha", "value|constant",
                     "overlay opacity: value (follows the weight, low weights transparent; default) or constant",
                     [](AppState& s, const std::string& v) { s.alpha = parse_overlay_alpha(v); },
                     [](const AppState& s) { return to_string(s.alpha); }});
  options.push_back({"colormap", "NAME", "colour map: viridis, magma, inferno, turbo, jet, gray or rdbu (diverging)",
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
  add_attribution_options(options);
  // The groups of the options above that are not made in a group of their own.
  const std::vector<std::pair<OptionGroup, std::vector<std::string>>> groups = {
      {OptionGroup::Input,
       {"model", "image", "arch", "config", "device", "resize", "crop", "interpolation", "mean", "std", "size",
        "max-pixels"}},
      {OptionGroup::Attention, {"variant"}},
      {OptionGroup::Selection, {"layer", "head", "query"}},
      {OptionGroup::Display, {"colormap", "scale", "opacity", "alpha"}},
      {OptionGroup::Output, {"out", "overwrite"}},
      {OptionGroup::Figure,
       {"layout", "format", "dpi", "png-width", "width-pt", "transparent", "variants", "layers", "heads"}},
  };
  for (const auto& [group, names] : groups)
    for (OptionSpec& option : options)
      if (std::find(names.begin(), names.end(), option.name) != names.end()) option.group = group;
  // One name, one option: a knob named like a display option would be set by both parsers at once.
  std::set<std::string> names;
  for (const OptionSpec& option : options)
    if (!names.insert(option.name).second) throw std::logic_error("two options are named --" + option.name);
  return options;
}

}  // namespace

const std::vector<OptionSpec>& session_options() {
  static const std::vector<OptionSpec> options = make_options();
  return options;
}

std::vector<std::string> reset_attention_options(AppState& state) {
  static const AppState defaults;
  std::vector<std::string> changed;
  for (const OptionSpec& option : session_options()) {
    if (option.group != OptionGroup::Attention || option.panels) continue;
    const std::string was = option.get(state), fresh = option.get(defaults);
    if (was == fresh) continue;
    option.set(state, fresh);
    changed.push_back(option.name + " " + (was.empty() ? "(none)" : excerpt(was)) + " -> " +
                      (fresh.empty() ? "(none)" : fresh));
  }
  return changed;
}

const OptionSpec* find_session_option(const std::string& name) {
  for (const auto& option : session_options())
    if (option.name == name) return &option;
  return nullptr;
}

}  // namespace attnscope
