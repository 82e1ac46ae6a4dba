// `attnscope device-check`: the proof that a device runs the engine, in one command (what
// scripts/device_check.sh calls on a GPU machine, and with --device cpu in its rehearsal).
//   parity: every model in --models loaded on --device and on the CPU; the same random input
//     through the forward with capture under every variant the model takes; the logits, every
//     layer's q, k and v, and the attention row the workbench draws for the centre patch compared,
//     normwise, within a bound from float32 conditioning (TF32 off);
//   bench: on --device, DeiT-T/S at 224 (forward with capture, a p and a window slider change, a
//     query click, Grad-CAM), Swin-T at 224 and DINOv2-S/14 with 4 registers at 518 and 1036 px
//     (forward with capture), against eager PyTorch on the same device and weights (bench/*.py,
//     the Python given, on the same threads).
#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "analysis/attention_map.h"
#include "analysis/gradcam.h"
#include "app/bench_tools.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/excerpt.h"
#include "core/image.h"
#include "core/json_checked.h"
#include "core/number_text.h"
#include "core/scratch_folder.h"
#include "core/torch_error.h"
#include "models/cpu_threads.h"
#include "models/model_loader.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Float32's unit roundoff.
constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2^-24

// How far a float32 forward of `layers` blocks of width `width` may move between two devices that
// sum in different orders: each block's dot products of length `width` carry a relative error of
// about sqrt(width) u (random rounding), the residual stream adds them block by block, and
// LayerNorm's 1/sigma and the softmax can amplify a block's error; 32 bounds that amplification
// for the trained and random weights the check runs.
double parity_tolerance(int layers, int width) {
  return 32.0 * std::max(layers, 1) * std::sqrt(double(std::max(width, 1))) * kUnitRoundoff;
}

// max |a - b| / max |b|, both on the CPU in float64; 0 when both are empty.
double normwise_error(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || !b.defined() || b.numel() == 0) return 0.0;
  const auto reference = b.detach().to(torch::kCPU, torch::kDouble);
  const auto other = a.detach().to(torch::kCPU, torch::kDouble);
  const double scale = reference.abs().max().item<double>();
  const double difference = (other - reference).abs().max().item<double>();
  return scale > 0 ? difference / scale : difference;
}

// `text` cut to `width` characters, the cut marked with ~.
std::string shortened(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 1) + "~";
}

// `text` in a column of `width` characters, one space at least after it.
std::string column(const std::string& text, size_t width) {
  std::string cell = shortened(text, width - 1);
  cell.resize(width, ' ');
  return cell;
}

// An exception's message on one line, without LibTorch's backtrace.
std::string error_text(const std::exception& error) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  return torch_error ? torch_error_text(*torch_error) : one_line(error.what());
}

int centre_query(const AttentionCapture& capture) {
  const TokenLayout& layout = capture.layout;
  if (layout.grid_h <= 0 || layout.grid_w <= 0) return 0;
  return layout.patch_token(layout.grid_h / 2, layout.grid_w / 2);
}

std::vector<std::string> model_entries(const std::string& folder) {
  std::error_code error;
  std::vector<std::string> entries;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    if (it->path().filename().string().rfind('.', 0) != 0) entries.push_back(it->path().string());
  if (error) throw std::invalid_argument("--models " + folder + ": " + error.message());
  std::sort(entries.begin(), entries.end());
  if (entries.empty()) throw std::invalid_argument("--models " + folder + " holds no models");
  return entries;
}

struct ParityRow {
  std::string model, family, variant, outcome;  // outcome: "pass", "FAIL" or "refused: why"
  int layers = 0, width = 0;
  double logits = 0, qkv = 0, row = 0, tolerance = 0;
  json to_json() const {
    return {{"model", model},   {"family", family},      {"variant", variant},     {"outcome", outcome},
            {"layers", layers}, {"width", width},        {"logits_error", logits}, {"qkv_error", qkv},
            {"row_error", row}, {"tolerance", tolerance}};
  }
};

ParityRow compare_devices(LoadedModel& on_cpu, LoadedModel& on_device, const std::string& name, Variant variant) {
  ParityRow row;
  row.model = name;
  row.family = on_cpu.family();
  row.variant = to_string(variant);
  AttentionSettings settings;
  settings.variant = variant;
  const InputGeometry geometry = on_cpu.backbone->input_geometry();
  torch::manual_seed(0);
  const torch::Tensor input = torch::randn({1, 3, geometry.native_height, geometry.native_width});
  c10::InferenceMode inference;
  ForwardOutput reference;
  try {
    reference = on_cpu.forward(input, settings);
  } catch (const std::invalid_argument& refusal) {
    row.outcome = "refused: " + one_line(refusal.what());
    return row;
  }
  const ForwardOutput moved = on_device.forward(input.to(on_device.device), settings);
  row.logits = normwise_error(moved.logits, reference.logits);
  row.layers = int(reference.layers.size());
  for (size_t layer = 0; layer < reference.layers.size() && layer < moved.layers.size(); ++layer) {
    const AttentionCapture& expected = reference.layers[layer];
    const AttentionCapture& actual = moved.layers[layer];
    // The residual stream's width (the block's LayerNorm output), else the attention's.
    const int width =
        expected.normed_input.defined() ? int(expected.normed_input.size(-1)) : expected.heads * expected.head_dim;
    row.width = std::max(row.width, width);
    for (const auto& [a, b] : {std::pair{actual.q, expected.q}, {actual.k, expected.k}, {actual.v, expected.v}})
      row.qkv = std::max(row.qkv, normwise_error(a, b));
    // CARE's strip-convolution blocks are layers without attention: nothing to read a row from.
    if (!expected.q.defined() && !expected.probabilities.defined()) continue;
    MapSelection selection;
    selection.head = -1;
    selection.query_token = centre_query(expected);
    row.row = std::max(row.row, normwise_error(attention_map(actual, selection), attention_map(expected, selection)));
  }
  row.tolerance = parity_tolerance(row.layers, row.width);
  const bool layers_match = moved.layers.size() == reference.layers.size();
  row.outcome = layers_match && std::max({row.logits, row.qkv, row.row}) <= row.tolerance ? "pass" : "FAIL";
  return row;
}

std::vector<ParityRow> parity_table(const std::string& folder, torch::Device device) {
  std::vector<ParityRow> rows;
  std::vector<Variant> variants = {Variant::Native};
  for (const std::string& name : variant_names()) variants.push_back(parse_variant(name));
  std::cout << "parity: --device " << device.str() << " against cpu, forward with capture, normwise errors"
            << (device.is_cpu() ? " (a rehearsal: the CPU against itself checks the harness, not a device)" : "")
            << "\n"
            << column("model", 34) << column("family", 28) << column("variant", 10) << std::right << std::setw(11)
            << "logits" << std::setw(11) << "q,k,v" << std::setw(11) << "row" << std::setw(11) << "tolerance"
            << "  outcome\n";
  for (const std::string& path : model_entries(folder)) {
    const std::string name = fs::path(path).filename().string();
    auto failure = [&](const std::string& variant, const std::exception& error) {
      ParityRow row;
      row.model = name;
      row.variant = variant;
      row.outcome = "FAIL: " + error_text(error);
      std::cout << column(name, 34) << column(variant, 10) << row.outcome << "\n" << std::flush;
      rows.push_back(std::move(row));
    };
    std::optional<LoadedModel> on_cpu, on_device;
    try {
      on_cpu.emplace(load_model(path, {}, torch::kCPU));
      on_device.emplace(load_model(path, {}, device));
    } catch (const std::exception& error) {
      failure("(load)", error);
      continue;
    }
    // Each variant on its own: one that fails on the device (a kernel, memory) hides no other.
    for (const Variant variant : variants) {
      try {
        ParityRow row = compare_devices(*on_cpu, *on_device, name, variant);
        std::cout << column(name, 34) << column(row.family, 28) << column(row.variant, 10) << std::right
                  << std::scientific << std::setprecision(2);
        if (row.outcome.rfind("refused", 0) == 0)
          std::cout << "  " << shortened(row.outcome, 100);
        else
          std::cout << std::setw(11) << row.logits << std::setw(11) << row.qkv << std::setw(11) << row.row
                    << std::setw(11) << row.tolerance << "  " << row.outcome;
        std::cout << std::defaultfloat << "\n" << std::flush;
        rows.push_back(std::move(row));
      } catch (const std::exception& error) {
        failure(to_string(variant), error);
      }
    }
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------

struct BenchRow {
  BenchRow(std::string shape_text, std::string measurement_text)
      : shape(std::move(shape_text)), measurement(std::move(measurement_text)) {}
  std::string shape, measurement;
  double ours_ms = -1, eager_ms = -1;  // negative: not measured
  std::string note;
  json to_json() const {
    json row = {{"shape", shape}, {"measurement", measurement}};
    row["attnscope_ms"] = ours_ms >= 0 ? json(ours_ms) : json(nullptr);
    row["eager_ms"] = eager_ms > 0 ? json(eager_ms) : json(nullptr);
    row["ratio"] = ours_ms >= 0 && eager_ms > 0 ? json(ours_ms / eager_ms) : json(nullptr);
    if (!note.empty()) row["note"] = note;
    return row;
  }
};

struct BenchContext {
  std::string python, scripts;
  torch::Device device{torch::kCPU};
  int warmup = 3, runs = 10;
  fs::path folder;
  std::vector<BenchRow> rows;

  // The eager side: `script` with the threads, runs, warmup and device of this check.
  std::string eager(const std::string& script, const std::string& arguments) const {
    std::ostringstream command;
    command << shell_quoted(python) << " " << shell_quoted(scripts + "/" + script) << " " << arguments << " --threads "
            << torch::get_num_threads() << " --runs " << runs << " --warmup " << warmup << " --device " << device.str();
    return command.str();
  }
  void make(const std::string& script, const std::string& arguments) const {
    std::string error;
    run_python_json(
        shell_quoted(python) + " " + shell_quoted(scripts + "/" + script) + " " + arguments + " && echo '{}'", error);
    if (!error.empty()) throw std::runtime_error(script + ": " + error);
  }
  void add(BenchRow row, const std::string& eager_command, const std::string& key = "median_ms") {
    if (!eager_command.empty()) {
      std::string error;
      const json result = run_python_json(eager_command, error);
      if (result.contains(key))
        row.eager_ms = result[key].get<double>();
      else
        row.note = excerpt(error.empty() ? result.dump() : error, 200);
    }
    std::cout << std::left << std::setw(22) << row.shape << std::setw(26) << row.measurement << std::right << std::fixed
              << std::setprecision(2);
    if (row.ours_ms >= 0) std::cout << std::setw(10) << row.ours_ms << "ms";
    if (row.ours_ms >= 0 && row.eager_ms > 0)
      std::cout << std::setw(10) << row.eager_ms << "ms" << std::setw(9) << row.ours_ms / row.eager_ms << "x";
    if (!row.note.empty()) std::cout << "  (" << row.note << ")";
    std::cout << std::defaultfloat << "\n" << std::flush;
    rows.push_back(std::move(row));
  }
};

void bench_deit(BenchContext& bench, const std::string& size, int heads) {
  const std::string path = (bench.folder / ("deit_" + size + ".safetensors")).string();
  bench.make("pytorch_forward.py", "--make-deit " + size + " " + shell_quoted(path));
  LoadedModel model = load_model(path, {}, bench.device);
  torch::manual_seed(1);
  const torch::Tensor input = torch::randn({1, 3, 224, 224}).to(bench.device);
  const std::string shape = "deit-" + size + " 224";
  const std::string model_arguments = "--model " + shell_quoted(path) + " --heads " + std::to_string(heads);
  AttentionSettings softmax, focused, window;
  focused.variant = Variant::Focused;
  focused.p = 4.0;
  window.variant = Variant::Window;
  window.window = 7;
  // A slider change re-runs the forward with capture under the new setting (views/panel_forwards.cpp).
  const struct {
    const char* measurement;
    const AttentionSettings& settings;
    const char* eager_variant;
  } forwards[] = {{"forward with capture", softmax, "--variant softmax"},
                  {"p slider (focused, p=4)", focused, "--variant focused --p 4"},
                  {"window slider (7)", window, "--variant window --window 7"}};
  for (const auto& measured : forwards) {
    BenchRow row{shape, measured.measurement};
    row.ours_ms = time_forward(model, input, measured.settings, true, bench.warmup, bench.runs);
    bench.add(row, bench.eager("pytorch_forward.py", model_arguments + " " + measured.eager_variant));
  }
  // A query click reads a row from the kept capture: no forward.
  ForwardOptions capture;
  ForwardOutput kept;
  {
    c10::InferenceMode inference;
    kept = model.forward(input, softmax, capture);
  }
  int query = 0;
  BenchRow click{shape, "query click (every layer)"};
  // attention_map returns CPU tensors: every click ends synchronised.
  click.ours_ms = median_of_runs(bench.warmup, bench.runs, [&] {
    MapSelection selection;
    selection.query_token = 1 + (query++ % 196);
    for (const AttentionCapture& layer : kept.layers) attention_map(layer, selection);
  });
  click.note = "no eager counterpart: a notebook indexes probabilities it kept";
  bench.add(click, "");
  BenchRow cam{shape, "Grad-CAM"};
  cam.ours_ms = median_of_runs(bench.warmup, bench.runs, [&] {
    grad_cam(model.native("Grad-CAM"), input, softmax);
    if (bench.device.is_cuda()) torch::cuda::synchronize();
  });
  bench.add(cam, bench.eager("pytorch_gradcam.py", model_arguments), "lean_ms");
}

void bench_swin(BenchContext& bench) {
  const std::string path = (bench.folder / "swin.safetensors").string();
  bench.make("pytorch_hierarchical.py", "--make swin " + shell_quoted(path));
  LoadedModel model = load_model(path, {}, bench.device);
  torch::manual_seed(1);
  const torch::Tensor input = torch::randn({1, 3, 224, 224}).to(bench.device);
  BenchRow forward{"swin-t 224", "forward with capture"};
  forward.ours_ms = time_forward(model, input, {}, true, bench.warmup, bench.runs);
  bench.add(forward, bench.eager("pytorch_hierarchical.py", "--model " + shell_quoted(path)));
}

void bench_dinov2(BenchContext& bench, int side) {
  const std::string path = (bench.folder / "dinov2_reg.safetensors").string();
  if (!fs::exists(path)) bench.make("pytorch_scale.py", "--make " + shell_quoted(path));
  LoadedModel model = load_model(path, {}, bench.device);
  torch::manual_seed(1);
  const torch::Tensor input = torch::randn({1, 3, side, side}).to(bench.device);
  BenchRow forward{"dinov2-s14-reg4 " + std::to_string(side), "forward with capture"};
  forward.ours_ms = time_forward(model, input, {}, true, bench.warmup, bench.runs);
  bench.add(forward,
            bench.eager("pytorch_scale.py", "--model " + shell_quoted(path) + " --size " + std::to_string(side)));
}

// "518,1036" -> {518, 1036}: multiples of DINOv2's patch 14, at most kMaxInputSide.
std::vector<int> dinov2_sides(const std::string& text) {
  std::vector<int> sides;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    if (item.empty()) continue;
    const int side = parse_int_option("sides", item);
    if (side < 14 || side % 14 != 0 || side > kMaxInputSide)
      throw std::invalid_argument("--sides: " + excerpt(item) + " is not a multiple of 14 up to " +
                                  std::to_string(kMaxInputSide));
    sides.push_back(side);
  }
  return sides;
}

}  // namespace

CommandSyntax device_check_syntax() {
  return {"attnscope device-check [--device cuda] --models DIR [--python EXE] [--json FILE]",
          {"device"},
          {{"models", "DIR", "the models of the parity table: every file or folder in DIR", ""},
           {"python", "EXE", "Python with torch for the eager side of the bench table ('none': no bench table)",
            configured_python()},
           {"runs", "N", "timed runs per bench measurement", "10"},
           {"warmup", "N", "untimed runs first", "3"},
           {"sides", "LIST", "DINOv2 input sides of the bench table", "518,1036"},
           {"json", "FILE", "both tables as JSON, written atomically", ""}},
          "Exit status 1 when a parity row fails. TF32 is off for both tables."};
}

int device_check_command(const Args& args) {
  auto parsed = parse_or_print_help(args, device_check_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  configure_threads();
  const torch::Device device = resolve_device(line.state.device);
  // Every row compares the device with the CPU: "auto" on a machine without CUDA would compare the
  // CPU with itself and pass, which says nothing of any device.
  if (line.state.device == "auto" && device.is_cpu())
    throw std::invalid_argument(
        "device-check compares a device against the CPU, and this LibTorch sees no CUDA device: run it with "
        "--device cuda on a GPU machine, or --device cpu to rehearse the harness (the CPU against itself)");
  // Float32 as on the CPU: no TF32 in cuBLAS matrix products or cuDNN convolutions.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  json report = {{"device", device.str()},
                 {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                  std::to_string(TORCH_VERSION_PATCH)},
                 {"threads", torch::get_num_threads()}};
  std::cout << "attnscope device-check: device " << device.str() << ", LibTorch "
            << report["libtorch"].get<std::string>() << ", " << torch::get_num_threads() << " CPU threads\n";
  bool failed = false;
  if (line.flags["models"].empty()) throw std::invalid_argument("--models is required (the parity table's models)");
  json parity = json::array();
  for (const ParityRow& row : parity_table(line.flags["models"], device)) {
    failed = failed || row.outcome.rfind("FAIL", 0) == 0;
    parity.push_back(row.to_json());
  }
  report["parity"] = parity;
  // Written after each table: a bench that never ends still leaves the parity table.
  const auto write_report = [&] {
    if (!line.flags["json"].empty())
      write_file_atomically(line.flags["json"], [&](std::ostream& out) { out << json_text(report) << "\n"; });
  };
  write_report();
  if (line.flags["python"] != "none") {
    BenchContext bench;
    bench.python = line.flags["python"];
    bench.scripts = source_path("bench");
    bench.device = device;
    bench.runs = std::max(1, line.flag_int("runs"));
    bench.warmup = std::max(0, line.flag_int("warmup"));
    const ScratchFolder scratch("attnscope-device-check");
    bench.folder = scratch.path();
    std::cout << "\nbench: device " << device.str() << ", median of " << bench.runs << " runs after " << bench.warmup
              << ", eager PyTorch on the same device, weights and threads\n";
    // Each shape on its own: a shape that fails (its eager script, the device's memory) is a row
    // saying why, and the others still run.
    std::vector<std::pair<std::string, std::function<void()>>> shapes = {
        {"deit-tiny 224", [&] { bench_deit(bench, "tiny", 3); }},
        {"deit-small 224", [&] { bench_deit(bench, "small", 6); }},
        {"swin-t 224", [&] { bench_swin(bench); }}};
    for (const int side : dinov2_sides(line.flags["sides"]))
      shapes.push_back({"dinov2-s14-reg4 " + std::to_string(side), [&bench, side] { bench_dinov2(bench, side); }});
    for (const auto& [shape, run] : shapes) {
      try {
        run();
      } catch (const std::exception& error) {
        BenchRow row{shape, "(failed)"};
        row.note = error_text(error);
        bench.add(row, "");
      }
      // After each shape: a crash later still leaves the rows measured so far.
      json rows = json::array();
      for (const BenchRow& row : bench.rows) rows.push_back(row.to_json());
      report["bench"] = rows;
      write_report();
    }
  }
  // Flushed now: a crash after this line (as on the H200, in LibTorch's CUDA teardown) still shows it.
  std::cout << (failed ? "device-check: a parity row FAILED" : "device-check: every parity row passed") << std::endl;
  return failed ? 1 : 0;
}

}  // namespace attnscope
