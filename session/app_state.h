// The one serialisable state of an attnscope session: model, image, attention settings and
// selections. Its options are defined once here and shared by CLI flags, session files and the UI.
// It sits above models/ and analysis/ (it names their settings); nothing below it includes it.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/focus_projection.h"
#include "analysis/head_fusion.h"
#include "core/colormap.h"
#include "core/enum_names.h"
#include "core/image.h"
#include "core/value_scale.h"
#include "models/arch_config.h"
#include "models/attention_settings.h"
#include "session/panel_spec.h"

namespace attnscope {

// What a figure export produces (figures/export.h): the CLI's `export` and the GUI's Export button.
struct ExportSettings {
  std::string layout = "grid-layers";  // a name from figure_layout_names() (figures/layouts.h)
  std::string format = "png";          // png, svg or pdf
  double dpi = 200;                    // PNG pixels per inch (figure geometry is in points)
  int png_width = 0;                   // PNG width in pixels; 0: from dpi
  double width_pt = 0;                 // the figure's width in points (240: a paper column); 0: natural
  bool transparent = false;            // no background fill
  bool overwrite = false;              // replace existing files
  std::string variants;                // "softmax,focused:p=2"; empty: the state's own variant
  std::string layers = "all";          // columns of grid-layers: "all" or "0,5,-1"
  std::string heads = "all";           // columns of grid-heads
};

// How a view shows a layer's heads: the selected head, the mean over heads, or every head.
enum class HeadView { Head, Mean, Heads };
// A map shows the query's row ("out": where it looks) or its column ("in": how much every patch
// looks at it, e.g. at a register token).
enum class MapDirection { Out, In };
// L2ViT's global (LGA) layers: the map "before" the LCM (the attention itself) or "after" its
// spatial mixing (C_conv A, the convolutions linearised); layers without an LCM show the attention.
enum class LcmView { Before, After };
// The f_p view's vectors: a head's keys or its queries.
enum class FocusVectors { Keys, Queries };
// Which singular spectra `run` computes (nothing O(T^3) unless asked): see the option's help.
enum class RankMode { Auto, Exact, Leading, None };
// Whether `run` writes the selected head's full T x T matrix.
enum class MatrixFile { Auto, On, Off };

template <>
struct EnumTable<HeadView> {
  static const std::vector<EnumEntry<HeadView>>& entries();
};
template <>
struct EnumTable<MapDirection> {
  static const std::vector<EnumEntry<MapDirection>>& entries();
};
template <>
struct EnumTable<LcmView> {
  static const std::vector<EnumEntry<LcmView>>& entries();
};
template <>
struct EnumTable<FocusVectors> {
  static const std::vector<EnumEntry<FocusVectors>>& entries();
};
template <>
struct EnumTable<RankMode> {
  static const std::vector<EnumEntry<RankMode>>& entries();
};
template <>
struct EnumTable<MatrixFile> {
  static const std::vector<EnumEntry<MatrixFile>>& entries();
};

// The parts of a session, each defined once and embedded (as a base) where it is needed: the
// inference request of the workbench and a figure request carry the same parts, not copies of
// their fields. Each part's key() names everything in it, for caches and change detection.

// Where the input comes from and how the image becomes the model's input.
struct InputSelection {
  std::string model;
  std::string image;
  std::string arch;    // "heads=1/2/5/8,eps=1e-6": what the checkpoint cannot tell (models/arch_config.h)
  std::string config;  // an authors' config beside which the weights were trained (config.json, cfgs/*.yaml)
  std::string device = "auto";
  // How the image becomes the model's input; empty text and auto: what the checkpoint declares.
  ResizeMode resize = ResizeMode::Auto;
  std::string input_size = "native";  // "native", "S" or "HxW" (pixels, multiples of the patch)
  std::string crop, interpolation, mean, std;
  int64_t max_pixels = kDefaultMaxPixels;  // images whose header declares more are refused

  InputSettings input_settings() const { return {resize, input_size, crop, interpolation, mean, std}; }
  ArchOverrides arch_overrides() const { return ArchOverrides::parse(arch, config); }
  std::string key() const;
};

// What of a layer's attention the views show.
struct ViewSelection {
  int layer = -1;  // -1: the last block
  int head = 0;
  std::string query = "cls";  // "cls", "dist", "regN" or "ROW,COL"
  HeadView view = HeadView::Head;
  MapDirection direction = MapDirection::Out;
  // Outline the selected layer's windows on the maps (Swin's shifted windows where shifted), and
  // the query's own window.
  bool windows = false;
  LcmView lcm = LcmView::Before;

  std::string key() const;
};

// The analysis view (a name of the analysis registry, views/analysis_registry.h) and what the
// analyses read.
struct AnalysisSettings {
  std::string analysis = "none";
  int target_class = -1;                          // Grad-CAM class, -1: the top-1 class
  std::string gradcam_layer = "blocks.-1.norm1";  // a ForwardHook point (see analysis/gradcam.h)
  HeadFusion fusion = HeadFusion::Mean;           // rollout head fusion
  double discard = 0.0;                           // rollout discard ratio
  std::string box;                                // "R0,C0,R1,C1" patches (end-exclusive), empty: none
  // Attribution (analysis/attribution.h names the methods): the workbench's attribution view, the
  // faithfulness table and eval.
  std::string method = "gradcam";                                         // the attribution view's method
  std::string methods = "gradcam,gradcam++,relevance,rollout,attention";  // faithfulness and eval
  int steps = 20;                    // deletion/insertion curves: steps from the image to its replacement
  std::string replacement = "blur";  // what removed cells become: blur, mean, black or zero
  int ig_steps = 50;                 // integrated gradients: points on the path
  std::string ig_baseline = "zero";  // integrated gradients: zero, black, mean or blur
  FocusVectors fp_vectors = FocusVectors::Keys;
  FocusProjectionKind fp_projection = FocusProjectionKind::Channels;  // their two largest channels, or PCA
  RankMode ranks = RankMode::Auto;                                    // run's spectra
  MatrixFile matrix = MatrixFile::Auto;                               // run's matrix_*.npy
  // The options of the analyses that define their own (views/analysis_*.cpp), by option name.
  std::map<std::string, std::string> options;

  std::string key() const;
};

// How values become colours.
struct DisplaySettings {
  Colormap colormap = Colormap::Viridis;
  ScaleSpec scale;                           // how attention values map to colours (0..max by default)
  double opacity = 0.6;                      // weight of the colour map over the image in overlays
  OverlayAlpha alpha = OverlayAlpha::Value;  // the weight follows the value: low weights leave the image

  std::string key() const;
};

struct AppState : InputSelection, ViewSelection, AnalysisSettings, DisplaySettings {
  AttentionSettings attention;
  std::string out;  // output folder of headless commands
  // The workbench's views; headless commands read what applies to them (panel 1 is `model` with
  // `attention`).
  std::vector<PanelSpec> compare;  // side by side: panels 2..4 (model, variant, parameters), empty for one
  ExportSettings figure;

  // Every panel: panel 1 is the session's model and attention, the others their specs on top of it.
  std::vector<PanelSpec> panel_specs() const;
  std::vector<AttentionSettings> panel_settings() const;
};

constexpr int kMaxPanels = 4;

// One option: its flag name, help, and how it reads and writes the state (as text).
struct OptionSpec {
  std::string name;        // flag without dashes, also the session-file key
  std::string value_name;  // for help: FILE, P, W, ...
  std::string help;
  std::function<void(AppState&, const std::string&)> set;  // throws std::invalid_argument
  std::function<std::string(const AppState&)> get;
  std::string implicit_value = {};  // non-empty: a switch; `--name` alone means this value
  bool panel_list = false;          // a list of panel specs: an array of objects in session files
  // The workbench's control for it where a view draws its options (views/analysis_registry.h): a
  // slider over [slider_min, slider_max] when that range is not empty, radio buttons when the value
  // name lists choices ("a|b|c"), a text field otherwise.
  double slider_min = 0, slider_max = 0;
};

const std::vector<OptionSpec>& app_options();
// The analysis registry's part of the option table: `analysis` and each analysis's own options.
// Defined with the registry (views/analysis_registry.cpp), which sits above this file.
void add_analysis_options(std::vector<OptionSpec>& options);
const std::vector<std::string>& analysis_names();  // "none" first, then the workbench's analyses
std::string analysis_help();                       // "spectrum (matrix, rank), gradcam, ..." for --help
// The attribution options (method, methods, steps, replacement, ig-steps, ig-baseline), defined in
// session/attribution_options.cpp and appended to app_options().
void add_attribution_options(std::vector<OptionSpec>& options);
const OptionSpec* find_option(const std::string& name);

// Whole-string number parsing for option values; errors name the option: "--p expects a number".
int parse_int_option(const std::string& name, const std::string& value);
double parse_double_option(const std::string& name, const std::string& value);
// A number as options and sessions write it (the stream's default: 0.6, 1e-06).
std::string format_double(double value);

// Sets one option by name; throws std::invalid_argument naming the option and the bad value (cut
// to core/excerpt.h's length). Values longer than kMaxOptionValueBytes are refused.
constexpr size_t kMaxOptionValueBytes = 8192;
void set_option(AppState& state, const std::string& name, const std::string& value);

// "all" -> empty (every index); "0,5,-1" -> {0, 5, -1} (negative counts from the end). Throws
// std::invalid_argument naming the option.
std::vector<int> parse_index_list(const std::string& name, const std::string& text);

// One row of a comparison figure: a panel spec ("focused:p=2:norm=head", "native:model=F") resolved
// on top of `base`; the label is the spec with spaces ("focused p=2 norm=head").
struct VariantChoice {
  std::string label;
  AttentionSettings settings;
  std::string model;  // empty: the export's --model
};
// A comma-separated list of panel specs; empty text gives `base` alone, labelled by its variant.
std::vector<VariantChoice> parse_variant_list(const std::string& text, const AttentionSettings& base);

nlohmann::json to_json(const AppState& state);
void apply_json(AppState& state, const nlohmann::json& json);  // unknown keys are an error

// A query spec resolved against a token layout: "cls" -> 0 (or the centre patch when the model
// has no class token), "ROW,COL" -> that patch token. Throws std::invalid_argument if out of range.
struct TokenLayout;

struct ResolvedQuery {
  int token = 0;
  std::string note;  // set when a fallback was taken
};
ResolvedQuery resolve_query(const std::string& query, const TokenLayout& layout);
// "ROW,COL" with two non-negative whole numbers of at most 6 digits.
bool parse_patch_query(const std::string& text, int& row, int& col);

// The block index for `layer` (negative counts from the end) in a model of `depth` blocks, and a
// head index check; both throw std::invalid_argument naming the option and the valid range.
int resolve_layer_index(int layer, int depth);
void check_head_index(int head, int heads);

}  // namespace attnscope
