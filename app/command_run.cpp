// `attnscope run`: one image through one model with one attention variant; writes the summary,
// logits, the chosen attention row and matrix, and an overlay into a folder.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/ablated_inference.h"
#include "analysis/attention_map.h"
#include "analysis/pool_attention.h"
#include "analysis/spectrum.h"
#include "app/cli.h"
#include "app/commands.h"
#include "app/run_summary.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/json_checked.h"
#include "core/npy.h"
#include "core/number_text.h"
#include "core/output_files.h"
#include "core/progress_bar.h"
#include "core/value_overlay.h"
#include "core/value_scale.h"
#include "models/forward_progress.h"
#include "models/inference.h"
#include "models/sparse_autoencoder.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> run_options() {
  std::vector<std::string> names = option_names(
      {OptionGroup::Input, OptionGroup::Attention, OptionGroup::Selection, OptionGroup::Display, OptionGroup::Output});
  for (const char* name : {"lcm", "ranks", "matrix"}) names.push_back(name);
  return names;
}

void require(const std::string& value, const std::string& name) {
  if (value.empty()) throw std::invalid_argument("--" + name + " is required");
}

// A forward of many tokens is followed a block at a time on `bar` (a line a block in logs): from
// its start above kFollowedTokens (a block of global attention costs O(T^2): at 262,145 tokens,
// 6.9e10 query-key pairs a head), else once it has taken more than two seconds.
BlockProgress forward_progress(ProgressBar& bar) {
  constexpr int64_t kFollowedTokens = 16384;
  return [&bar, start = std::chrono::steady_clock::now(), followed = false](int block, int blocks,
                                                                            int64_t tokens) mutable {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!followed && tokens <= kFollowedTokens && seconds < 2) return;
    if (!followed)
      std::cerr << "attnscope run: forward over " << tokens << " tokens (" << double(tokens) * double(tokens)
                << " query-key pairs a head in a block of global attention), " << blocks << " blocks\n";
    followed = true;
    std::ostringstream label;
    label << "forward, block " << block + 1 << " of " << blocks << ", " << tokens << " tokens";
    if (block > 0)
      label << ", " << std::fixed << std::setprecision(0) << seconds << " s so far, about "
            << seconds / block * (blocks - block) << " s left";
    bar.show(size_t(block), size_t(blocks), label.str());
    if (block + 1 == blocks && bar.terminal()) std::cerr << "\n";
  };
}

// Rows of `head`'s equivalent matrix for some queries, as AttentionCapture::equivalent_matrix
// builds the whole: the attention rows, plus FLatten's DWC band where the DWC ran.
torch::Tensor equivalent_rows(const AttentionCapture& capture, int64_t head, const std::vector<int64_t>& queries) {
  const AttentionCapture& holder = capture.for_head(head);
  torch::Tensor rows = holder.rows(0, head, queries);
  if (holder.attention.dwc) rows = rows + holder.dwc_band(queries).to(rows.device(), rows.scalar_type());
  return rows;
}

// The T x T matrix of `head` as NPY bytes, produced a block of rows at a time (at most 64 MB of
// them in memory), refused up front when the disk under `out` cannot hold it.
std::function<void(const std::function<void(const std::string&)>&)> matrix_npy(const AttentionCapture& capture,
                                                                               int head, bool after_lcm,
                                                                               const std::string& out,
                                                                               const std::string& not_finite,
                                                                               ProgressBar& bar) {
  const int64_t queries = capture.layout.total_tokens(), keys = capture.key_layout.total_tokens();
  const double bytes = 4.0 * double(queries) * double(keys);
  std::error_code error;
  fs::path existing = fs::absolute(out, error);
  while (!fs::exists(existing, error) && existing.has_relative_path()) existing = existing.parent_path();
  const fs::space_info disk = fs::space(existing, error);
  if (!error && bytes > double(disk.available))
    throw std::invalid_argument("the attention matrix of " + std::to_string(queries) + " x " + std::to_string(keys) +
                                " tokens is " + bytes_text(bytes) + " of float32, and " + existing.string() + " has " +
                                bytes_text(double(disk.available)) +
                                " free: --matrix off leaves it out, or a smaller --size");
  const int64_t chunk = std::max<int64_t>(1, (int64_t(64) << 20) / (4 * std::max<int64_t>(keys, 1)));
  return [&capture, head, after_lcm, queries, keys, chunk, not_finite,
          &bar](const std::function<void(const std::string&)>& write) {
    torch::NoGradGuard no_grad;
    write(npy_header({queries, keys}, torch::kFloat));
    const size_t steps = size_t((queries + chunk - 1) / chunk);
    for (int64_t first = 0; first < queries; first += chunk) {
      std::vector<int64_t> rows(size_t(std::min(chunk, queries - first)));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = first + int64_t(i);
      if (steps > 1) bar.show(size_t(first / chunk), steps, "matrix rows " + std::to_string(first));
      const torch::Tensor block =
          (after_lcm ? capture.rows_after_lcm(0, head, rows) : equivalent_rows(capture, head, rows))
              .to(torch::kCPU, torch::kFloat)
              .contiguous();
      if (!torch::isfinite(block).all().item<bool>()) throw std::runtime_error(not_finite);
      write(std::string(static_cast<const char*>(block.data_ptr()), size_t(block.numel()) * sizeof(float)));
    }
    if (steps > 1) bar.show(steps, steps, "matrix written");
  };
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
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(state.image, state.max_pixels), state.input_settings(), model);
  // With heads ablated, the unablated run first (kept for what the ablation changed), then only the
  // blocks from the first ablated one on; a forward of many tokens is followed a block at a time.
  ProgressBar bar;
  AnalysisCache runs;
  const AblatedInference ablated = [&] {
    const ScopedBlockProgress followed(forward_progress(bar));
    return state.attention.ablation.empty() ? AblatedInference{}
                                            : ablated_inference(model, prepared, state.attention, {}, "run", runs);
  }();
  const InferenceResult result = ablated.result ? *ablated.result : [&] {
    const ScopedBlockProgress followed(forward_progress(bar));
    return run_inference(model, prepared, state.attention);
  }();

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
  // The row and its map by the functions the workbench and the figures use (analysis/attention_map.h).
  const torch::Tensor row = attention_row(capture, state.head, query.token, after_lcm);
  // The full T x T matrix only when asked (or small): at 5,481 tokens it is 120 MB a head. It is
  // never held whole: its rows are streamed into the NPY (matrix_npy), after the disk is judged.
  const bool write_matrix = state.matrix == MatrixFile::On ||
                            (state.matrix == MatrixFile::Auto && capture.layout.total_tokens() <= kCheapSpectrumTokens);
  const std::string not_finite = "the attention of layer " + std::to_string(layer) + " head " +
                                 std::to_string(state.head) + " is not finite (NaN or Inf)";
  // Judged against the disk before the maps and the overlay are made.
  const auto matrix_writer =
      write_matrix ? matrix_npy(capture, state.head, after_lcm, state.out, not_finite, bar) : nullptr;
  if (!torch::isfinite(logits).all().item<bool>())
    throw std::runtime_error("the model's output is not finite (NaN or Inf): check the checkpoint's weights");
  if (!torch::isfinite(row).all().item<bool>()) throw std::runtime_error(not_finite);
  MapSelection selection;
  selection.head = state.head;
  selection.query_token = query.token;
  selection.after_lcm = after_lcm;
  const torch::Tensor grid = attention_map(capture, selection);
  // The overlay in the session's colour map, scale mode and opacity, as the workbench draws it.
  const torch::Tensor shown = (grid * display_factor(state.scale, capture.key_layout.total_tokens()))
                                  .to(torch::kCPU, torch::kFloat)
                                  .contiguous();
  ValueRange range;
  range.include(shown.data_ptr<float>(), size_t(shown.numel()));
  const ValueScale scale = resolve_value_scale(state.scale, state.colormap, range);
  const RgbImage overlay =
      overlay_values(result.input_rgb, {shown.data_ptr<float>(), int(shown.size(0)), int(shown.size(1))}, scale,
                     state.opacity, state.alpha);

  nlohmann::json summary = run_summary({state, model, result, prepared, layer, query, scale, after_lcm, lcm_note});
  // With heads ablated, the unablated model's output beside it: what the ablation changed.
  torch::Tensor unablated_logits;
  if (ablated.unablated) {
    unablated_logits = ablated.unablated->output.logits[0].to(torch::kCPU, torch::kFloat);
    const int64_t top = logits.argmax().item<int64_t>();
    summary["ablation"] = {{"heads", head_list_text(state.attention.ablation.heads)},
                           {"kind", enum_name(state.attention.ablation.kind)},
                           {"top_output", top},
                           {"ablated_value", logits[top].item<double>()},
                           {"unablated_value", unablated_logits[top].item<double>()},
                           {"unablated_top_output", unablated_logits.argmax().item<int64_t>()},
                           {"blocks_recomputed", depth - first_ablated_layer(state.attention.ablation)},
                           {"blocks", depth},
                           {"unablated_forward_ms", ablated.unablated_milliseconds},
                           {"ablated_forward_ms", result.milliseconds}};
  }
  // With SAE features switched off or added, the output without the intervention beside it.
  torch::Tensor unedited_logits;
  if (state.attention.sae.intervenes()) {
    AttentionSettings unedited = state.attention;
    unedited.sae.off.clear();
    unedited.sae.add.clear();
    unedited_logits = run_inference(model, prepared, unedited).forward.logits[0].to(torch::kCPU, torch::kFloat);
    const auto sae = open_sparse_autoencoder(state.attention.sae.file);
    const int64_t top = logits.argmax().item<int64_t>();
    summary["sae_intervention"] = {
        {"sae", sae->describe()},
        {"hook", stream_point_name(sae_stream_point(*sae, state.attention.sae.hook, model.vit_arch().depth,
                                                    model.vit_arch().embed_dim))},
        {"off", sae_features_text(state.attention.sae.off)},
        {"add", sae_adds_text(state.attention.sae.add)},
        {"top_output", top},
        {"value", logits[top].item<double>()},
        {"value_without", unedited_logits[top].item<double>()},
        {"top_output_without", unedited_logits.argmax().item<int64_t>()},
        {"largest_change", (logits - unedited_logits).abs().max().item<double>()},
        {"note",
         "the SAE's reconstruction error stays in the stream: the listed features' decoder directions times "
         "their change are added where the SAE reads"}};
  }
  // Paths are bytes: a name that is not UTF-8 is written with replacement characters, never fails.
  // Every output is checked before the first is written: existing ones are refused unless --overwrite.
  files.add_npy("logits.npy", logits);
  if (unablated_logits.defined()) files.add_npy("logits_unablated.npy", unablated_logits);
  if (unedited_logits.defined()) files.add_npy("logits_without_sae.npy", unedited_logits);
  files.add_npy("attention" + suffix + ".npy", model.backbone->hierarchical() ? grid : row);
  if (write_matrix) files.add_streamed("matrix" + suffix + ".npy", matrix_writer);
  // A kernel's second matrix (PolaFormer's opposite-sign part, on the second half of each head's
  // value channels): the query's row of it, beside the first.
  const KernelSpec& kernel = kernel_spec(capture.attention.kernel);
  std::string second_file;
  if (kernel.second_rows && !capture.query_slots.defined() && !capture.probabilities.defined()) {
    second_file = "second" + suffix + ".npy";
    const torch::Tensor second = capture.second_rows(0, state.head, {query.token})[0].to(torch::kCPU, torch::kFloat);
    if (!torch::isfinite(second).all().item<bool>()) throw std::runtime_error(not_finite);
    files.add_npy(second_file, second);
    summary["second_matrix"] = {{"name", kernel.second_matrix}, {"file", second_file}};
  }
  files.add_png("overlay" + suffix + ".png", overlay);
  // A pooling head's attention (SigLIP's MAP, PE's, CaiT's class-attention blocks): where the
  // pooled features come from, a layer of its own; the last one is the features' own read.
  const std::vector<PoolAttention>& pools = result.forward.pool_attention;
  if (!pools.empty()) {
    const PoolMaps maps = pool_maps(pools.back(), capture.layout);
    const torch::Tensor heads = pools.back().probabilities[0].to(torch::kCPU, torch::kFloat).contiguous();  // [h, N]
    files.add_npy("pool_attention.npy", heads);
    nlohmann::json layers = nlohmann::json::array();
    for (const PoolAttention& pool : pools) layers.push_back(pool.name);
    nlohmann::json pool_summary = {{"file", "pool_attention.npy"},
                                   {"layer", maps.layer},
                                   {"shape", {heads.size(0), heads.size(1)}},
                                   {"prefix_tokens_read", maps.prefix_tokens},
                                   {"overlay", "pool_overlay.png"},
                                   {"overlay_values", "the heads' mean over the patches"}};
    if (pools.size() > 1) {  // CaiT: every class-attention block's, [blocks, h, N]
      std::vector<torch::Tensor> all;
      for (const PoolAttention& pool : pools) all.push_back(pool.probabilities[0].to(torch::kCPU, torch::kFloat));
      const torch::Tensor stacked = torch::stack(all).contiguous();
      files.add_npy("class_attention.npy", stacked);
      pool_summary["all_layers"] = {{"file", "class_attention.npy"},
                                    {"layers", layers},
                                    {"shape", {stacked.size(0), stacked.size(1), stacked.size(2)}}};
    }
    const torch::Tensor& mean = maps.mean;
    ValueRange pool_range;
    pool_range.include(mean.data_ptr<float>(), size_t(mean.numel()));
    const ValueScale pool_scale = resolve_value_scale(state.scale, state.colormap, pool_range);
    files.add_png(
        "pool_overlay.png",
        overlay_values(result.input_rgb, {mean.data_ptr<float>(), capture.layout.grid_h, capture.layout.grid_w},
                       pool_scale, state.opacity, state.alpha));
    summary["pool_attention"] = pool_summary;
  }
  files.add_text("summary.json", json_text(summary) + "\n");
  files.write();

  std::cout << "attnscope run: " << model.family() << " on " << result.device << ", " << capture.attention.describe()
            << ", forward " << result.milliseconds << " ms\n";
  for (const auto& p : result.top) std::cout << "  " << p.index << " " << p.name << "  p=" << p.probability << "\n";
  if (result.top.empty())
    std::cout << "  output: " << to_string(model.output_kind()) << " of " << result.forward.logits.size(-1)
              << " values, no classes\n";
  print_warnings("run", model.report.warnings);  // a run that fails names the tensors in its error
  if (unablated_logits.defined())
    std::cout << "ablated " << head_list_text(state.attention.ablation.heads) << ": the forward resumed at block "
              << first_ablated_layer(state.attention.ablation) << " took " << result.milliseconds
              << " ms, the unablated one " << ablated.unablated_milliseconds << " ms\n";
  if (unedited_logits.defined())
    std::cout << "SAE features off " << sae_features_text(state.attention.sae.off) << ", added "
              << sae_adds_text(state.attention.sae.add) << ": output " << summary["sae_intervention"]["top_output"]
              << " at " << summary["sae_intervention"]["value"]
              << " (without: " << summary["sae_intervention"]["value_without"] << "), largest change "
              << summary["sae_intervention"]["largest_change"] << "\n";
  std::cout << "wrote " << out.string() << "/{summary.json, logits.npy, "
            << (unablated_logits.defined() ? "logits_unablated.npy, " : "")
            << (unedited_logits.defined() ? "logits_without_sae.npy, " : "") << "attention" << suffix << ".npy, "
            << (write_matrix ? "matrix" + suffix + ".npy, " : "") << (second_file.empty() ? "" : second_file + ", ")
            << "overlay" << suffix << ".png" << (pools.empty() ? "" : ", pool_attention.npy, pool_overlay.png")
            << (pools.size() > 1 ? ", class_attention.npy" : "") << "}\n";
  return 0;
}

}  // namespace attnscope
