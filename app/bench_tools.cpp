#include "app/bench_tools.h"
#include "core/excerpt.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include "models/token_linear.h"

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

double gemm_gflops(torch::Device device) {
  c10::InferenceMode inference_mode;
  const auto a = torch::randn({2048, 2048}).to(device), b = torch::randn({2048, 2048}).to(device);
  torch::mm(a, b);
  double ms = median_of_runs(device.is_cuda() ? 3 : 0, device.is_cuda() ? 20 : 3, [&] {
    torch::mm(a, b);
    if (device.is_cuda()) torch::cuda::synchronize();
  });
  if (device.is_cpu()) {
    // The CPU forward's linear layers may run on oneDNN (models/token_linear.h), whose kernels
    // are not OpenBLAS's: where they are faster, they are the limit.
    const torch::Tensor bias = torch::zeros({2048});
    const torch::Tensor a_onednn = a.to_mkldnn();
    at::mkldnn_linear(a_onednn, b, bias).to_dense();
    ms = std::min(ms, median_of_runs(0, 3, [&] { at::mkldnn_linear(a_onednn, b, bias).to_dense(); }));
  }
  return 2.0 * 2048.0 * 2048.0 * 2048.0 / (ms * 1e6);
}

std::string gemm_limit_text(double gflops, torch::Device device) {
  return "GEMM limit " + std::to_string(std::lround(gflops)) + " GFLOP/s (2048^3 float32, " +
         (device.is_cpu() ? "the faster of torch::mm and oneDNN's linear)" : "torch::mm)");
}

double vit_forward_gflop(double tokens, double dim, double depth, double heads, const AttentionSettings& settings) {
  // Bench models are plain ViTs: their native kernel is softmax.
  const int window = settings.window > 0 ? settings.window : settings.variant == Variant::Window ? kDefaultWindow : 0;
  const double keys = window > 0 ? std::min(tokens, double(window) * window) : tokens;
  const KernelSpec& spec = kernel_spec(swapped_kernel(settings.variant, Kernel::Softmax));
  const double attention = spec.multiply_adds(settings, tokens, keys, dim, dim / heads);
  return 2.0 * depth * (12.0 * tokens * dim * dim + attention) / 1e9;
}

std::string machine_line() {
  std::string model = "unknown CPU", flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = line.substr(colon + 2);
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = " " + line.substr(colon + 1) + " ";
  }
  const std::string vector = flags.find(" avx512f ") != std::string::npos ? "AVX-512"
                             : flags.find(" avx2 ") != std::string::npos  ? "AVX2"
                                                                          : "no AVX2";
  // OpenBLAS names the kernels it picked; another BLAS has no such symbol.
  using CoreName = char* (*)();
  const auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return model + " (" + vector + "), BLAS " +
         (core_name ? "OpenBLAS with " + std::string(core_name()) + " kernels" : std::string("not OpenBLAS")) +
         " (OPENBLAS_CORETYPE=" + (coretype ? coretype : "unset") + ")";
}

nlohmann::json run_python_json(const std::string& command, std::string& error) {
  // In a subshell, so that the error output of every part of a compound command comes back.
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!pipe) {
    error = "cannot start the Python reference";
    return {};
  }
  std::string output;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  // The last line that opens an object (warnings may come before it; the object may nest others).
  auto start = output.rfind("\n{");
  start = start == std::string::npos ? (output.rfind('{', 0) == 0 ? 0 : std::string::npos) : start + 1;
  auto json =
      start == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output.substr(start), nullptr, false);
  if (status != 0 || !json.is_object()) {
    // On one line (it lands in a table cell), with the exit status when the program said nothing.
    const std::string said = one_line(output.substr(0, 300));
    error = "PyTorch reference failed: " +
            (said.find_first_not_of(' ') == std::string::npos
                 ? "it exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
                       " and printed nothing (does --python name a Python with torch?)"
                 : said);
    return {};
  }
  return json;
}

std::vector<std::string> eager_environment(EagerThreading threading) {
  if (threading == EagerThreading::Attnscope) return {};
  return {"env", "-u", "OMP_WAIT_POLICY", "-u", "GOMP_SPINCOUNT"};
}

nlohmann::json run_eager_json(const std::string& command, EagerThreading threading, std::string& error) {
  std::string line;
  for (const std::string& word : eager_environment(threading)) line += word + " ";
  return run_python_json(line + command, error);
}

double EagerTimes::median(EagerThreading threading) const {
  const std::vector<double>& samples = samples_[int(threading)];
  return samples.empty() ? 0.0 : median_ms(samples);
}

double EagerTimes::faster() const {
  double best = 0.0;
  for (const EagerThreading threading : kEagerThreadings) {
    const double ms = median(threading);
    if (ms > 0 && (best == 0.0 || ms < best)) best = ms;
  }
  return best;
}

std::string eager_columns(double ours_ms, const EagerTimes& eager) {
  std::ostringstream columns;
  columns << std::fixed << std::setprecision(2);
  for (const EagerThreading threading : kEagerThreadings) {
    const double ms = eager.median(threading);
    if (ms > 0)
      columns << std::setw(10) << ms << "ms";
    else
      columns << std::setw(12) << "-";
  }
  columns << std::setw(8) << ours_ms / eager.faster() << "x";
  return columns.str();
}

std::string eager_headers(const std::string& prefix) {
  std::ostringstream headers;
  headers << std::setw(12) << prefix + "eager" << std::setw(12) << prefix + "eager/P" << std::setw(9) << "ratio";
  return headers.str();
}

std::string openmp_settings_text() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return std::string("OMP_WAIT_POLICY=") + (policy ? policy : "unset") + ", GOMP_SPINCOUNT=" + (spin ? spin : "unset");
}

std::string eager_legend() {
  return "eager: PyTorch eager in a process of its own at its default OpenMP settings (no OMP_WAIT_POLICY or "
         "GOMP_SPINCOUNT), as users run it; eager/P: the same under attnscope's (" +
         openmp_settings_text() + "); both at attnscope's thread count. ratio: attnscope over the faster of the two";
}

std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string no_reference(const std::string& error) {
  return "  (no PyTorch reference: " + (error.empty() ? std::string("--python none") : error) + ")";
}

}  // namespace attnscope
