// What the parity tests of every backbone family share: their case lists (cases.json written by
// the independent Python generators in tests/python/), the variant a case asks for, and the error.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/attention_settings.h"

namespace attnscope::testing_cases {

inline double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// The cases in `folder`/cases.json, all of them or those of one family.
inline std::vector<nlohmann::json> read_cases(const std::string& folder, const std::string& family = "") {
  std::ifstream in(folder + "cases.json");
  if (!in) throw std::runtime_error("missing " + folder + "cases.json (run tests/python/make_all_fixtures.sh)");
  std::vector<nlohmann::json> selected;
  for (const auto& c : nlohmann::json::parse(in))
    if (family.empty() || c.at("family") == family) selected.push_back(c);
  return selected;
}

inline AttentionSettings settings_from(const nlohmann::json& variant) {
  AttentionSettings settings;
  const std::string kernel = variant.at("kernel");
  settings.variant = kernel == "native" ? Variant::Native : parse_variant(kernel);
  settings.p = variant.at("p").get<double>();
  settings.window = variant.at("window").is_null() ? 0 : variant.at("window").get<int>();
  return settings;
}

}  // namespace attnscope::testing_cases
