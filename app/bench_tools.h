// What every benchmark shares: medians, the timed forward, and the eager PyTorch baselines of
// bench/, which run as a Python process that prints one JSON line.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_loader.h"

namespace attnscope {

double median_ms(std::vector<double> samples);

// The median of `runs` calls of work() after `warmup` untimed ones (work synchronises the device
// itself where it runs on one).
template <typename Work>
double median_of_runs(int warmup, int runs, Work work) {
  std::vector<double> samples;
  for (int i = 0; i < warmup + runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    work();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= warmup) samples.push_back(ms);
  }
  return median_ms(samples);
}

// The median of `runs` forwards (after `warmup` untimed ones) under InferenceMode, with or without
// capture, the device synchronised before each clock reading.
double time_forward(LoadedModel& model, const torch::Tensor& input, const AttentionSettings& settings, bool capture,
                    int warmup, int runs);

// The float32 GEMM rate (GFLOP/s) of `device` (the CPU at the current thread count), from a
// 2048^3 product: the rate a forward made of matrix products cannot beat. On the CPU the faster
// of torch::mm (OpenBLAS here) and oneDNN's linear, the two GEMMs the forward's linear layers
// choose between.
double gemm_gflops(torch::Device device = torch::kCPU);

// "GEMM limit 140 GFLOP/s (2048^3 float32, ...)": how every bench header states the rate.
std::string gemm_limit_text(double gflops, torch::Device device = torch::kCPU);

// The matrix-product work (GFLOP) of one forward of a plain ViT of width `dim` and `depth` blocks
// (MLP 4 dim) on `tokens` tokens: qkv, proj and MLP, and the attention products `settings` asks for
// (q k^T and A v for softmax; K^T V and Q (K^T V) for linear, focused and enhanced; per window or
// through the anchors for window and anchor).
double vit_forward_gflop(double tokens, double dim, double depth, double heads, const AttentionSettings& settings);

// The machine the numbers come from: CPU model, its widest vector extension, and the BLAS kernels
// (OpenBLAS's core, OPENBLAS_CORETYPE).
std::string machine_line();

// Why a row has no eager time: the Python side's error, or --python none.
std::string no_reference(const std::string& error);

// Runs a Python script that prints one JSON line last; returns it, or an empty object and `error`.
nlohmann::json run_python_json(const std::string& command, std::string& error);

// The two OpenMP settings every eager baseline runs under, each in a process of its own: PyTorch's
// defaults (this environment without OMP_WAIT_POLICY and GOMP_SPINCOUNT: libgomp spins a few
// milliseconds before it sleeps), as users run it, and attnscope's (this process's environment:
// PASSIVE unless the user set a policy). A ratio divides by the faster of the two.
enum class EagerThreading { PyTorchDefaults, Attnscope };
inline constexpr EagerThreading kEagerThreadings[] = {EagerThreading::PyTorchDefaults, EagerThreading::Attnscope};

// The words that start an eager baseline's command line under `threading` (none for attnscope's).
std::vector<std::string> eager_environment(EagerThreading threading);

// run_python_json for the eager baseline `command` (a shell line) under `threading`.
nlohmann::json run_eager_json(const std::string& command, EagerThreading threading, std::string& error);

// One eager quantity's timings under both settings, gathered in alternating rounds.
class EagerTimes {
 public:
  void add(EagerThreading threading, double ms) { samples_[int(threading)].push_back(ms); }
  bool empty() const { return samples_[0].empty() && samples_[1].empty(); }
  // The median under `threading`; 0 when it has none.
  double median(EagerThreading threading) const;
  // The faster median: what a ratio against eager divides by.
  double faster() const;

 private:
  std::vector<double> samples_[2];
};

// The eager columns of a bench row: "  41.20ms  48.10ms   0.66x", each median and `ours_ms` over the
// faster (a missing median prints as "-"). eager_headers() are their titles in the same widths.
std::string eager_columns(double ours_ms, const EagerTimes& eager);
std::string eager_headers(const std::string& prefix = "");

// "OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=10000": this process's OpenMP wait settings, as every
// bench header and the eager legend state them.
std::string openmp_settings_text();

// What the two eager columns are, for the footnote of every table that has them.
std::string eager_legend();

// `text` in single quotes for a shell command line (a quote inside is closed, escaped and reopened).
std::string shell_quoted(const std::string& text);

}  // namespace attnscope
