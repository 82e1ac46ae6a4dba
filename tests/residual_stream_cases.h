// The residual-stream cases (tests/python/make_residual_stream_cases.py) as the residual-stream and
// head-ablation tests read them.
#pragma once

#include <string>
#include <vector>

#include "models/attention_settings.h"
#include "tests/case_folder.h"

namespace attnscope {

inline const CaseFolder& residual_stream_cases() {
  static const CaseFolder cases("residual_stream_cases");
  return cases;
}

// The case's attention: its kernel (native unless it swaps one in), p and the DWC switch.
inline AttentionSettings case_settings(const nlohmann::json& c) {
  AttentionSettings settings;
  const std::string kernel = c.at("variant").at("kernel");
  settings.variant = kernel == "native" ? Variant::Native : parse_variant(kernel);
  settings.p = c.at("variant").at("p").get<double>();
  settings.dwc = c.at("variant").at("dwc").get<bool>();
  return settings;
}

// The heads the case ablates, [[layer, head], ...].
inline std::vector<HeadIndex> case_ablated_heads(const nlohmann::json& c) {
  std::vector<HeadIndex> heads;
  for (const auto& pair : c.at("ablate_heads")) heads.push_back({pair[0].get<int>(), pair[1].get<int>()});
  return heads;
}

}  // namespace attnscope
