// What attention a run computes: the variant and its knobs (p, window, anchors, DWC, f_p norms),
// and the typed modes behind them. Variant and FocusNorm each have one name table that parsing,
// to_string, help texts and GUI labels all read, and every knob is a row of the knob table. Shared
// by the engine, the CLI, session files and the GUI; none of it needs a model reload.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/enum_names.h"
#include "models/sae_settings.h"

namespace attnscope {

enum class Variant {
  Native,    // whatever the checkpoint's attention modules are (softmax for plain timm blocks)
  Softmax,   // ViT/DeiT dot-product attention
  Linear,    // ReLU kernel linear attention
  Focused,   // FLatten: f_p on ReLU features, optional depthwise conv on V
  Enhanced,  // L2ViT linear global attention: ReLU, per-head temperature, clamped denominator
  Window,    // softmax restricted to w x w windows of the patch grid
  Anchor,    // AnchorFormer: attention through m anchors
  Agent,     // Agent Attention: agent tokens pooled from the queries, two softmaxes
  InLine,    // InLine: injective linear attention, q.k shifted by its row mean (rows sum to one)
  Mlla,      // MLLA: ELU + 1 linear attention with RoPE on the numerator (Mamba-like linear attention)
  Pola,      // PolaFormer: same- and opposite-sign parts of q.k, each weighing half of the value channels
};

// Where FLatten's f_p takes its norms: over all C channels (the authors' code) or per head
// (the paper's formula applied to each head's d channels).
enum class FocusNorm { AllChannels, PerHead };

// A head of a ViT: block `layer`, head `head`, both from 0 ("3.1" on the command line).
struct HeadIndex {
  int layer = 0, head = 0;
  bool operator==(const HeadIndex& other) const { return layer == other.layer && head == other.head; }
};
std::string head_name(const HeadIndex& head);  // "3.1"

// What an ablated head's value-weighted sum z (ViT-Prisma's hook_z, without the value bias) becomes:
// zero, or its mean per token position over a folder's images through the unablated model.
enum class AblationKind { Zero, Mean };

// The heads every forward of a ViT runs without (models/head_ablation.h). Empty: none.
struct HeadAblationSetting {
  std::vector<HeadIndex> heads;
  AblationKind kind = AblationKind::Zero;
  std::string images;  // AblationKind::Mean: the folder the means are taken over
  bool empty() const { return heads.empty(); }
  bool operator==(const HeadAblationSetting& other) const {
    return heads == other.heads && kind == other.kind && images == other.images;
  }
};
// "L.H[,L.H...]" (or "+" between heads, as panel specs write it; "none" or "": no heads) as heads;
// throws std::invalid_argument naming the item that is malformed or listed twice. The model's
// bounds are checked where the heads meet a model.
std::vector<HeadIndex> parse_head_list(const std::string& text);
std::string head_list_text(const std::vector<HeadIndex>& heads);  // "3.1,5.0", or "none"
// The first block an ablation changes (where a resumed forward starts); INT_MAX for none.
int first_ablated_layer(const HeadAblationSetting& ablation);

struct AttentionSettings {
  Variant variant = Variant::Native;
  double p = 3.0;      // FLatten focusing factor
  int window = 0;      // 0: global; w > 0 restricts patch queries to their w x w window
  int anchors = 0;     // 0: all learned anchors; m > 0: m anchors (pooled from K for swaps)
  int agents = 0;      // 0: the learned count, or kDefaultAgents; a square count of agent tokens
  double alpha = 4.0;  // PolaFormer (kDefaultPolaAlpha): the power is 1 + alpha * sigmoid(learned), in [1, 1 + alpha]
  bool dwc = true;     // use the depthwise conv on V where the checkpoint has its weights
  FocusNorm norm = FocusNorm::AllChannels;
  HeadAblationSetting ablation;  // heads knocked out of every forward (ViT-shaped models)
  SaeSetting sae;                // a sparse autoencoder's features switched off or added (ViT-shaped models)
};

// The window the `window` variant uses when none is given (Swin's default).
constexpr int kDefaultWindow = 7;
// Anchors pooled from K when a layer has no learned ones and no count is given (AnchorFormer's m).
constexpr int kDefaultPooledAnchors = 30;
// Agent tokens pooled from the queries when a layer has no learned count and none is given (the
// authors' DeiT-T/S: 7 x 7).
constexpr int kDefaultAgents = 49;
// FLatten's focusing factor p: the largest the knob takes. f_p divides by each vector's largest
// channel before the power, so the other channels' powers underflow float32 past about p = 38 at a
// ratio of 0.1: the features become one-hot and rows of keys without the query's channel go to zero.
constexpr double kMaxFocusingFactor = 32.0;
// PolaFormer's alpha: its configs' value, and the largest the knob takes: powers up to 1 + alpha
// = 9 keep a product of two powered features of order 30 finite in float32 (30^18 ~ 4e26).
constexpr double kDefaultPolaAlpha = 4.0;
constexpr double kMaxPolaAlpha = 8.0;

// The variants and f_p norm modes by name (core/enum_names.h): parsing, to_string, help texts and
// GUI labels read the tables. The variant table sits beside the kernel table
// (models/attention_kernels.cpp), in the order help texts and combos list them.
template <>
struct EnumTable<Variant> {
  static const std::vector<EnumEntry<Variant>>& entries();
};
template <>
struct EnumTable<FocusNorm> {
  static const std::vector<EnumEntry<FocusNorm>>& entries();
};
template <>
struct EnumTable<AblationKind> {
  static const std::vector<EnumEntry<AblationKind>>& entries();
};

Variant parse_variant(const std::string& name);  // throws std::invalid_argument
inline std::string to_string(Variant variant) { return enum_name(variant); }
std::vector<std::string> variant_names();  // every swap, without "native" (bench defaults)
std::string variant_choices();             // "native, softmax, ... or anchor", for help and errors
inline std::string to_string(FocusNorm norm) { return enum_name(norm); }
inline FocusNorm parse_focus_norm(const std::string& name) { return parse_enum<FocusNorm>("norm", name); }
std::string focus_norm_choices();  // "all|head": the option's value, in help texts and errors
std::string focus_norm_help();     // "f_p norms over all channels (authors' code) or per head (paper)"

// ---- The knob table ---------------------------------------------------------------------------
// Every knob of AttentionSettings besides the variant is one row: its option (CLI flag, session
// key, panel-spec key and summary.json's settings key alike), how it parses, prints and copies,
// its workbench control, and which kernels read it (the kernel table's `knobs`). The option
// table, panel specs, request keys, run's summary and the workbench's controls all iterate it, so
// a new knob is its field in AttentionSettings and its row here (models/attention_kernels.cpp).

// Where the workbench draws its control: in each panel's block (a panel spec may set its own),
// or once for every panel.
enum class KnobScope { Panel, Shared };
// The control: a slider over a fixed range (Slider), a slider over 1..the layer's grid side or
// patch count whose 0 is a named default (GridSlider, PatchSlider), a switch, or one button a
// choice (Choice: the value's name table).
// Text: a text field, applied on Enter (a list of heads, a folder).
enum class KnobControl { Slider, GridSlider, PatchSlider, Switch, Choice, Text };

struct AttentionKnob {
  AttentionKnob(std::string knob, std::string value, std::string description, std::string label_prefix)
      : name(std::move(knob)),
        value_name(std::move(value)),
        help(std::move(description)),
        label(std::move(label_prefix)) {}
  std::string name;        // "p": --p, the session key, panel specs' p=, summary.json's settings.p
  std::string value_name;  // for help texts: "P", "on|off", "all|head"
  std::string help;
  std::string label;  // how a panel's label shows a value it sets: "p=8", "w=3", "m=16", "dwc=off"
  KnobScope scope = KnobScope::Shared;
  KnobControl control = KnobControl::Slider;
  double slider_min = 0, slider_max = 0;  // Slider's range
  std::string zero_means;                 // GridSlider, PatchSlider: what 0 is ("global", "default")
  std::string zero_note;                  // ... in a few more words, under the control
  std::string control_label;              // the control's label: "p (focused)", "depthwise conv (DWC)"
  // Learned parameters (KernelRead bits, models/attention_kernels.h) the knob needs the checkpoint
  // to have: without them its control is off (the DWC switch on a model without DWC weights).
  unsigned needs = 0;
  // Whether the control is off where the panel's kernel does not read the knob (else it stays
  // live: a session's shared value reaches panels that switch to a kernel that reads it).
  bool only_where_read = false;
  // Whether every kernel reads it (head ablation acts on the heads' outputs, whatever the kernel).
  bool every_kernel = false;
  // Parses `text` (as the option takes it) into the settings; throws std::invalid_argument
  // naming the knob and what is wrong.
  std::function<void(AttentionSettings&, const std::string& text)> set;
  std::function<std::string(const AttentionSettings&)> text;        // as options and sessions write it
  std::function<nlohmann::json(const AttentionSettings&)> summary;  // as summary.json writes it
  std::function<void(const AttentionSettings& from, AttentionSettings& to)> copy;
  std::function<bool(const AttentionSettings&, const AttentionSettings&)> equal;
  // A GUI control's numeric view of the value (sliders and switches) and its inverse.
  std::function<double(const AttentionSettings&)> number;
  std::function<void(AttentionSettings&, double)> set_number;
  // Switch: the two values' names (off, on); Choice: the value names, from its name table.
  std::vector<std::string> choices;
};

// Every knob, in the order help texts, panel labels and summaries list them.
const std::vector<AttentionKnob>& attention_knobs();
const AttentionKnob* find_attention_knob(const std::string& name);
// Every knob's value, for caches of forward passes.
std::string knobs_key(const AttentionSettings& settings);
// Every field of the attention settings (the variant and every knob), for caches of forward passes.
std::string settings_key(const AttentionSettings& settings);

// What the window option does on a model. The GUI picks its control from `kind` (what 0 means)
// and shows `text`.
struct WindowSupport {
  enum class Kind {
    None,       // the option does nothing here; `text` says why
    SwappedIn,  // 0 is global attention, w restricts patch queries to a w x w window (a ViT)
    Trained,    // the windowed blocks have trained windows: 0 keeps them, w replaces them (Swin, L2ViT)
  };
  Kind kind = Kind::None;
  std::string text;
  bool applies() const { return kind != Kind::None; }
};

inline const WindowSupport kSwappedInWindows = {
    WindowSupport::Kind::SwappedIn, "restricts patch queries to their w x w window (prefix tokens stay global)"};

}  // namespace attnscope
