#include "app/bench_family.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "app/bench_tools.h"
#include "core/assets.h"
#include "core/excerpt.h"
#include "models/model_loader.h"
#include "models/token_linear.h"

namespace attnscope {

namespace {

// The eager reference's name for a variant's kernel, where tests/python/reference_hier.py swaps it
// into every block as attnscope does; empty where it has none (window sizes, anchors and the kernels
// after them). The list is the script's, not the kernel table's: a new kernel joins it when the
// script learns it.
std::string eager_hierarchical_kernel(Variant variant) {
  static const std::set<Variant> in_reference = {Variant::Native, Variant::Softmax, Variant::Linear, Variant::Focused,
                                                 Variant::Enhanced};
  return in_reference.count(variant) ? to_string(variant) : "";
}

// The FLatten authors' successors, timed against their own modules (bench/pytorch_authors.py): native
// only, since the authors' modules have no kernel to swap.
const std::set<std::string> kAuthorsFamilies = {"agent_swin_tiny", "inline_swin_tiny", "pola_swin_tiny", "mlla_tiny"};

void bench_authors_module(const std::string& family, const std::filesystem::path& folder, const std::string& python,
                          torch::Device device, int warmup, int runs, int rounds) {
  const std::string script = shell_quoted(source_path("bench/pytorch_authors.py"));
  std::string error;
  const std::filesystem::path model_folder = folder / family;
  run_python_json(shell_quoted(python) + " " + script + " --make " + shell_quoted(family) + " " +
                      shell_quoted(model_folder.string()) + " && echo '{}'",
                  error);
  if (!error.empty()) throw std::invalid_argument("--family " + family + ": " + error);
  const std::string path = (model_folder / "model.pth").string();
  LoadedModel model = load_model(path, {}, device);
  torch::manual_seed(1);
  const auto input = torch::randn({1, 3, 224, 224}).to(device);
  std::cout << "attnscope bench --family " << family << ": " << model.family() << ", " << model.parameter_count
            << " parameters, " << torch::get_num_threads() << " threads (" << openmp_settings_text() << "), device "
            << device.str() << ", input 1x3x224x224, the authors' own module eagerly on the same weights, median over "
            << rounds << " alternating rounds of the median of " << runs << " runs\n"
            << machine_line() << "\n"
            << linear_backend_line();
  std::vector<double> ours;
  EagerTimes eager;
  for (int round = 0; round < rounds; ++round) {
    ours.push_back(time_forward(model, input, AttentionSettings{}, true, warmup, runs));
    std::ostringstream command;
    command << shell_quoted(python) << " " << script << " --model " << shell_quoted(path) << " --threads "
            << torch::get_num_threads() << " --runs " << runs << " --warmup " << warmup << " --device " << device.str();
    for (const EagerThreading threading : kEagerThreadings) {
      const nlohmann::json result = run_eager_json(command.str(), threading, error);
      if (result.contains("median_ms")) eager.add(threading, result["median_ms"].get<double>());
    }
  }
  const double ours_ms = median_ms(ours);
  std::cout << std::left << std::setw(10) << "variant" << std::right << std::setw(12) << "capture" << eager_headers()
            << "\n"
            << std::left << std::setw(10) << "native" << std::right << std::fixed << std::setprecision(2)
            << std::setw(10) << ours_ms << "ms" << (eager.empty() ? no_reference(error) : eager_columns(ours_ms, eager))
            << "\n"
            << eager_legend() << "\n";
}

}  // namespace

void bench_family(const std::string& family, const std::vector<Variant>& variants, const std::filesystem::path& folder,
                  const std::string& python, torch::Device device, int warmup, int runs, int rounds) {
  // The name first: an unknown one was blamed on --python, or refused after the GEMM calibration.
  if (family != "swin" && family != "pvt" && !kAuthorsFamilies.count(family)) {
    std::string known = "swin, pvt";
    for (const std::string& name : kAuthorsFamilies) known += ", " + name;
    throw std::invalid_argument("--family " + excerpt(family, 40) + ": no such bench family (" + known + ")");
  }
  if (python.empty()) throw std::invalid_argument("--family needs the Python reference to write the weights");
  if (kAuthorsFamilies.count(family)) return bench_authors_module(family, folder, python, device, warmup, runs, rounds);
  const std::string script = shell_quoted(source_path("bench/pytorch_hierarchical.py"));
  std::string error;
  // The script refuses a family it cannot build, naming the ones it can.
  const std::string path = (folder / (family + ".safetensors")).string();
  run_python_json(shell_quoted(python) + " " + script + " --make " + shell_quoted(family) + " " + shell_quoted(path) +
                      " && echo '{}'",
                  error);
  if (!error.empty()) throw std::invalid_argument("--family " + family + ": " + error);
  LoadedModel model = load_model(path, {}, device);
  torch::manual_seed(1);
  const auto input = torch::randn({1, 3, 224, 224}).to(device);
  const double gflops = gemm_gflops(device);
  std::cout << "attnscope bench --family " << family << ": " << model.family() << ", " << model.parameter_count
            << " parameters, " << torch::get_num_threads() << " threads (" << openmp_settings_text() << "), device "
            << device.str() << ", input 1x3x224x224, median over " << rounds << " alternating rounds of the median of "
            << runs << " runs\n"
            << machine_line() << "\n"
            << gemm_limit_text(gflops, device) << "\n"
            << linear_backend_line();

  std::vector<Variant> rows{Variant::Native};
  for (const Variant variant : variants)
    if (std::find(rows.begin(), rows.end(), variant) == rows.end()) rows.push_back(variant);
  std::string kernels;
  for (const Variant variant : rows) {
    const std::string kernel = eager_hierarchical_kernel(variant);
    if (!kernel.empty()) kernels += (kernels.empty() ? "" : ",") + kernel;
  }
  std::map<Variant, std::vector<double>> ours;
  std::map<Variant, EagerTimes> eager;
  std::map<Variant, double> gemm_gflop;  // each forward's matrix products, counted by the eager side as it runs
  for (int round = 0; round < rounds; ++round) {
    for (const Variant variant : rows) {
      AttentionSettings settings;
      settings.variant = variant;
      ours[variant].push_back(time_forward(model, input, settings, true, warmup, runs));
    }
    std::ostringstream command;
    command << shell_quoted(python) << " " << script << " --model " << shell_quoted(path) << " --kernels " << kernels
            << " --threads " << torch::get_num_threads() << " --runs " << runs << " --warmup " << warmup << " --device "
            << device.str();
    for (const EagerThreading threading : kEagerThreadings) {
      const nlohmann::json result = run_eager_json(command.str(), threading, error);
      for (const Variant variant : rows) {
        const std::string kernel = eager_hierarchical_kernel(variant);
        if (kernel.empty() || !result.contains("kernels") || !result["kernels"].contains(kernel)) continue;
        eager[variant].add(threading, result["kernels"][kernel]["median_ms"].get<double>());
        gemm_gflop[variant] = result["kernels"][kernel]["gemm_gflop"].get<double>();
      }
    }
  }

  std::cout << std::left << std::setw(10) << "variant" << std::right << std::setw(12) << "capture" << std::setw(10)
            << "GEMM lim" << std::setw(10) << "GFLOP" << eager_headers() << "\n";
  for (const Variant variant : rows) {
    const double ours_ms = median_ms(ours[variant]);
    std::cout << std::left << std::setw(10) << to_string(variant) << std::right << std::fixed << std::setprecision(2)
              << std::setw(10) << ours_ms << "ms";
    const double work = gemm_gflop[variant];
    if (work > 0)
      std::cout << std::setw(9) << ours_ms / (work / gflops * 1000.0) << "x" << std::setw(10) << std::setprecision(4)
                << work << std::setprecision(2);
    else
      std::cout << std::setw(20) << "";
    if (!eager[variant].empty())
      std::cout << eager_columns(ours_ms, eager[variant]);
    else if (eager_hierarchical_kernel(variant).empty())
      std::cout << "  (no eager reference: bench/pytorch_hierarchical.py swaps native, softmax, linear, focused, "
                   "enhanced)";
    else
      std::cout << no_reference(error);
    std::cout << "\n" << std::flush;
  }
  std::cout << "GEMM lim: the forward with capture over the time its matrix products take at the GEMM limit; "
               "GFLOP: those products, counted by the eager side as it runs; "
            << eager_legend() << "\n";
}

}  // namespace attnscope
