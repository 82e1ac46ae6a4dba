// The versioned JSON files the commands write (run's and analyze's summary.json, eval's eval.json):
// each names its kind and schema number ("schema_kind", "schema"), so a script can check what it
// reads. docs/output_schemas.md and docs/analysis_outputs.md list every kind's keys; changing a
// kind's keys bumps its number.
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

// The kinds of the commands themselves (run, eval), in the order docs/output_schemas.md describes
// them; each analysis declares its own beside it (views/analysis_registry.h, AnalysisOutput).
const std::vector<OutputSchema>& output_schemas();

// The schema of `kind`; throws std::logic_error for a kind not in output_schemas().
const OutputSchema& output_schema(const std::string& kind);

// `file` with "schema_kind" and "schema" set to those of `kind`, or of `schema`.
nlohmann::json with_schema(nlohmann::json file, const std::string& kind);
nlohmann::json with_schema(nlohmann::json file, const OutputSchema& schema);

}  // namespace attnscope
