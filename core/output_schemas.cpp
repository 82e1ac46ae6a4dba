// The registry of versioned output files; see output_schemas.h.
#include "core/output_schemas.h"

#include <stdexcept>

namespace attnscope {

const std::vector<OutputSchema>& output_schemas() {
  static const std::vector<OutputSchema> schemas = {
      {"run", "summary.json", 2},
      {"analyze-gradcam", "summary.json", 1},
      {"analyze-rollout", "summary.json", 1},
      {"analyze-spectrum", "summary.json", 2},
      {"analyze-fp", "summary.json", 1},
      {"analyze-metrics", "summary.json", 1},
      {"analyze-cam", "summary.json", 1},
      {"analyze-relevance", "summary.json", 1},
      {"analyze-ig", "summary.json", 1},
      {"analyze-faithfulness", "summary.json", 1},
      {"analyze-pca", "summary.json", 1},
      {"analyze-similarity", "summary.json", 1},
      {"analyze-norms", "summary.json", 1},
      {"analyze-headstats", "summary.json", 1},
      {"analyze-dino-masks", "summary.json", 1},
      {"analyze-erf", "summary.json", 1},
      {"analyze-cka", "summary.json", 1},
      {"eval-models", "eval.json", 1},
      {"eval-images", "eval.json", 1},
      {"eval-dino-masks", "eval.json", 1},
  };
  return schemas;
}

const OutputSchema& output_schema(const std::string& kind) {
  for (const OutputSchema& schema : output_schemas())
    if (kind == schema.kind) return schema;
  throw std::logic_error("no output schema '" + kind + "' (core/output_schemas.cpp)");
}

nlohmann::json with_schema(nlohmann::json file, const std::string& kind) {
  const OutputSchema& schema = output_schema(kind);
  file["schema_kind"] = schema.kind;
  file["schema"] = schema.version;
  return file;
}

}  // namespace attnscope
