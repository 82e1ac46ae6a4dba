// A sparse autoencoder's intervention as a session setting: the SAE file, the residual-stream point
// it reads when the file does not say, and the features switched off or added. Every forward of a
// ViT-shaped model runs with it (models/sae_intervention.h), as it runs with ablated heads.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace attnscope {

struct AttentionKnob;

// One feature added at every token the SAE reads: `scale` times its decoder direction (in the
// SAE's activation units: the stream as if the feature fired `scale` more).
struct SaeFeatureAdd {
  int feature = 0;
  double scale = 0;
  bool operator==(const SaeFeatureAdd& other) const { return feature == other.feature && scale == other.scale; }
};

struct SaeSetting {
  std::string file;                // --sae: an SAE file or folder (models/sparse_autoencoder.h)
  std::string hook;                // --sae-hook: a point of the residual stream; empty: the file's own
  std::vector<int> off;            // --sae-off: features whose contribution is taken out of the stream
  std::vector<SaeFeatureAdd> add;  // --sae-add
  // Features named to switch off or add: an intervention, refused without `file` (it was ignored,
  // while the run recorded it as made).
  bool intervenes() const { return !off.empty() || !add.empty(); }
  bool operator==(const SaeSetting& other) const {
    return file == other.file && hook == other.hook && off == other.off && add == other.add;
  }
};

// The most features an intervention lists (each is a rank-one update of the stream).
constexpr size_t kMaxSaeEdits = 4096;
// The largest |scale| --sae-add takes: a feature's activations are of order one to a hundred.
constexpr double kMaxSaeAddScale = 1e6;

// "3,17" (whole numbers; "none" or "": none); throws std::invalid_argument naming the item.
std::vector<int> parse_sae_features(const std::string& option, const std::string& text);
std::string sae_features_text(const std::vector<int>& features);  // "3,17" or "none"
// "3:2.5,17:-1"; throws std::invalid_argument naming the item.
std::vector<SaeFeatureAdd> parse_sae_adds(const std::string& text);
std::string sae_adds_text(const std::vector<SaeFeatureAdd>& adds);  // "3:2.5,17:-1" or "none"

// The knob table's rows for the setting: sae, sae-hook, sae-off, sae-add.
std::vector<AttentionKnob> sae_knobs();

}  // namespace attnscope
