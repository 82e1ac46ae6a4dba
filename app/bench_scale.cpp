#include "app/bench_scale.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "analysis/attention_map.h"
#include "app/bench_tools.h"
#include "core/assets.h"
#include "core/image.h"
#include "core/image_encode.h"
#include "core/npy.h"
#include "models/inference.h"
#include "models/model_loader.h"

namespace attnscope {

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// `argv` run without a shell, its output and errors in `log` (in the bench's private folder): its
// last line parsed as JSON (null when it is not), wall time and the peak resident memory of the
// process (and its children) in MB.
struct ProcessRun {
  nlohmann::json last_json;
  double wall_ms = 0.0;
  double peak_mb = 0.0;
  std::string output;
};

ProcessRun run_process(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  ProcessRun run;
  std::vector<char*> arguments;
  for (const std::string& argument : argv) arguments.push_back(const_cast<char*>(argument.c_str()));
  arguments.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) _exit(126);
    execvp(arguments[0], arguments.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(child, &status, 0, &usage);
  run.wall_ms = elapsed_ms(start);
  run.peak_mb = double(usage.ru_maxrss) / 1024.0;  // the largest child: the command itself
  std::ifstream file(log);
  run.output.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  const auto brace = run.output.rfind('{');
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && brace != std::string::npos)
    run.last_json = nlohmann::json::parse(run.output.substr(brace), nullptr, false);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) run.last_json = nullptr;
  return run;
}

}  // namespace

namespace {

// The models --scale runs, each a family of bench/pytorch_scale.py: its file (a folder where a
// config.json names the registered architecture whose settings both sides run), its input sides and
// its sizes for the GEMM limit.
struct ScaleModel {
  std::string name, file;
  std::vector<int> sides;
  int dim, depth, heads;
  std::string description;
};

const std::vector<ScaleModel>& scale_models() {
  static const std::vector<ScaleModel> models = {
      {"dinov2", "dinov2_s14_reg4.safetensors", {518, 1036}, 384, 12, 6, "DINOv2-S/14 with 4 registers (timm layout"},
      {"dinov3",
       "dinov3_s16",
       {512, 1024},
       384,
       12,
       6,
       "DINOv3-S/16 (timm's vit_small_patch16_dinov3: rotary positions, 4 storage tokens"},
      {"siglip2",
       "siglip2_b16_512",
       {512},
       768,
       12,
       12,
       "SigLIP 2 B/16 at 512 px (timm's vit_base_patch16_siglip_512: no class token, the attention-pool head"}};
  return models;
}

}  // namespace

std::string scale_model_names() {
  std::string names;
  for (const ScaleModel& model : scale_models()) names += (names.empty() ? "" : "|") + model.name;
  return names;
}

void bench_scale(const std::string& python, const std::filesystem::path& folder, const std::string& model_name) {
  const ScaleModel* chosen = nullptr;
  for (const ScaleModel& model : scale_models())
    if (model.name == model_name) chosen = &model;
  if (!chosen) throw std::invalid_argument("--scale-model '" + model_name + "' is not one of " + scale_model_names());
  const std::string script = source_path("bench/pytorch_scale.py");
  const std::filesystem::path log = folder / "process.out";
  const std::string model_path = (folder / chosen->file).string();
  if (python.empty())
    throw std::invalid_argument("bench --scale needs the Python with torch (--python): it writes the weights");
  if (run_process({python, script, "--family", model_name, "--make", model_path}, log).output.find("Error") !=
      std::string::npos)
    throw std::runtime_error("bench/pytorch_scale.py could not write the model");
  char self[4096] = {0};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  const std::string attnscope = length > 0 ? std::string(self, size_t(length)) : "attnscope";
  const double gflops = gemm_gflops();
  std::cout << "attnscope bench --scale: " << chosen->description << ", random weights), " << torch::get_num_threads()
            << " threads, " << gemm_limit_text(gflops) << "\n"
            << machine_line() << "\n";
  std::cout << std::left << std::setw(11) << "input" << std::right << std::setw(8) << "tokens" << std::setw(12)
            << "forward" << std::setw(12) << "eager" << std::setw(12) << "eager/P" << std::setw(8) << "ratio"
            << std::setw(11) << "GEMM lim" << std::setw(11) << "run" << std::setw(8) << "/eager" << std::setw(10)
            << "peak" << std::setw(11) << "max diff" << std::setw(10) << "click" << std::setw(10) << "layer"
            << "\n";
  LoadedModel model = load_model(model_path, {}, torch::kCPU);
  for (const int side : chosen->sides) {
    const std::string image = (folder / ("noise" + std::to_string(side) + ".png")).string();
    RgbImage noise(side, side);
    std::mt19937 random{unsigned(side)};
    for (size_t i = 0; i < noise.bytes(); ++i) noise.data()[i] = uint8_t(random() >> 24);
    write_png(image, noise);
    const std::filesystem::path out = folder / ("run" + std::to_string(side));
    std::filesystem::remove_all(out);
    // The whole `run` process: load, forward with capture, the selected layer's summary, files.
    const ProcessRun run = run_process(
        {attnscope, "run", "--resize", "none", "--model", model_path, "--image", image, "--out", out.string()}, log);
    // The forward with capture in this process, as the workbench runs it.
    InputSettings input;
    input.resize = ResizeMode::None;
    configure_input(model, input);
    // Its own noise image: the largest budget there is.
    const RgbImage prepared = prepare_model_input(load_image_rgb(image, kLargestMaxPixels), input, model);
    const int runs = side > 600 ? 1 : 3;
    std::vector<double> forward_ms;
    InferenceResult result;
    for (int i = 0; i < runs + 1; ++i) {
      result = run_inference(model, prepared, {});
      if (i > 0 || runs == 1) forward_ms.push_back(result.milliseconds);
    }
    std::sort(forward_ms.begin(), forward_ms.end());
    const double forward = forward_ms[forward_ms.size() / 2];
    // What a click on another query and a layer change cost without a forward: the map of a new
    // query in the shown layer, and the map of another layer (the workbench's view functions).
    const auto& layers = result.forward.layers;
    const AttentionCapture& last = layers.back();
    MapSelection selection;
    selection.query_token = last.layout.patch_token(last.layout.grid_h / 3, last.layout.grid_w / 3);
    auto start = std::chrono::steady_clock::now();
    attention_map(last, selection);
    const double click_ms = elapsed_ms(start);
    start = std::chrono::steady_clock::now();
    attention_map(layers[layers.size() / 2], selection);
    const double layer_ms = elapsed_ms(start);
    // The eager baseline under both OpenMP settings (app/bench_tools.h); the faster is the ratio's base.
    EagerTimes eager;
    ProcessRun eager_run;
    for (const EagerThreading threading : kEagerThreadings) {
      std::vector<std::string> command = eager_environment(threading);
      for (const std::string& word :
           {python, script, std::string("--family"), model_name, std::string("--model"), model_path,
            std::string("--image"), image, std::string("--threads"), std::to_string(torch::get_num_threads()),
            std::string("--runs"), std::to_string(runs), std::string("--compare"), (out / "logits.npy").string()})
        command.push_back(word);
      eager_run = run_process(command, log);
      if (!eager_run.last_json.is_object()) break;
      eager.add(threading, eager_run.last_json["median_ms"].get<double>());
    }
    const double tokens = double(last.layout.total_tokens());
    const double limit_ms = vit_forward_gflop(tokens, chosen->dim, chosen->depth, chosen->heads, {}) / gflops * 1000.0;
    std::ostringstream row;
    row << std::fixed << std::left << std::setw(11) << (std::to_string(side) + "x" + std::to_string(side)) << std::right
        << std::setw(8) << int(tokens) << std::setprecision(2) << std::setw(10) << forward / 1000 << " s";
    if (eager_run.last_json.is_object()) {
      const double eager_ms = eager.faster();
      for (const EagerThreading threading : kEagerThreadings)
        row << std::setw(10) << eager.median(threading) / 1000 << " s";
      row << std::setw(7) << forward / eager_ms << "x";
      row << std::setw(10) << forward / limit_ms << "x" << std::setw(9) << run.wall_ms / 1000 << " s" << std::setw(7)
          << run.wall_ms / eager_ms << "x";
      row << std::setw(7) << std::setprecision(0) << run.peak_mb << " MB" << std::scientific << std::setprecision(1)
          << std::setw(11) << eager_run.last_json.value("max_abs_diff", -1.0) << std::fixed;
    } else {
      row << "  (no eager: " << eager_run.output.substr(0, 200) << ")";
    }
    row << std::setprecision(1) << std::setw(7) << click_ms << " ms" << std::setw(7) << layer_ms << " ms";
    std::cout << row.str() << "\n" << std::flush;
  }
  std::cout
      << "forward: attnscope's with capture (median of 3, 1 above 600 px); eager, eager/P: bench/pytorch_scale.py, "
         "the same weights and threads; ratio: forward over the faster eager; GEMM lim: forward / the GEMM work at "
         "the 2048^3 rate; run: the whole `attnscope run --resize none` process, over the faster eager, and its "
         "peak memory; max diff: its output against eager; click / layer: a new query's map in the last layer / "
         "the map of the middle layer, from the captured q, k, no forward\n"
      << eager_legend() << "\n";
}

}  // namespace attnscope
