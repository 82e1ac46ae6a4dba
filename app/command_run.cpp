// `attnscope run`: one image through one model with one attention variant; writes the summary,
// logits, the chosen attention row and matrix, and an overlay into a folder.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/attention_map.h"
#include "analysis/spectrum.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/npy.h"
#include "core/output_files.h"
#include "core/value_scale.h"
#include "models/inference.h"
#include "models/token_linear.h"

namespace attnscope {

namespace {

const std::vector<std::string> kRunOptions = {
    "model",  "image", "out",      "variant", "p",       "window", "anchors",       "dwc",  "norm",
    "layer",  "head",  "query",    "resize",  "size",    "crop",   "interpolation", "mean", "std",
    "device", "arch",  "colormap", "scale",   "opacity", "alpha",  "overwrite",     "lcm",  "max-pixels"};

void require(const std::string& value, const std::string& name) {
  if (value.empty()) throw std::invalid_argument("--" + name + " is required");
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
  configure_input(model, state.input_settings());
  const cv::Mat prepared =
      prepare_model_input(load_image_rgb(state.image, state.max_pixels), state.input_settings(), model);
  const InferenceResult result = run_inference(model, prepared, state.attention);

  const int depth = int(result.forward.layers.size());
  const int layer = resolve_layer_index(state.layer, depth);
  const std::filesystem::path out(state.out);
  const std::string suffix = "_l" + std::to_string(layer) + "_h" + std::to_string(state.head);
  const AttentionCapture& capture = result.forward.layers[size_t(layer)];
  check_head_index(state.head, capture.heads);
  const ResolvedQuery query = resolve_query(state.query, capture.layout);

  // Everything is computed and checked before the first file is written: a failure writes nothing.
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = result.forward.logits[0].to(torch::kCPU, torch::kFloat);
  // --lcm after: the map after L2ViT's LCM mixing, where the layer has one; said in the summary.
  const bool after_lcm = state.lcm == LcmView::After && capture.has_lcm();
  std::string lcm_note;
  if (state.lcm == LcmView::After)
    lcm_note = after_lcm ? "rows and matrix after the LCM's spatial mixing: C_conv A (BatchNorm folded, GELU at slope "
                           "1/2, channel mean; biases left out)"
                         : "layer " + std::to_string(layer) +
                               " has no LCM (only L2ViT's global blocks do): the map is the attention itself";
  std::vector<int64_t> all_queries(size_t(capture.layout.total_tokens()));
  for (size_t i = 0; i < all_queries.size(); ++i) all_queries[i] = int64_t(i);
  // The row and its map by the functions the workbench and the figures use (analysis/attention_map.h).
  const torch::Tensor row = attention_row(capture, state.head, query.token, after_lcm);
  const torch::Tensor matrix =
      (after_lcm ? capture.rows_after_lcm(0, state.head, all_queries) : capture.equivalent_matrix(0, state.head))
          .to(torch::kCPU);
  if (!torch::isfinite(logits).all().item<bool>())
    throw std::runtime_error("the model's output is not finite (NaN or Inf): check the checkpoint's weights");
  if (!torch::isfinite(matrix).all().item<bool>())
    throw std::runtime_error("the attention of layer " + std::to_string(layer) + " head " + std::to_string(state.head) +
                             " is not finite (NaN or Inf)");
  MapSelection selection;
  selection.head = state.head;
  selection.query_token = query.token;
  selection.after_lcm = after_lcm;
  const torch::Tensor grid = attention_map(capture, selection);
  // The overlay in the session's colour map, scale mode and opacity, as the workbench draws it.
  const torch::Tensor shown = (grid * display_factor(state.scale, capture.key_layout.total_tokens()))
                                  .to(torch::kCPU, torch::kFloat)
                                  .contiguous();
  const cv::Mat shown_values(int(shown.size(0)), int(shown.size(1)), CV_32FC1, shown.data_ptr<float>());
  ValueRange range;
  range.include(shown.data_ptr<float>(), size_t(shown.numel()));
  const ValueScale scale = resolve_value_scale(state.scale, state.colormap, range);
  const cv::Mat overlay = overlay_values(result.input_rgb, shown_values, scale, state.opacity, state.alpha);

  // Ranks need a full SVD per head: above 400 tokens (DINOv2 at 518 px has 1370) that is seconds
  // per layer, so only the selected layer's heads are summarised there.
  const bool every_layer = std::all_of(result.forward.layers.begin(), result.forward.layers.end(),
                                       [](const AttentionCapture& c) { return c.layout.total_tokens() <= 400; });
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < depth; ++l) {
    const AttentionCapture& layer_capture = result.forward.layers[size_t(l)];
    nlohmann::json entry = describe_layer(layer_capture);
    entry["layer"] = l;
    if (every_layer || l == layer) {
      // The query at the same place in the image, in this layer's grid.
      const int layer_query = follow_query(query.token, capture.layout, layer_capture.layout);
      nlohmann::json layer_heads = nlohmann::json::array();
      for (int h = 0; h < layer_capture.heads; ++h) {
        const Spectrum spectrum = attention_spectrum(layer_capture, h).spectrum;
        layer_heads.push_back({{"head", h},
                               {"rank", spectrum.numerical_rank},
                               {"effective_rank", spectrum.effective_rank},
                               {"entropy", row_entropy(layer_capture.row(0, h, layer_query))}});
      }
      entry["ranks"] = layer_heads;
    }
    layers.push_back(entry);
  }
  nlohmann::json top = nlohmann::json::array();
  for (const auto& p : result.top)
    top.push_back({{"index", p.index}, {"name", p.name}, {"logit", p.logit}, {"probability", p.probability}});
  nlohmann::json summary = {
      {"model", state.model},
      {"format", model.format},
      {"container", model.container_key},
      {"architecture", model.backbone->describe()},
      {"parameters", model.parameter_count},
      {"image", state.image},
      {"input_size", {prepared.rows, prepared.cols}},
      {"resize", to_string(state.resize)},
      {"tokens",
       {{"prefix", capture.layout.prefix_tokens()},
        {"grid", {capture.layout.grid_h, capture.layout.grid_w}},
        {"key_grid", {capture.key_layout.grid_h, capture.key_layout.grid_w}},
        {"total", capture.layout.total_tokens()}}},
      {"variant", to_string(state.attention.variant)},
      {"attention", capture.attention.describe()},
      {"settings",
       {{"p", state.attention.p},
        {"window", state.attention.window},
        {"anchors", state.attention.anchors},
        {"dwc", state.attention.dwc},
        {"norm", to_string(state.attention.norm)}}},
      {"device", result.device},
      {"linear_backend", linear_backend().onednn ? "onednn" : "blas"},
      {"forward_ms", result.milliseconds},
      {"layer", layer},
      {"head", state.head},
      {"query", {{"spec", state.query}, {"token", query.token}, {"name", capture.layout.token_name(query.token)}}},
      {"output", {{"kind", model.output_kind()}, {"size", result.forward.logits.size(-1)}}},
      {"normalization",
       {{"mean", model.normalization.mean}, {"std", model.normalization.std}, {"source", model.normalization_source}}},
      {"preprocessing", preprocessing_json(model, state.input_settings(), prepared)},
      {"overlay",
       {{"colormap", to_string(scale.colormap)},
        {"scale", to_string(state.scale)},
        {"vmin", scale.vmin},
        {"vmax", scale.vmax},
        {"log", scale.log},
        {"alpha", to_string(state.alpha)},
        {"opacity", state.opacity}}},
      {"top5", top},
      {"layers", layers},
  };
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  summary["lcm"] = {{"view", enum_name(state.lcm)}, {"applied", after_lcm}};
  if (!lcm_note.empty()) summary["lcm"]["note"] = lcm_note;
  if (!every_layer) summary["layers_note"] = "more than 400 tokens: ranks of the selected layer only";
  summary["row_format"] = model.backbone->hierarchical()
                              ? "attention_l*_h*.npy: the query's row over the layer's key grid [key_h, key_w]"
                              : "attention_l*_h*.npy: the query's row over all tokens, prefix tokens first";
  if (!model.report.notes.empty()) summary["notes"] = model.report.notes;
  if (!model.report.warnings.empty()) summary["warnings"] = model.report.warnings;
  // Paths are bytes: a name that is not UTF-8 is written with replacement characters, never fails.
  const std::string summary_text = summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  // Every output is checked before the first is written: existing ones are refused unless --overwrite.
  OutputFiles files(state.out, state.figure.overwrite);
  files.add_npy("logits.npy", logits);
  files.add_npy("attention" + suffix + ".npy", model.backbone->hierarchical() ? grid : row);
  files.add_npy("matrix" + suffix + ".npy", matrix);
  files.add_png("overlay" + suffix + ".png", overlay);
  files.add_text("summary.json", summary_text + "\n");
  files.write();

  std::cout << "attnscope run: " << model.family() << " on " << result.device << ", " << capture.attention.describe()
            << ", forward " << result.milliseconds << " ms\n";
  for (const auto& p : result.top) std::cout << "  " << p.index << " " << p.name << "  p=" << p.probability << "\n";
  if (result.top.empty())
    std::cout << "  output: " << model.output_kind() << " of " << result.forward.logits.size(-1)
              << " values, no classes\n";
  print_warnings("run", model.report.warnings);  // a run that fails names the tensors in its error
  std::cout << "wrote " << out.string() << "/{summary.json, logits.npy, attention" << suffix << ".npy, matrix" << suffix
            << ".npy, overlay" << suffix << ".png}\n";
  return 0;
}

}  // namespace attnscope
