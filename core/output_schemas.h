// The versioned JSON files the commands write (run's and analyze's summary.json, eval's eval.json):
// each names its kind and schema number ("schema_kind", "schema"), so a script can check what it
// reads. docs/output_schemas.md lists every kind's keys; changing a kind's keys bumps its number.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnscope {

struct OutputSchema {
  const char* kind;  // "run", "analyze-gradcam", "eval-images", ...
  const char* file;  // the file's name in --out
  int version;       // the schema number, 1 when it was introduced
};

// Every kind, in the order docs/output_schemas.md describes them.
const std::vector<OutputSchema>& output_schemas();

// The schema of `kind`; throws std::logic_error for a kind not in output_schemas().
const OutputSchema& output_schema(const std::string& kind);

// `file` with "schema_kind" and "schema" set to those of `kind`.
nlohmann::json with_schema(nlohmann::json file, const std::string& kind);

}  // namespace attnscope
