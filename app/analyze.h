// What the `attnscope analyze` analyses share: the parsed command line, the loaded model and
// prepared image, and how summaries, CSV and JSON are written. The attribution analyses
// (app/analyze_attribution.cpp) build on it.
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "app/cli.h"
#include "models/model_loader.h"

namespace attnscope::analyze {

struct Context {
  AppState state;
  CommandLine line;
  std::filesystem::path out;
};

// The model, the prepared image and (for --glyph-seed or --object-mask) the object mask at the
// model's input size.
struct Loaded {
  LoadedModel model;
  cv::Mat prepared;
  cv::Mat object_mask;  // CV_8UC1 at the prepared size, empty when none
};

Loaded load_inputs(const Context& context);
nlohmann::json common_summary(const Context& context, const std::string& analysis, const TokenLayout& layout);
void write_json(const std::filesystem::path& path, const nlohmann::json& value);
void write_csv(const std::filesystem::path& path, const std::string& header,
               const std::vector<std::vector<double>>& rows);
std::vector<std::string> split_list(const std::string& text);

// --analysis gradcam++, xgradcam, layercam, eigencam, hirescam, scorecam, relevance, gradrollout, ig.
int attribution(const Context& context, const std::string& method);
// --analysis faithfulness: deletion and insertion curves of --methods, with a random baseline.
int faithfulness(const Context& context);

}  // namespace attnscope::analyze
