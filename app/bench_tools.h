// What every benchmark shares: medians, the timed forward, and the eager PyTorch baselines of
// bench/, which run as a Python process that prints one JSON line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_loader.h"

namespace attnscope {

double median_ms(std::vector<double> samples);

// The median of `runs` forwards (after `warmup` untimed ones) under InferenceMode, with or without
// capture, the device synchronised before each clock reading.
double time_forward(LoadedModel& model, const torch::Tensor& input, const AttentionSettings& settings, bool capture,
                    int warmup, int runs);

// Runs a Python script that prints one JSON line last; returns it, or an empty object and `error`.
nlohmann::json run_python_json(const std::string& command, std::string& error);

// `text` in single quotes for a shell command line (a quote inside is closed, escaped and reopened).
std::string shell_quoted(const std::string& text);

}  // namespace attnscope
