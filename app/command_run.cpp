// `attnscope run`: one image through one model with one attention variant; writes the summary,
// logits, the chosen attention row and matrix, and an overlay into a folder.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/attention_map.h"
#include "analysis/spectrum.h"
#include "app/cli.h"
#include "app/commands.h"
#include "app/run_summary.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/npy.h"
#include "core/output_files.h"
#include "core/value_scale.h"
#include "models/inference.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace {

std::vector<std::string> run_options() {
  std::vector<std::string> names = option_names(
      {OptionGroup::Input, OptionGroup::Attention, OptionGroup::Selection, OptionGroup::Display, OptionGroup::Output});
  for (const char* name : {"lcm", "ranks", "matrix"}) names.push_back(name);
  return names;
}

void require(const std::string& value, const std::string& name) {
  if (value.empty()) throw std::invalid_argument("--" + name + " is required");
}

}  // namespace

CommandSyntax run_syntax() {
  return {
      "attnscope run [--model FILE] [--image FILE] --out DIR [options]\n"
      "  (without --model and --image: the bundled demo model and sample image)",
      run_options(),
      {}};
}

int run_command(const Args& args) {
  auto parsed = parse_or_print_help(args, run_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  AppState& state = line.state;
  use_bundled_defaults(state, true);
  require(state.out, "out");
  // The folder is checked before the model is loaded; existing outputs are refused when written.
  OutputFiles files(state.out, state.figure.overwrite);

  configure_threads();
  const torch::Device device = resolve_device(state.device);
  LoadedModel model = load_model(state.model, state.arch_overrides(), device);
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
  // The full T x T matrix only when asked (or small): at 5,481 tokens it is 120 MB a head.
  const bool write_matrix = state.matrix == MatrixFile::On ||
                            (state.matrix == MatrixFile::Auto && capture.layout.total_tokens() <= kCheapSpectrumTokens);
  const torch::Tensor matrix = write_matrix ? (after_lcm ? capture.rows_after_lcm(0, state.head, all_queries)
                                                         : capture.equivalent_matrix(0, state.head))
                                                  .to(torch::kCPU)
                                            : torch::Tensor();
  if (!torch::isfinite(logits).all().item<bool>())
    throw std::runtime_error("the model's output is not finite (NaN or Inf): check the checkpoint's weights");
  if (!torch::isfinite(write_matrix ? matrix : row).all().item<bool>())
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

  const nlohmann::json summary =
      run_summary({state, model, result, prepared, layer, query, scale, after_lcm, lcm_note});
  // Paths are bytes: a name that is not UTF-8 is written with replacement characters, never fails.
  const std::string summary_text = summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  // Every output is checked before the first is written: existing ones are refused unless --overwrite.
  files.add_npy("logits.npy", logits);
  files.add_npy("attention" + suffix + ".npy", model.backbone->hierarchical() ? grid : row);
  if (write_matrix) files.add_npy("matrix" + suffix + ".npy", matrix);
  files.add_png("overlay" + suffix + ".png", overlay);
  files.add_text("summary.json", summary_text + "\n");
  files.write();

  std::cout << "attnscope run: " << model.family() << " on " << result.device << ", " << capture.attention.describe()
            << ", forward " << result.milliseconds << " ms\n";
  for (const auto& p : result.top) std::cout << "  " << p.index << " " << p.name << "  p=" << p.probability << "\n";
  if (result.top.empty())
    std::cout << "  output: " << to_string(model.output_kind()) << " of " << result.forward.logits.size(-1)
              << " values, no classes\n";
  print_warnings("run", model.report.warnings);  // a run that fails names the tensors in its error
  std::cout << "wrote " << out.string() << "/{summary.json, logits.npy, attention" << suffix << ".npy, "
            << (write_matrix ? "matrix" + suffix + ".npy, " : "") << "overlay" << suffix << ".png}\n";
  return 0;
}

}  // namespace attnscope
