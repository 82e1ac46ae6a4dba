// What the analyses' headless runs (`attnscope analyze`) share: the parsed command line, the loaded
// model and prepared image, and how summaries, CSV and JSON are written.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "core/output_files.h"
#include "core/value_scale.h"
#include "models/model_loader.h"
#include "session/command_line.h"

namespace attnscope {

struct AnalyzeContext {
  AppState state;
  CommandLine line;
  std::filesystem::path out;
  mutable std::vector<std::string> warnings;  // the model's, printed once the analysis succeeded
  // Every output, written together once the analysis is done: existing files are refused first.
  std::shared_ptr<OutputFiles> files;
};

// The model, the prepared image and (for --glyph-seed or --object-mask) the object mask at the
// model's input size.
struct Loaded {
  LoadedModel model;
  cv::Mat prepared;
  cv::Mat object_mask;  // CV_8UC1 at the prepared size, empty when none
};

// `analyze` flags that several analyses read (declared by each in its registry entry).
extern const CommandFlag kVariantsFlag;  // --variants: spectrum and metrics compare variants
extern const CommandFlag kTopKFlag;      // --top-k: f_p and metrics

Loaded load_inputs(const AnalyzeContext& context);
nlohmann::json common_summary(const AnalyzeContext& context, const std::string& analysis, const TokenLayout& layout,
                              const Loaded& loaded);
// Adds summary.json to the context's outputs, with the schema of output kind `kind`
// ("analyze-gradcam", ...: core/output_schemas.h, docs/output_schemas.md).
void write_summary(const AnalyzeContext& context, const std::string& kind, const nlohmann::json& summary);
void write_csv(const AnalyzeContext& context, const std::string& name, const std::string& header,
               const std::vector<std::vector<double>>& rows);
// A map over the model's input image in the session's colour map, opacity and alpha mode, on `scale`.
cv::Mat overlay_in_colours(const AnalyzeContext& context, const cv::Mat& rgb, const torch::Tensor& map,
                           const ValueScale& scale);
// The session's colour map over [0, 1], labelled.
ValueScale unit_scale(const AnalyzeContext& context, const std::string& label);
std::vector<std::string> split_list(const std::string& text);
// --variants (a comma-separated list), else the session's variant alone.
std::vector<Variant> variants_to_compare(const AnalyzeContext& context);
// One forward pass per variant to compare (--variants), each handed the selected layer's capture.
void for_each_variant_layer(const AnalyzeContext& context, Loaded& loaded,
                            const std::function<void(Variant, const AttentionCapture&, int layer)>& visit);

}  // namespace attnscope
