// The registry of versioned output files; see output_schemas.h.
#include "core/output_schemas.h"

#include <stdexcept>

namespace attnscope {

const std::vector<OutputSchema>& output_schemas() {
  static const std::vector<OutputSchema> schemas = {
      {"run", "summary.json", 2},
      {"eval-models", "eval.json", 1},
      {"eval-images", "eval.json", 1},
      {"eval-dino-masks", "eval.json", 1},
  };
  return schemas;
}

const OutputSchema& output_schema(const std::string& kind) {
  for (const OutputSchema& schema : output_schemas())
    if (kind == schema.kind) return schema;
  throw std::logic_error("no output schema '" + kind + "' (core/output_schemas.cpp, or an analysis's outputs)");
}

nlohmann::json with_schema(nlohmann::json file, const std::string& kind) {
  return with_schema(std::move(file), output_schema(kind));
}

nlohmann::json with_schema(nlohmann::json file, const OutputSchema& schema) {
  file["schema_kind"] = schema.kind;
  file["schema"] = schema.version;
  return file;
}

}  // namespace attnscope
