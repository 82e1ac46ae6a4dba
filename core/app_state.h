// The one serialisable state of an attnscope session: model, image, attention settings and
// selections. Its options are defined once here and shared by CLI flags, session files and the UI.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/head_fusion.h"
#include "core/colormap.h"
#include "core/image.h"
#include "models/attention_settings.h"

namespace attnscope {

// What a figure export produces (figures/export.h): the CLI's `export` and the GUI's Export button.
struct ExportSettings {
  std::string layout = "grid-layers";  // a name from figure_layout_names() (figures/layouts.h)
  std::string format = "png";          // png, svg or pdf
  double dpi = 200;                    // PNG pixels per inch (figure geometry is in points)
  int png_width = 0;                   // PNG width in pixels; 0: from dpi
  bool transparent = false;            // no background fill
  bool overwrite = false;              // replace existing files
  std::string variants;                // "softmax,focused:p=2"; empty: the state's own variant
  std::string layers = "all";          // columns of grid-layers: "all" or "0,5,-1"
  std::string heads = "all";           // columns of grid-heads
};

struct AppState {
  std::string model;
  std::string image;
  std::string arch;  // "heads=6,eps=1e-6": what the checkpoint cannot tell
  std::string device = "auto";
  ResizeMode resize = ResizeMode::Timm;
  std::string input_size = "native";       // "native", "S" or "HxW" (pixels, multiples of the patch)
  int64_t max_pixels = kDefaultMaxPixels;  // images whose header declares more are refused
  AttentionSettings attention;
  int layer = -1;  // -1: the last block
  int head = 0;
  std::string query = "cls";  // "cls" or "ROW,COL"
  std::string out;            // output folder of headless commands

  // The workbench's views; headless commands read what applies to them (`variant` is panel 1).
  std::vector<Variant> compare;  // side by side: the variants of panels 2..4, empty for one panel
  std::string view = "head";     // "head": the selected head, "mean": mean over heads, "heads": all heads
  // "out": the query's row (where it looks); "in": its column (how much every patch looks at it,
  // e.g. at a register token)
  std::string direction = "out";
  // none, spectrum (matrix, spectrum, rank), gradcam, fp (f_p), rollout or metrics; as `analyze` names them
  std::string analysis = "none";

  // Settings of every panel: the shared knobs (p, window, anchors, dwc, norm) with each panel's variant.
  std::vector<AttentionSettings> panel_settings() const;

  // Analyses.
  int target_class = -1;                          // Grad-CAM class, -1: the top-1 class
  std::string gradcam_layer = "blocks.-1.norm1";  // a ForwardHook point (see analysis/gradcam.h)
  HeadFusion fusion = HeadFusion::Mean;           // rollout head fusion
  double discard = 0.0;                           // rollout discard ratio
  std::string box;                                // "R0,C0,R1,C1" patches (end-exclusive), empty: none
  // Views and figure export.
  Colormap colormap = Colormap::Viridis;
  double opacity = 0.6;  // weight of the colour map over the image in overlays
  ExportSettings figure;
};

// The values `view` and `analysis` accept, in UI order.
const std::vector<std::string>& view_names();
const std::vector<std::string>& analysis_names();
constexpr int kMaxPanels = 4;

// One option: its flag name, help, and how it reads and writes the state (as text).
struct OptionSpec {
  std::string name;        // flag without dashes, also the session-file key
  std::string value_name;  // for help: FILE, P, W, ...
  std::string help;
  std::function<void(AppState&, const std::string&)> set;  // throws std::invalid_argument
  std::function<std::string(const AppState&)> get;
  std::string implicit_value = {};  // non-empty: a switch; `--name` alone means this value
};

const std::vector<OptionSpec>& app_options();
const OptionSpec* find_option(const std::string& name);

// Whole-string number parsing for option values; errors name the option: "--p expects a number".
int parse_int_option(const std::string& name, const std::string& value);
double parse_double_option(const std::string& name, const std::string& value);

// Sets one option by name; throws std::invalid_argument naming the option and the bad value (cut
// to core/excerpt.h's length). Values longer than kMaxOptionValueBytes are refused.
constexpr size_t kMaxOptionValueBytes = 8192;
void set_option(AppState& state, const std::string& name, const std::string& value);

// "all" -> empty (every index); "0,5,-1" -> {0, 5, -1} (negative counts from the end). Throws
// std::invalid_argument naming the option.
std::vector<int> parse_index_list(const std::string& name, const std::string& text);

// One attention variant of a comparison: "focused:p=2:norm=head" is the focused variant with those
// settings on top of `base`; the label is the spec with spaces ("focused p=2 norm=head").
struct VariantChoice {
  std::string label;
  AttentionSettings settings;
};
// A comma-separated list of variant specs; empty text gives `base` alone, labelled by its variant.
std::vector<VariantChoice> parse_variant_list(const std::string& text, const AttentionSettings& base);

nlohmann::json to_json(const AppState& state);
void apply_json(AppState& state, const nlohmann::json& json);  // unknown keys are an error

// A query spec resolved against a token layout: "cls" -> 0 (or the centre patch when the model
// has no class token), "ROW,COL" -> that patch token. Throws std::invalid_argument if out of range.
struct TokenLayout;

// The largest model input side in pixels (DINOv2's 518 and 1024-pixel fine-tunes fit easily).
constexpr int kMaxInputSide = 4096;

// The input resolution for `input_size` given the model's native one; throws on a bad spec.
std::pair<int, int> resolve_input_size(const std::string& spec, int native_height, int native_width, int patch);

struct ResolvedQuery {
  int token = 0;
  std::string note;  // set when a fallback was taken
};
ResolvedQuery resolve_query(const std::string& query, const TokenLayout& layout);

// The block index for `layer` (negative counts from the end) in a model of `depth` blocks, and a
// head index check; both throw std::invalid_argument naming the option and the valid range.
int resolve_layer_index(int layer, int depth);
void check_head_index(int head, int heads);

}  // namespace attnscope
