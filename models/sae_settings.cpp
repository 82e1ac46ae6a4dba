#include "models/sae_settings.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/excerpt.h"
#include "core/number_text.h"
#include "models/attention_settings.h"
#include "models/residual_hooks.h"

namespace attnscope {

namespace {

// The items of a list separated by commas (or '+', as panel specs write a list inside one value).
std::vector<std::string> list_items(const std::string& option, const std::string& text) {
  std::vector<std::string> items;
  if (text.empty() || text == "none") return items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find_first_of(",+", begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    if (items.size() > kMaxSaeEdits)
      throw std::invalid_argument("--" + option + " lists more than " + std::to_string(kMaxSaeEdits) + " features");
    begin = end + 1;
  }
  return items;
}

int feature_number(const std::string& option, const std::string& item) {
  if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("--" + option + ": '" + excerpt(item) +
                                "' is not a feature number (whole numbers from 0, separated by commas)");
  return std::stoi(item);
}

// A knob on one field of SaeSetting, shown as a text field and applied on Enter.
template <typename T>
AttentionKnob sae_knob(T SaeSetting::*field, AttentionKnob row, std::function<T(const std::string&)> parse,
                       std::function<std::string(const T&)> format) {
  row.control = KnobControl::Text;
  row.every_kernel = true;
  row.set = [field, parse](AttentionSettings& settings, const std::string& text) { settings.sae.*field = parse(text); };
  row.text = [field, format](const AttentionSettings& settings) { return format(settings.sae.*field); };
  row.summary = [field, format](const AttentionSettings& settings) {
    return nlohmann::json(format(settings.sae.*field));
  };
  row.copy = [field](const AttentionSettings& from, AttentionSettings& to) { to.sae.*field = from.sae.*field; };
  row.equal = [field](const AttentionSettings& a, const AttentionSettings& b) { return a.sae.*field == b.sae.*field; };
  return row;
}

}  // namespace

std::vector<int> parse_sae_features(const std::string& option, const std::string& text) {
  std::vector<int> features;
  for (const std::string& item : list_items(option, text)) {
    const int feature = feature_number(option, item);
    for (int listed : features)
      if (listed == feature) throw std::invalid_argument("--" + option + ": feature " + item + " is listed twice");
    features.push_back(feature);
  }
  return features;
}

std::string sae_features_text(const std::vector<int>& features) {
  if (features.empty()) return "none";
  std::string text;
  for (int feature : features) text += (text.empty() ? "" : ",") + std::to_string(feature);
  return text;
}

std::vector<SaeFeatureAdd> parse_sae_adds(const std::string& text) {
  std::vector<SaeFeatureAdd> adds;
  for (const std::string& item : list_items("sae-add", text)) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("--sae-add: '" + excerpt(item) + "' is not FEATURE:SCALE (e.g. 12:4.5)");
    SaeFeatureAdd add;
    add.feature = feature_number("sae-add", item.substr(0, colon));
    add.scale = parse_double_option("sae-add", item.substr(colon + 1));
    if (std::abs(add.scale) > kMaxSaeAddScale)
      throw std::invalid_argument("--sae-add: the scale of feature " + std::to_string(add.feature) + " is outside +-" +
                                  format_double(kMaxSaeAddScale));
    for (const SaeFeatureAdd& listed : adds)
      if (listed.feature == add.feature)
        throw std::invalid_argument("--sae-add: feature " + std::to_string(add.feature) + " is listed twice");
    adds.push_back(add);
  }
  return adds;
}

std::string sae_adds_text(const std::vector<SaeFeatureAdd>& adds) {
  if (adds.empty()) return "none";
  std::string text;
  for (const SaeFeatureAdd& add : adds)
    text += (text.empty() ? "" : ",") + std::to_string(add.feature) + ":" + format_double(add.scale);
  return text;
}

std::vector<AttentionKnob> sae_knobs() {
  const auto same = [](const std::string& text) { return text; };
  std::vector<AttentionKnob> knobs;
  knobs.push_back(sae_knob<std::string>(
      &SaeSetting::file,
      {"sae", "FILE",
       "a sparse autoencoder (saev sae.pt, a ViT-Prisma, SAELens or dictionary_learning folder) on the model's "
       "residual stream: analyze --analysis sae, and what --sae-off and --sae-add change",
       "sae="},
      same, same));
  knobs.back().control_label = "SAE file";
  knobs.push_back(sae_knob<std::string>(
      &SaeSetting::hook,
      {"sae-hook", "HOOK",
       "the point the SAE reads (blocks.L.hook_resid_post, hook_resid_pre, hook_attn_out, hook_mlp_out, "
       "hook_resid_mid): needed when the file does not say, refused when it says another",
       "sae-hook="},
      [](const std::string& text) {
        if (!text.empty()) parse_stream_point(text);
        return text;
      },
      same));
  knobs.back().control_label = "SAE hook";
  knobs.push_back(sae_knob<std::vector<int>>(
      &SaeSetting::off,
      {"sae-off", "N,..",
       "SAE features switched off at every token: their decoder directions times their activations leave the "
       "stream, the SAE's reconstruction error stays",
       "sae-off="},
      [](const std::string& text) { return parse_sae_features("sae-off", text); }, sae_features_text));
  knobs.back().control_label = "features off";
  knobs.push_back(sae_knob<std::vector<SaeFeatureAdd>>(
      &SaeSetting::add,
      {"sae-add", "N:SCALE,..",
       "SAE features added at every token: SCALE times the feature's decoder direction (as if it fired SCALE more)",
       "sae-add="},
      parse_sae_adds, sae_adds_text));
  knobs.back().control_label = "features added";
  return knobs;
}

}  // namespace attnscope
