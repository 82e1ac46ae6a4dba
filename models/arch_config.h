// What the weights cannot show (heads of softmax blocks, windows, stripe widths, head widths, the
// training input), read from where researchers keep it, in one order of precedence:
//   1. --arch (command line or session), in attnscope's keys or the authors';
//   2. --config FILE: a timm hub config.json or an authors' training yaml (FLatten's cfgs/*.yaml);
//   3. the file's own attnscope_arch metadata (safetensors) or FILE.arch.json sidecar;
//   4. config.json's model_args beside the weights (what timm's push_to_hub writes);
//   5. an authors' yaml beside the weights;
//   6. the released configuration of the registered name the files give (config.json
//      `architecture`, yaml MODEL.TYPE), from the family's table.
// What no source gives, the family takes from its released models and says so: an ArchAssumption
// in `info`, summary.json and the workbench's status line. Where that default does not fit the
// weights, the family refuses with what to give instead (unfit_default_error).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"

namespace attnscope {

// --arch and --config as the user gave them.
struct ArchOverrides {
  nlohmann::json values = nlohmann::json::object();  // attnscope's keys (arch_keys())
  std::string config_file;                           // --config; empty: none
  // "heads=1/2/3/4,window=7,attn_type=LLSS": pairs split by ',', per-stage values by '/' (neither
  // appears in a flag or a number). Throws std::invalid_argument naming the pair at fault.
  static ArchOverrides parse(const std::string& arch, const std::string& config_file = "");
};

// One architecture value attnscope reads, its name in the authors' constructors and what it means.
struct ArchKey {
  const char* key;      // attnscope's: "heads"
  const char* authors;  // the constructors' keyword: "num_heads"
  const char* meaning;
  // Counts: one whole number per stage (or one for all); Flag: true or false (1 or 0 after --arch).
  enum Kind { Count, Counts, Number, Text, Flag } kind;
};
// Every key: heads and img_size, which every family reads, then each family's own
// (BackboneFamily::config_keys, models/model_families.h).
const std::vector<ArchKey>& arch_keys();

// A value of an authors' training yaml (FLatten's cfgs/*.yaml): its path and the constructor
// keyword it is ({"MODEL", "SWIN", "NUM_HEADS"} is num_heads).
struct YamlArchKey {
  std::vector<const char*> path;
  const char* argument;
};

// A value no source gave: what the family took, and why.
struct ArchAssumption {
  std::string key;
  nlohmann::json value;
  std::string why;
  // "heads = 1/2/5/8 (PVT v2's released heads): give it with config.json model_args num_heads,
  // --config FILE or --arch heads=..."
  std::string describe() const;
  nlohmann::json to_json() const;
};

// The list summary.json and `info --json` write: [{key, value, why, how}].
nlohmann::json assumed_json(const std::vector<ArchAssumption>& assumed);

// The refusal of a default that demonstrably does not fit: `problem` ("the weights do not show PVT
// v2's heads, and the released 5 heads of stage 2 do not divide its width 48"), then where to give `key`.
CheckpointError unfit_default_error(const std::string& problem, const std::string& key);
// "config.json model_args num_heads, --config FILE or --arch heads=V1/V2/..."
std::string where_to_give(const std::string& key);

// A registered model name and its constructor's keyword arguments (JSON text, authors' names).
struct ReleasedArch {
  const char* name;
  const char* model_args;
};

// Every source's values in attnscope's keys, merged in the order above, and where each came from.
struct ArchConfig {
  // When a registered name was found, values["registered_args"] holds its constructor's keyword
  // arguments with the configs' model_args laid over them in the authors' names (what the family
  // builds, checked against the weights' shapes).
  nlohmann::json values = nlohmann::json::object();
  std::map<std::string, std::string> sources;  // key -> "config.json model_args", "--arch", ...
  std::string architecture;                    // the registered name a source gave; empty: none
  std::vector<std::string> notes;              // which files were read, overrides between them
};

struct BackboneFamily;

// Reads every source for a checkpoint of `family` whose weights are `weights_file`. Throws
// CheckpointError for a file that cannot be read, a value of the wrong kind, or a registered name
// of another family than the weights'.
ArchConfig gather_arch_config(const BackboneFamily& family, const Checkpoint& checkpoint,
                              const std::string& weights_file, const ArchOverrides& overrides);

// The family whose table holds `name` and its released arguments; null when no table does.
const ReleasedArch* find_released(const std::string& name, const BackboneFamily** family = nullptr);

// One whole number per stage from `values[key]`: a list, one number for all, or the authors'
// "1-1-1-1" / "1/2/3/4" strings; empty when absent. Throws CheckpointError when it is not that or
// names another number of stages.
std::vector<int> stage_counts(const nlohmann::json& values, const std::string& key, size_t stages);

}  // namespace attnscope
