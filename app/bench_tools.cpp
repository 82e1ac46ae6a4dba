#include "app/bench_tools.h"

#include <algorithm>
#include <cstdio>

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

namespace attnscope {

double median_ms(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double time_forward(LoadedModel& model, const torch::Tensor& input, const AttentionSettings& settings, bool capture,
                    int warmup, int runs) {
  c10::InferenceMode inference_mode;
  ForwardOptions options;
  options.capture = capture;
  return median_of_runs(warmup, runs, [&] {
    model.forward(input, settings, options);
    if (model.device.is_cuda()) torch::cuda::synchronize();
  });
}

nlohmann::json run_python_json(const std::string& command, std::string& error) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    error = "cannot start the Python reference";
    return {};
  }
  std::string output;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  const auto start = output.rfind('{');
  auto json =
      start == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output.substr(start), nullptr, false);
  if (status != 0 || !json.is_object()) {
    error = "PyTorch reference failed: " + output.substr(0, 300);
    return {};
  }
  return json;
}

std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace attnscope
