// `attnscope train-sae`: trains a TopK sparse autoencoder on a demo model's residual stream over
// generated sign images (datasets/glyph_task.h), writes it in SAELens 6's format, and a card with
// what it measures on held-out images: its L0, normalised MSE and dead features, and the features
// that read the digit, the plate, the class token and a fixed position.
#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/sae_features.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/json_checked.h"
#include "datasets/glyph_task.h"
#include "models/cpu_threads.h"
#include "models/model_loader.h"
#include "models/sae_training.h"

namespace attnscope {

namespace {

using nlohmann::json;

// The stream at `point` for a batch of images: [B * T, C].
torch::Tensor stream_at(VisionTransformerImpl& model, const StreamPoint& point, const torch::Tensor& images,
                        TokenLayout* layout = nullptr) {
  c10::InferenceMode inference_mode;
  const StreamAtPoint read = read_stream_point(model, images, point, {});
  if (layout) *layout = read.output.layout;
  return read.activation.reshape({-1, read.activation.size(2)}).clone();
}

// What the card says of the SAE, measured on held-out images.
struct HeldOut {
  int images = 0;
  double normalised_mse = 0, l0 = 0, dead_fraction = 0, plate_area = 0;
  torch::Tensor firing;          // [F]: images where the feature fired on some patch
  torch::Tensor class_firing;    // [10, F]: images of each digit where the feature fired on the plate's patches
  torch::Tensor plate_firing;    // [F]: images where it fired on the plate's patches
  torch::Tensor class_counts;    // [10]: images of each digit
  torch::Tensor plate_share;     // [F]: of its activation over patches, the share on the target plate
  torch::Tensor class_share;     // [F]: of its activation over every token, the share on the class token
  torch::Tensor position_share;  // [F]: of its activation over patches, the share on its busiest cell
  torch::Tensor busiest_cell;    // [F]
};

HeldOut measure(VisionTransformerImpl& model, const SparseAutoencoder& sae, const StreamPoint& point, int count) {
  HeldOut out;
  const int64_t F = sae.d_sae;
  torch::Tensor class_sums = torch::zeros({10, F}, torch::kDouble), class_counts = torch::zeros({10}, torch::kDouble);
  torch::Tensor plate = torch::zeros({F}, torch::kDouble), patches_total = torch::zeros({F}, torch::kDouble);
  torch::Tensor cls = torch::zeros({F}, torch::kDouble), all_total = torch::zeros({F}, torch::kDouble);
  torch::Tensor cells;  // [cells, F]
  torch::Tensor fired_any = torch::zeros({F}, torch::kBool);
  out.firing = torch::zeros({F}, torch::kDouble);
  double error = 0, variance = 0, active = 0, tokens = 0, plate_cells = 0, all_cells = 0;
  const int chunk = 50;
  for (int first = 0; first < count; first += chunk) {
    const int n = std::min(chunk, count - first);
    const GlyphBatch batch = make_glyph_batch(kHeldOutSeedBase + 7'000'000 + uint64_t(first), n);
    TokenLayout layout;
    const torch::Tensor x = stream_at(model, point, batch.images, &layout);
    const torch::Tensor f = sae.encode(x);
    const torch::Tensor x_hat = sae.decode(f, x);
    const int64_t T = layout.total_tokens(), prefix = layout.prefix_tokens();
    const torch::Tensor xd = x.to(torch::kDouble).view({n, T, -1});
    error += (x - x_hat).to(torch::kDouble).pow(2).sum().item<double>();
    variance += (xd - xd.mean(1, true)).pow(2).sum().item<double>();
    active += (f > 0).sum().item<double>();
    tokens += double(f.size(0));
    const torch::Tensor per_token = f.to(torch::kDouble).view({n, T, F});
    const torch::Tensor on_patches = per_token.slice(1, prefix);  // [n, P, F]
    fired_any |= (f > 0).any(0);
    out.firing += (on_patches > 0).any(1).sum(0).to(torch::kDouble);
    class_counts.index_add_(0, batch.labels, torch::ones({n}, torch::kDouble));
    // A patch is on the plate when the target mask covers most of it.
    const int patch = int(batch.images.size(2) / layout.grid_h);
    const torch::Tensor on_plate =
        (torch::avg_pool2d(batch.masks, patch).view({n, -1}) > 0.5).to(torch::kDouble);  // [n, P]
    plate += (on_patches * on_plate.unsqueeze(2)).sum(std::vector<int64_t>{0, 1});
    // Where the digit is: the feature fired on a patch of the plate.
    const torch::Tensor on_digit = ((on_patches * on_plate.unsqueeze(2)) > 0).any(1).to(torch::kDouble);  // [n, F]
    class_sums.index_add_(0, batch.labels, on_digit);
    out.plate_firing = out.plate_firing.defined() ? out.plate_firing + on_digit.sum(0) : on_digit.sum(0);
    patches_total += on_patches.sum(std::vector<int64_t>{0, 1});
    if (prefix > 0) cls += per_token.select(1, 0).sum(0);
    all_total += per_token.sum(std::vector<int64_t>{0, 1});
    cells = cells.defined() ? cells + on_patches.sum(0) : on_patches.sum(0);
    plate_cells += on_plate.sum().item<double>();
    all_cells += double(on_plate.numel());
  }
  out.images = count;
  out.normalised_mse = error / variance;
  out.l0 = active / tokens;
  out.dead_fraction = 1.0 - fired_any.sum().item<double>() / double(F);
  out.plate_area = plate_cells / all_cells;
  out.class_firing = class_sums;
  out.class_counts = class_counts;
  const torch::Tensor safe_patches = patches_total.clamp_min(1e-12);
  out.plate_share = plate / safe_patches;
  out.class_share = cls / all_total.clamp_min(1e-12);
  const auto [busiest, cell] = cells.max(0);
  out.position_share = busiest / safe_patches;
  out.busiest_cell = cell;
  return out;
}

// The card's list of features: for each digit the feature most selective for it, then the plate's,
// the class token's and the fixed positions' strongest.
std::string features_found(const HeldOut& held, const TokenLayout& layout, json& found) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2);
  const torch::Tensor often = held.firing / double(held.images) >= 0.02;  // fires on >= 2% of the images
  // For digit d: recall, the share of d's images it fires on; precision, the share of the images it
  // fires on that show d. The most precise feature among those that fire on a quarter of d's images.
  const torch::Tensor recall = held.class_firing / held.class_counts.clamp_min(1).unsqueeze(1);
  const torch::Tensor precision = held.class_firing / held.plate_firing.clamp_min(1).unsqueeze(0);
  found["digits"] = json::array();
  out << "- Digit features (on the plate's patches: for each digit, among the features that fire there on at least a "
         "quarter of its images (recall), the one whose firing images show that digit most often (precision; chance "
         "is about 10%)):\n";
  for (int digit = 0; digit < 10; ++digit) {
    const torch::Tensor score =
        torch::where(recall[digit] >= 0.25, precision[digit], torch::zeros_like(precision[digit]));
    const int64_t feature = score.argmax().item<int64_t>();
    out << "  - digit " << digit << ": feature " << feature << ", recall "
        << 100 * recall[digit][feature].item<double>() << "%, precision "
        << 100 * precision[digit][feature].item<double>() << "%\n";
    found["digits"].push_back({{"digit", digit},
                               {"feature", feature},
                               {"recall", recall[digit][feature].item<double>()},
                               {"precision", precision[digit][feature].item<double>()}});
  }
  auto strongest = [&](const torch::Tensor& score, int count) {
    const torch::Tensor masked = torch::where(often, score, torch::full_like(score, -1.0));
    return std::get<1>(masked.topk(count)).contiguous();
  };
  // The three features that score highest by `share`: listed after `heading`, kept under `key`, each
  // with what `more` adds (its words and JSON fields).
  auto list_strongest = [&](const std::string& key, const torch::Tensor& share, const std::string& heading,
                            const std::function<std::string(int64_t, json&)>& more) {
    const torch::Tensor listed = strongest(share, 3);
    out << heading;
    found[key] = json::array();
    for (int64_t i = 0; i < listed.numel(); ++i) {
      const int64_t feature = listed[i].item<int64_t>();
      json entry = {{"feature", feature}, {"share", share[feature].item<double>()}};
      out << (i ? "," : "") << " feature " << feature << " " << 100 * share[feature].item<double>() << "%"
          << (more ? more(feature, entry) : "");
      found[key].push_back(entry);
    }
    out << "\n";
  };
  std::ostringstream plate_area;
  plate_area << std::fixed << std::setprecision(2) << 100 * held.plate_area;
  list_strongest("plate", held.plate_share,
                 "- Plate features (share of the activation over patches on the target plate, which covers " +
                     plate_area.str() + "% of the patches):",
                 {});
  list_strongest("class_token", held.class_share,
                 "- Class-token features (share of the activation over every token on the class token):", {});
  std::ostringstream uniform;
  uniform << std::fixed << std::setprecision(2) << 100.0 / layout.patch_tokens();
  list_strongest("position", held.position_share,
                 "- Position features (share of the activation over patches on one cell; uniform would be " +
                     uniform.str() + "%):",
                 [&](int64_t feature, json& entry) {
                   const int cell = int(held.busiest_cell[feature].item<int64_t>());
                   entry["row"] = cell / layout.grid_w;
                   entry["col"] = cell % layout.grid_w;
                   return " at row " + std::to_string(cell / layout.grid_w) + ", col " +
                          std::to_string(cell % layout.grid_w);
                 });
  return out.str();
}

}  // namespace

CommandSyntax train_sae_syntax() {
  const std::vector<CommandFlag> flags = {
      {"features", "N", "the SAE's features", "384"},
      {"k", "K", "features kept per token (TopK)", "8"},
      {"steps", "N", "optimiser steps (Adam)", "1500"},
      {"batch", "N", "images per step (each gives every token's activation)", "8"},
      {"lr", "X", "learning rate", "0.001"},
      {"seed", "N", "seed of the weights and of the training images", "0"},
      {"eval-samples", "N", "held-out images the card's numbers are measured on", "500"},
      {"out", "DIR", "the SAE folder to write (cfg.json, sae_weights.safetensors, README.md)", ""},
  };
  return {"attnscope train-sae [--model FILE] [--sae-hook HOOK] --out DIR [--features N] [--k K]",
          {"model", "sae-hook"},
          flags,
          "without --model: the bundled demo model; without --sae-hook: the output of its middle block"};
}

int train_sae_command(const Args& args) {
  auto parsed = parse_or_print_help(args, train_sae_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  configure_threads();
  const std::string out = line.flags["out"];
  if (out.empty()) throw std::invalid_argument("--out DIR is required");
  std::string model_path = line.state.model.empty() ? default_model_path() : line.state.model;
  LoadedModel loaded = load_model(model_path, {}, torch::kCPU);
  VisionTransformerImpl& model = loaded.vit();
  const std::string hook = line.state.attention.sae.hook.empty()
                               ? "blocks." + std::to_string(model.arch().depth / 2) + ".hook_resid_post"
                               : line.state.attention.sae.hook;
  const StreamPoint point = parse_stream_point(hook);
  if (point.layer >= model.arch().depth)
    throw std::invalid_argument("--sae-hook " + hook + ": the model has blocks 0.." +
                                std::to_string(model.arch().depth - 1));
  SaeTrainOptions options;
  options.features = line.flag_int("features");
  options.k = line.flag_int("k");
  options.steps = line.flag_int("steps");
  options.learning_rate = line.flag_double("lr");
  options.seed = uint64_t(line.flag_int("seed"));
  const int batch = line.flag_int("batch"), eval_samples = line.flag_int("eval-samples");
  if (options.features < 1 || options.features > kMaxSaeFeatures || batch < 1 || batch > 4096 || options.steps < 1 ||
      eval_samples < 10)
    throw std::invalid_argument("--features, --batch, --steps and --eval-samples must be positive (and in range)");
  const auto start = std::chrono::steady_clock::now();
  SparseAutoencoder sae = train_top_k_sae(
      model.arch().embed_dim, options,
      [&](int step) {
        const uint64_t first = options.seed * 1'000'000'000ULL + uint64_t(step) * uint64_t(batch);
        return stream_at(model, point, make_glyph_batch(first, batch).images);
      },
      [](const SaeTrainProgress& p) {
        if (p.step % 50 == 0 || p.step == p.steps)
          std::cerr << "\r" << p.step << "/" << p.steps << "  normalised MSE " << std::fixed << std::setprecision(4)
                    << p.normalised_mse << "  dead " << std::setprecision(3) << p.dead_fraction << "   " << std::flush;
      });
  std::cerr << "\n";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sae.hook = point;
  sae.hook_text = stream_point_name(point);
  const HeldOut held = measure(model, sae, point, eval_samples);
  const TokenLayout layout = model.arch().layout_for(model.arch().native_height(), model.arch().native_width());
  json found;
  const std::string features_text = features_found(held, layout, found);
  std::ostringstream command;
  command << "attnscope train-sae" << (line.state.model.empty() ? "" : " --model " + line.state.model) << " --sae-hook "
          << hook << " --features " << options.features << " --k " << options.k << " --steps " << options.steps
          << " --batch " << batch << " --lr " << options.learning_rate << " --seed " << options.seed << " --out "
          << out;
  json metadata = {{"sae_lens_version", "6.18.0"},
                   {"model_name", std::filesystem::path(model_path).filename().string()},
                   {"hook_name", hook},
                   {"hook_head_index", nullptr},
                   {"context_size", layout.total_tokens()},
                   {"prepend_bos", false},
                   {"dataset_path", "attnscope glyph task (datasets/glyph_task.h), generated"},
                   {"trained_by", command.str()},
                   {"held_out",
                    {{"images", held.images},
                     {"normalised_mse", held.normalised_mse},
                     {"l0", held.l0},
                     {"dead_fraction", held.dead_fraction}}},
                   {"features_found", found}};
  save_saelens_folder(sae, out, metadata);
  write_file_atomically(out + "/README.md", [&](std::ostream& card) {
    card << std::fixed << std::setprecision(3) << "# Demo SAE: " << std::filesystem::path(out).filename().string()
         << "\n\n"
         << "- Model: `" << (line.state.model.empty() ? "the bundled demo model, " : "")
         << std::filesystem::path(model_path).filename().string() << "` (" << loaded.family() << ", width "
         << model.arch().embed_dim << ", " << model.arch().depth << " blocks)\n"
         << "- Hook: `" << hook << "` (the residual stream after block " << point.layer << ", every token)\n"
         << "- Architecture: TopK (SAELens `topk`, b_dec subtracted from the input), " << options.features
         << " features (" << options.features / model.arch().embed_dim << "x), k = " << options.k << "\n"
         << "- Format: SAELens 6 (`cfg.json` + `sae_weights.safetensors`)\n"
         << "- Held-out (" << held.images << " generated images, seeds from 10^12 + 7e6): L0 " << held.l0
         << ", normalised MSE " << held.normalised_mse
         << " (squared error over the squared deviation from each image's mean token), dead features "
         << 100 * held.dead_fraction << "%\n"
         << "- Training: " << options.steps << " steps x " << batch << " images (" << batch * layout.total_tokens()
         << " tokens), Adam lr " << std::defaultfloat << options.learning_rate
         << ", AuxK for features silent 200k tokens, " << std::fixed << std::setprecision(0) << seconds << " s on "
         << torch::get_num_threads() << " CPU threads\n"
         << "- Reproduce: `" << command.str() << "`\n\n"
         << "## What it found (held-out images)\n\n"
         << features_text;
  });
  std::cout << "attnscope train-sae: " << sae.describe() << ": held-out L0 " << held.l0 << ", normalised MSE "
            << held.normalised_mse << ", dead " << held.dead_fraction << "; wrote " << out << "\n";
  return 0;
}

}  // namespace attnscope
