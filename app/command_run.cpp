// `attnscope run`: one image through one model with one attention variant; writes the summary,
// logits, the chosen attention row and matrix, and an overlay into a folder.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/spectrum.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/npy.h"
#include "models/inference.h"

namespace attnscope {

namespace {

const std::vector<std::string> kRunOptions = {"model",   "image", "out",    "variant", "p",         "window",
                                              "anchors", "dwc",   "norm",   "layer",   "head",      "query",
                                              "resize",  "size",  "device", "arch",    "max-pixels"};

void require(const std::string& value, const std::string& name) {
  if (value.empty()) throw std::invalid_argument("--" + name + " is required");
}

// The patch part of a row [T] as the grid [grid_h, grid_w].
torch::Tensor patch_grid(const torch::Tensor& row, const TokenLayout& layout) {
  return row.slice(0, layout.prefix_tokens()).reshape({layout.grid_h, layout.grid_w});
}

}  // namespace

int run_command(const Args& args) {
  const std::string usage =
      "attnscope run [--model FILE] [--image FILE] --out DIR [options]\n"
      "  (without --model and --image: the bundled demo model and sample image)";
  auto parsed = parse_or_print_help(args, usage, kRunOptions, {});
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  AppState& state = line.state;
  if (state.model.empty()) state.model = default_model_path();
  if (state.model.empty()) throw std::invalid_argument("--model is required (assets/models holds no bundled model)");
  if (state.image.empty()) state.image = default_image_path();
  require(state.out, "out");

  configure_threads();
  const torch::Device device = resolve_device(state.device);
  LoadedModel model = load_model(state.model, ArchOverrides::parse(state.arch), device);
  const cv::Mat prepared = prepare_model_input(load_image_rgb(state.image, state.max_pixels), state, model.arch);
  const InferenceResult result = run_inference(model, prepared, state.attention);
  const TokenLayout& layout = result.forward.layout;

  const int depth = int(result.forward.layers.size());
  const int layer = resolve_layer_index(state.layer, depth);
  const int heads = model.arch.heads;
  check_head_index(state.head, heads);
  const ResolvedQuery query = resolve_query(state.query, layout);

  const std::filesystem::path out(state.out);
  const std::string suffix = "_l" + std::to_string(layer) + "_h" + std::to_string(state.head);
  const AttentionCapture& capture = result.forward.layers[size_t(layer)];

  // Everything is computed and checked before the first file is written: a failure writes nothing.
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = result.forward.logits[0].to(torch::kCPU, torch::kFloat);
  const torch::Tensor row = capture.row(0, state.head, query.token).to(torch::kCPU);
  const torch::Tensor matrix = capture.matrix(0, state.head).to(torch::kCPU);
  if (!torch::isfinite(logits).all().item<bool>())
    throw std::runtime_error("the model's output is not finite (NaN or Inf): check the checkpoint's weights");
  if (!torch::isfinite(matrix).all().item<bool>())
    throw std::runtime_error("the attention of layer " + std::to_string(layer) + " head " + std::to_string(state.head) +
                             " is not finite (NaN or Inf)");
  const torch::Tensor grid = patch_grid(row, layout);
  const cv::Mat overlay = overlay_patch_map(result.input_rgb, grid, Colormap::Viridis, 0.6f, 0.0f,
                                            std::max(grid.max().item<float>(), 1e-12f));

  // Ranks need a full SVD per head: above 400 tokens (DINOv2 at 518 px has 1370) that is seconds
  // per layer, so only the selected layer's heads are summarised there.
  const bool every_layer = layout.total_tokens() <= 400;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = every_layer ? 0 : layer; l < (every_layer ? depth : layer + 1); ++l) {
    const AttentionCapture& layer_capture = result.forward.layers[size_t(l)];
    nlohmann::json layer_heads = nlohmann::json::array();
    for (int h = 0; h < heads; ++h) {
      const torch::Tensor matrix = layer_capture.matrix(0, h);
      const Spectrum spectrum = matrix_spectrum(matrix);
      layer_heads.push_back({{"head", h},
                             {"rank", spectrum.numerical_rank},
                             {"effective_rank", spectrum.effective_rank},
                             {"entropy", row_entropy(matrix[query.token])}});
    }
    layers.push_back({{"layer", l}, {"attention", layer_capture.attention.describe()}, {"heads", layer_heads}});
  }
  nlohmann::json top = nlohmann::json::array();
  for (const auto& p : result.top)
    top.push_back({{"index", p.index}, {"name", p.name}, {"logit", p.logit}, {"probability", p.probability}});
  nlohmann::json summary = {
      {"model", state.model},
      {"format", model.format},
      {"container", model.container_key},
      {"architecture", model.arch},
      {"parameters", model.parameter_count},
      {"image", state.image},
      {"input_size", {prepared.rows, prepared.cols}},
      {"resize", to_string(state.resize)},
      {"tokens",
       {{"prefix", layout.prefix_tokens()},
        {"grid", {layout.grid_h, layout.grid_w}},
        {"total", layout.total_tokens()}}},
      {"variant", to_string(state.attention.variant)},
      {"settings",
       {{"p", state.attention.p},
        {"window", state.attention.window},
        {"anchors", state.attention.anchors},
        {"dwc", state.attention.dwc},
        {"norm", to_string(state.attention.norm)}}},
      {"device", result.device},
      {"forward_ms", result.milliseconds},
      {"layer", layer},
      {"head", state.head},
      {"query", {{"spec", state.query}, {"token", query.token}, {"name", layout.token_name(query.token)}}},
      {"output", {{"kind", model.arch.output_kind}, {"size", result.forward.logits.size(-1)}}},
      {"normalization",
       {{"mean", model.normalization.mean}, {"std", model.normalization.std}, {"source", model.normalization_source}}},
      {"top5", top},
      {"layers", layers},
  };
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  if (!every_layer) summary["layers_note"] = "more than 400 tokens: ranks of the selected layer only";
  if (!model.report.notes.empty()) summary["notes"] = model.report.notes;
  if (!model.report.warnings.empty()) summary["warnings"] = model.report.warnings;
  // Paths are bytes: a name that is not UTF-8 is written with replacement characters, never fails.
  const std::string summary_text = summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::filesystem::create_directories(state.out);
  write_npy((out / "logits.npy").string(), logits);
  write_npy((out / ("attention" + suffix + ".npy")).string(), row);
  write_npy((out / ("matrix" + suffix + ".npy")).string(), matrix);
  write_png_rgb((out / ("overlay" + suffix + ".png")).string(), overlay);
  write_file_atomically((out / "summary.json").string(), [&](std::ostream& stream) { stream << summary_text << "\n"; });

  std::cout << "attnscope run: " << model.arch.family() << " on " << result.device << ", "
            << capture.attention.describe() << ", forward " << result.milliseconds << " ms\n";
  for (const auto& p : result.top) std::cout << "  " << p.index << " " << p.name << "  p=" << p.probability << "\n";
  if (result.top.empty())
    std::cout << "  output: " << model.arch.output_kind << " of " << result.forward.logits.size(-1)
              << " values, no classes\n";
  print_warnings("run", model.report.warnings);  // a run that fails names the tensors in its error
  std::cout << "wrote " << out.string() << "/{summary.json, logits.npy, attention" << suffix << ".npy, matrix" << suffix
            << ".npy, overlay" << suffix << ".png}\n";
  return 0;
}

}  // namespace attnscope
