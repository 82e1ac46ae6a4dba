// What attention a run computes: the variant and its knobs (p, window, anchors, DWC, f_p norms),
// and the typed modes behind them. Variant and FocusNorm each have one name table
// (attention_settings.cpp) that parsing, to_string, help texts and GUI labels all read. Shared by
// the engine, the CLI, session files and the GUI; none of it needs a model reload.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

enum class Variant {
  Native,    // whatever the checkpoint's attention modules are (softmax for plain timm blocks)
  Softmax,   // ViT/DeiT dot-product attention
  Linear,    // ReLU kernel linear attention
  Focused,   // FLatten: f_p on ReLU features, optional depthwise conv on V
  Enhanced,  // L2ViT linear global attention: ReLU, per-head temperature, clamped denominator
  Window,    // softmax restricted to w x w windows of the patch grid
  Anchor,    // AnchorFormer: attention through m anchors
};

// Where FLatten's f_p takes its norms: over all C channels (the authors' code) or per head
// (the paper's formula applied to each head's d channels).
enum class FocusNorm { AllChannels, PerHead };

struct AttentionSettings {
  Variant variant = Variant::Native;
  double p = 3.0;   // FLatten focusing factor
  int window = 0;   // 0: global; w > 0 restricts patch queries to their w x w window
  int anchors = 0;  // 0: all learned anchors; m > 0: m anchors (pooled from K for swaps)
  bool dwc = true;  // use the depthwise conv on V where the checkpoint has its weights
  FocusNorm norm = FocusNorm::AllChannels;
};

// The window the `window` variant uses when none is given (Swin's default).
constexpr int kDefaultWindow = 7;
// Anchors pooled from K when a layer has no learned ones and no count is given (AnchorFormer's m).
constexpr int kDefaultPooledAnchors = 30;

// One row of the variant table.
struct VariantSpec {
  Variant variant;
  const char* name;         // CLI, session files, panel specs, the GUI combo
  const char* description;  // help texts and GUI tooltips
};
// In the order help texts and combos list them; defined beside the kernel table
// (models/attention_kernels.cpp).
const std::vector<VariantSpec>& variant_table();
const VariantSpec& variant_spec(Variant variant);

Variant parse_variant(const std::string& name);  // throws std::invalid_argument
std::string to_string(Variant variant);
std::vector<std::string> variant_names();  // every swap, without "native" (bench defaults)
std::string variant_choices();             // "native, softmax, ... or anchor", for help and errors

// One row of the f_p norm table.
struct FocusNormSpec {
  FocusNorm norm;
  const char* name;
  const char* description;
};
const std::vector<FocusNormSpec>& focus_norm_table();
FocusNorm parse_focus_norm(const std::string& name);  // throws std::invalid_argument
std::string to_string(FocusNorm norm);
std::string focus_norm_choices();  // "all|head": the option's value, in help texts and errors
std::string focus_norm_help();     // "f_p norms over all channels (authors' code) or per head (paper)"

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
