// The one serialisable state of an attnscope session: model, image, attention settings and
// selections. Its options are defined once here and shared by CLI flags, session files and the UI.
// It sits above models/ and analysis/ (it names their settings); nothing below it includes it.
#pragma once

#include <any>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attribution_method.h"
#include "analysis/attribution_target.h"
#include "analysis/faithfulness_table.h"
#include "analysis/focus_projection.h"
#include "analysis/head_fusion.h"
#include "analysis/head_spectrum.h"
#include "analysis/perturbation.h"
#include "core/colormap.h"
#include "core/enum_names.h"
#include "core/image.h"
#include "core/number_text.h"
#include "core/value_scale.h"
#include "figures/figure_output.h"
#include "models/arch_config.h"
#include "models/attention_settings.h"
#include "session/panel_spec.h"

namespace attnscope {

// What a figure export produces (figures/export.h): the CLI's `export` and the GUI's Export button.
// A journal's single and double column, in points (3.25 and 6.75 inches): --width-pt single|double.
constexpr double kSingleColumnPt = 234.0, kDoubleColumnPt = 486.0;

struct ExportSettings {
  std::string layout = "grid-layers";  // a name from figure_layout_names() (figures/layouts.h)
  FigureFormat format = FigureFormat::Png;
  double dpi = 200;                 // PNG pixels per inch (figure geometry is in points)
  int png_width = 0;                // PNG width in pixels; 0: from dpi
  double width_pt = 0;              // the figure's width in points (240: a paper column); 0: natural
  bool transparent = false;         // no background fill
  bool overwrite = false;           // replace existing files
  std::vector<PanelSpec> variants;  // rows of a comparison (softmax, focused:p=2); empty: the state's own
  std::vector<int> layers;          // columns of grid-layers (negative: from the end); empty: all
  std::vector<int> heads;           // columns of grid-heads; empty: all
  // Appended to every figure's stem: the workbench numbers a repeat export ("_2", "_3") instead of
  // refusing it when overwrite is off. Not a session key.
  std::string stem_suffix;
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

// The attribution methods the faithfulness table and eval compare: a list, "all" (then a method
// that cannot apply to a model is left out with its reason), or, for eval --images alone,
// "dino-masks" (DINO's masks scored by Jaccard instead of attribution maps).
struct MethodSelection {
  std::vector<AttributionMethod> methods = {AttributionMethod::GradCam, AttributionMethod::GradCamPlusPlus,
                                            AttributionMethod::Relevance, AttributionMethod::Rollout,
                                            AttributionMethod::Attention};
  bool every = false;
  bool dino_masks = false;
};
MethodSelection parse_method_selection(const std::string& text, const std::string& option);
std::string to_string(const MethodSelection& selection);

// The analyses' own options (views/analysis_options.h), each parsed once where it enters (its
// option's `set`: the CLI, a session file, a widget) and kept as its typed value, with the text
// sessions write. Read by type: an analysis never parses it again.
class AnalysisOptionValues {
 public:
  void set(const std::string& name, std::any value, std::string text) {
    values_[name] = {std::move(value), std::move(text)};
  }
  // The value of `name` as T, or null when it is unset (its default applies).
  template <typename T>
  const T* get(const std::string& name) const {
    const auto found = values_.find(name);
    return found == values_.end() ? nullptr : std::any_cast<T>(&found->second.value);
  }
  std::string key() const;  // "name=text;..." of every value set

 private:
  struct Value {
    std::any value;
    std::string text;
  };
  std::map<std::string, Value> values_;
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
  InputSize input_size;                        // native, or pixels (multiples of the patch)
  std::optional<double> crop;                  // none: what the checkpoint declares
  std::optional<Interpolation> interpolation;  // the same
  std::optional<std::array<float, 3>> mean, std;
  int64_t max_pixels = kDefaultMaxPixels;  // images whose header declares more are refused

  InputSettings input_settings() const { return {resize, input_size, crop, interpolation, mean, std, max_pixels}; }
  ArchOverrides arch_overrides() const { return ArchOverrides::parse(arch, config); }
  std::string key() const;
};

// The query token a view is of, as --query names it: the class token, the distillation token, a
// register token or a patch of the grid. Parsed once where it enters; resolve_query places it in a
// layer's tokens (a model without a class token takes its centre patch, with a note).
struct QuerySpec {
  enum class Kind { Class, Distillation, Register, Patch };
  Kind kind = Kind::Class;
  int index = 0;         // Register: which one (reg0 is 0)
  int row = 0, col = 0;  // Patch

  // "cls", "dist", "regN" or "ROW,COL" (whole numbers of at most 6 digits); throws
  // std::invalid_argument naming --query.
  static QuerySpec parse(const std::string& text);
  static QuerySpec patch(int row, int col);
  bool is_patch() const { return kind == Kind::Patch; }
  std::string text() const;  // as parse takes it
  bool operator==(const QuerySpec& other) const { return text() == other.text(); }
};

// What of a layer's attention the views show.
struct ViewSelection {
  int layer = -1;  // -1: the last block
  int head = 0;
  QuerySpec query;
  HeadView view = HeadView::Head;
  MapDirection direction = MapDirection::Out;
  // Outline the selected layer's windows on the maps (Swin's shifted windows where shifted), and
  // the query's own window.
  bool windows = false;
  LcmView lcm = LcmView::Before;
  // A box of patches drawn on the views, "R0,C0,R1,C1" (end-exclusive), empty: none; outlined on
  // every panel and measured by the focus metrics.
  std::string box;

  std::string key() const;
};

// The analysis view (a name of the analysis registry, views/analysis_registry.h) and what the
// analyses read.
struct AnalysisSettings {
  std::string analysis = "none";
  TargetSpec target;                              // --target (--class C: class:C); default: the top-1 class
  std::string gradcam_layer = "blocks.-1.norm1";  // a ForwardHook point (see analysis/gradcam.h)
  HeadFusion fusion = HeadFusion::Mean;           // rollout head fusion
  double discard = 0.0;                           // rollout discard ratio
  // Attribution (analysis/attribution_method.h names the methods): the workbench's attribution
  // view, the faithfulness table, eval and the faithfulness figure.
  AttributionMethod method = AttributionMethod::GradCam;  // the attribution view's method
  MethodSelection methods;                                // faithfulness and eval
  int steps = 20;                               // deletion/insertion curves: steps from the image to its replacement
  Replacement replacement = Replacement::Blur;  // what removed cells become
  int ig_steps = 50;                            // integrated gradients: points on the path
  Replacement ig_baseline = Replacement::Zero;  // integrated gradients: the image the path starts from
  FocusVectors fp_vectors = FocusVectors::Keys;
  FocusProjectionKind fp_projection = FocusProjectionKind::Channels;  // their two largest channels, or PCA
  RankMode ranks = RankMode::Auto;                                    // run's and the matrix view's spectra
  // The options of the analyses that define their own (views/analysis_*.cpp), typed.
  AnalysisOptionValues options;

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
  std::string out;                       // output folder of headless commands
  MatrixFile matrix = MatrixFile::Auto;  // run's matrix_*.npy
  // The workbench's views; headless commands read what applies to them (panel 1 is `model` with
  // `attention`).
  std::vector<PanelSpec> compare;  // side by side: panels 2..4 (model, variant, parameters), empty for one
  ExportSettings figure;

  // Every panel: panel 1 is the session's model and attention, the others their specs on top of it.
  std::vector<PanelSpec> panel_specs() const;
  std::vector<AttentionSettings> panel_settings() const;
  // The panels as a figure's rows: panel 1 without a model (the figure's own), the others with
  // theirs where it differs, each spec's parameters on top of the session's, as on screen.
  std::vector<PanelSpec> panels_as_figure_rows() const;
};

constexpr int kMaxPanels = 4;

// Which part of a session an option sets: commands take whole groups, so a new attention knob
// reaches run, analyze and export without a list of theirs naming it.
enum class OptionGroup {
  Other,
  Input,      // the checkpoint, the image and how it becomes the model's input
  Attention,  // the variant and the knob table's knobs
  Selection,  // the layer, head and query the maps are of
  Display,    // colour map, scale, opacity
  Output,     // the output folder and whether existing files are replaced
  Figure,     // an exported figure's layout, format and size
};

// One option: its flag name, help, and how it reads and writes the state (as text).
struct OptionSpec {
  std::string name;        // flag without dashes, also the session-file key
  std::string value_name;  // for help: FILE, P, W, ...
  std::string help;
  std::function<void(AppState&, const std::string&)> set;  // throws std::invalid_argument
  std::function<std::string(const AppState&)> get;
  std::string implicit_value = {};  // non-empty: a switch; `--name` alone means this value
  // The workbench's control for it where a view draws its options (views/analysis_registry.h): a
  // slider over [slider_min, slider_max] when that range is not empty, radio buttons when the value
  // name lists choices ("a|b|c"), a text field otherwise.
  double slider_min = 0, slider_max = 0;
  OptionGroup group = OptionGroup::Other;
  // A list of panel specs, kept as specs: read and set whole (session files write it as objects,
  // since a path may hold the text form's separators); null for every other option.
  const std::vector<PanelSpec>& (*panels)(const AppState&) = nullptr;
  void (*set_panels)(AppState&, std::vector<PanelSpec>) = nullptr;  // throws as `set` does
};

// The session's own options (session/option_table.cpp): everything but the analyses' (which the
// analysis registry adds: views/option_catalog.h has the whole table).
const std::vector<OptionSpec>& session_options();
// Sets every Attention-group option (the variant, the kernel's knobs, ablations, the SAE and its
// interventions) back to its default, as a model change does unless the user keeps them: none is
// known to mean the same on another checkpoint. Returns "name old -> new" for each that changed.
std::vector<std::string> reset_attention_options(AppState& state);
// The attribution options (method, methods, steps, replacement, ig-steps, ig-baseline), defined in
// session/attribution_options.cpp and appended to the session's options.
void add_attribution_options(std::vector<OptionSpec>& options);
// The faithfulness table those options ask for: --methods, --steps, --replacement, the CAM layer
// (--gradcam-layer), the attention layer (--layer), rollout's --fusion and --discard, IG's
// --ig-steps and --ig-baseline; the caller sets faithfulness.target, --target resolved against the
// model (resolve_target_spec). Throws std::invalid_argument naming a bad option.
FaithfulnessTableRequest faithfulness_request(const AppState& state);
// How a figure of the session's export settings is written (format, style, overwrite; the layout
// named as it is).
FigureOutput figure_output(const AppState& state);
const OptionSpec* find_session_option(const std::string& name);

// Option values longer than this are refused (paths are the longest: PATH_MAX is 4096).
constexpr size_t kMaxOptionValueBytes = 8192;

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
// The rows of `specs` over the session's `base` (its own variant alone when there are none).
std::vector<VariantChoice> variant_rows(const std::vector<PanelSpec>& specs, const AttentionSettings& base);
// "all" or "0,5,-1": an index list as the options write it.
std::string index_list_text(const std::vector<int>& indices);

nlohmann::json to_json(const AppState& state);
// The session as written to a file: to_json with a hub model name pinned to its commit
// (hf-hub:ORG/NAME@COMMIT), so that reopening it reads the same weights.
nlohmann::json to_session_file_json(const AppState& state);
void apply_json(AppState& state, const nlohmann::json& json);  // unknown keys are an error

// A query spec resolved against a token layout: "cls" -> 0 (or the centre patch when the model
// has no class token), "ROW,COL" -> that patch token. Throws std::invalid_argument if out of range.
struct TokenLayout;

struct ResolvedQuery {
  int token = 0;
  std::string note;  // set when a fallback was taken
};
ResolvedQuery resolve_query(const QuerySpec& query, const TokenLayout& layout);
// The same for a query as --query names it.
inline ResolvedQuery resolve_query(const std::string& text, const TokenLayout& layout) {
  return resolve_query(QuerySpec::parse(text), layout);
}

// The block index for `layer` (negative counts from the end) in a model of `depth` blocks, and a
// head index check against the heads of the layer at hand (stages of hierarchical models differ);
// both throw std::invalid_argument naming the option and the valid range.
int resolve_layer_index(int layer, int depth, const std::string& option = "--layer");
void check_head_index(int head, int heads, const std::string& option = "--head");

}  // namespace attnscope
