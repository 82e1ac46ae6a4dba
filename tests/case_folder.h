// One folder of fixtures written by an independent Python generator (tests/python/make_*_cases.py):
// its cases.json, the models and arrays the cases name, and the comparison parity tests make.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/npy.h"
#include "models/model_loader.h"
#include "tests/numeric_bounds.h"

namespace attnscope {

class CaseFolder {
 public:
  explicit CaseFolder(const std::string& name) : dir_(std::string(ATTNSCOPE_TEST_DATA_DIR) + "/" + name + "/") {
    std::ifstream in(dir_ + "cases.json");
    if (!in) throw std::runtime_error("missing " + dir_ + "cases.json (run tests/python/make_all_fixtures.sh)");
    cases_ = nlohmann::json::parse(in);
  }
  const nlohmann::json& cases() const { return cases_; }
  const std::string& dir() const { return dir_; }
  // A model of cases()["models"], with its head count when the file cannot tell it.
  LoadedModel load_model(const std::string& name) const {
    const auto& entry = cases_.at("models").at(name);
    ArchOverrides overrides;
    if (!entry.at("heads").is_null()) overrides.values["heads"] = entry.at("heads").get<int>();
    return attnscope::load_model(dir_ + entry.at("file").get<std::string>(), overrides, torch::kCPU);
  }
  // The .npy file a case names under `key`.
  torch::Tensor array(const nlohmann::json& entry, const char* key) const {
    return read_npy(dir_ + entry.at(key).get<std::string>());
  }

 private:
  std::string dir_;
  nlohmann::json cases_;
};

}  // namespace attnscope
