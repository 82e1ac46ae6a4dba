// `attnscope eval`: the demo models on held-out glyph images with known object masks: accuracy,
// attention mass inside the object and the pointing game per layer, the same for Grad-CAM, and
// attention rank.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/focus_metrics.h"
#include "analysis/gradcam.h"
#include "analysis/spectrum.h"
#include "app/cli.h"
#include "app/commands.h"
#include "app/eval_folder.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/json_checked.h"
#include "core/output_files.h"
#include "core/output_schemas.h"
#include "datasets/glyph_task.h"
#include "models/model_loader.h"

namespace attnscope {

namespace {

// The block whose matrix rank is reported: FLatten's Fig. 5 uses the third block.
constexpr int kRankLayer = 2;

std::vector<std::string> default_models() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(asset_path("models")))
    if (entry.path().extension() == ".safetensors") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

double mean_rank(const AttentionCapture& capture) {
  double total = 0;
  for (int h = 0; h < capture.heads; ++h) total += matrix_spectrum(capture.equivalent_matrix(0, h)).numerical_rank;
  return total / capture.heads;
}

struct LayerFocus {
  double mass = 0, hits = 0;
};

// Where a layer looks, over its key grid: the class token's row (mean over heads), or for models
// without one (Swin, PVT) the attention each patch receives, averaged over every query and head.
torch::Tensor focus_map(const AttentionCapture& capture, int64_t item) {
  torch::Tensor map;
  for (int h = 0; h < capture.heads; ++h) {
    torch::Tensor head_map;
    if (capture.layout.has_class_token) {
      head_map = capture.row(item, h, 0);
    } else {
      std::vector<int64_t> all(size_t(capture.layout.total_tokens()));
      for (size_t q = 0; q < all.size(); ++q) all[q] = int64_t(q);
      head_map = capture.rows(item, h, all).mean(0);
    }
    map = map.defined() ? map + head_map : head_map;
  }
  return map.slice(0, capture.key_layout.prefix_tokens()).to(torch::kCPU);
}

}  // namespace

CommandSyntax eval_syntax() {
  const std::vector<std::string> state_options = {
      "device", "out",     "model",  "arch", "config",  "methods", "steps", "replacement", "ig-steps", "ig-baseline",
      "fusion", "discard", "resize", "size", "variant", "mean",    "std",   "layer",       "mass"};
  const std::vector<CommandFlag> flags = {
      {"models", "LIST", "comma-separated model files (default: every model in assets/models)", ""},
      {"samples", "N", "held-out images", "200"},
      {"images", "DIR", "your own images instead: a folder, scored per --methods and layer (needs --model)", ""},
      {"masks", "DIR", "with --images: object masks (nonzero = object) named like the images", ""},
      {"boxes", "FILE", "with --images: object boxes, CSV with file (or seed) and x,y,w,h in pixels", ""},
      {"labels", "FILE", "with --images: classes, CSV with file (or seed) and label; gives the accuracy", ""},
      {"layers", "all|L,..", "with --images: layers of the layer-wise methods (CAMs at blocks.L.norm1, attention)",
       "all"},
  };
  return {
      "attnscope eval [--models A,B] [--samples N] [--out DIR]\n"
      "       attnscope eval --images DIR (--masks DIR | --boxes FILE.csv) "
      "[--labels FILE.csv] --model FILE [--methods LIST] [--out DIR]\n"
      "       attnscope eval --images DIR --masks DIR --model FILE --methods dino-masks "
      "[--layer L] [--mass M] [--out DIR]",
      state_options, flags};
}

int eval_command(const Args& args) {
  auto parsed = parse_or_print_help(args, eval_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  if (!line.state.out.empty()) check_output_folder(line.state.out);  // before any model is loaded
  if (!line.flags["images"].empty()) return eval_folder(line);
  configure_threads();
  const torch::Device device = resolve_device(line.state.device);
  const int samples = line.flag_int("samples");
  if (samples < 1)
    throw std::invalid_argument("--samples must be at least 1 held-out image, got " + std::to_string(samples));
  std::vector<std::string> models;
  if (line.flags["models"].empty())
    models = default_models();
  else {
    std::stringstream list(line.flags["models"]);
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) models.push_back(item);
  }
  if (models.empty()) throw std::invalid_argument("no models to evaluate");

  nlohmann::json report = nlohmann::json::array();
  std::cout << "| model | accuracy | mass in object, last layer | best layer: mass | pointing, last layer | best "
               "layer: pointing "
               "| Grad-CAM: mass | Grad-CAM: pointing | rank, block "
            << kRankLayer << " (mean of heads) |\n|---|---|---|---|---|---|---|---|---|\n";
  double baseline = 0;
  const int task_classes = int(glyph_class_names().size());
  for (const auto& path : models) {
    LoadedModel model = load_model(path, {}, device);
    if (model.output_kind() != OutputKind::Logits || model.num_classes() != task_classes) {
      // An accuracy of 0 would say the model is bad at a task it was never made for.
      std::cout << "| " << std::filesystem::path(path).stem().string() << " | does not fit the glyph task: the model "
                << (model.output_kind() == OutputKind::Logits
                        ? "has " + std::to_string(model.num_classes()) + " classes"
                        : "outputs " + to_string(model.output_kind()) + " without classes")
                << ", the task " << task_classes << " |\n"
                << std::flush;
      report.push_back({{"model", path},
                        {"model_commit", model.source.commit},
                        {"fits_task", false},
                        {"classes", model.num_classes()}});
      continue;
    }
    const int depth = model.backbone->attention_layers();
    std::vector<LayerFocus> focus(static_cast<size_t>(depth));
    int correct = 0;
    double rank = 0, rank_without_dwc = -1;
    // Every layer's numerical rank (mean of heads) and kind, on the first held-out image: how rank
    // differs between a hierarchical model's local and global layers.
    std::vector<double> layer_ranks(size_t(depth), 0.0);
    std::vector<int64_t> layer_sizes(size_t(depth), 0);
    std::vector<std::string> layer_kinds(static_cast<size_t>(depth));
    LayerFocus gradcam_focus;
    const int batch = 50;
    for (int first = 0; first < samples; first += batch) {
      const int count = std::min(batch, samples - first);
      GlyphBatch data = make_glyph_batch(kHeldOutSeedBase + uint64_t(first), count);
      // Grad-CAM of the top-1 class at its default layer (norm1 of the last block), per image.
      for (int i = 0; i < count; ++i) {
        const GradCamResult cam =
            grad_cam(model.native("Grad-CAM"), data.images.slice(0, i, i + 1).to(device), AttentionSettings{});
        const auto coverage = patch_coverage(data.masks[i][0], cam.layout);
        const torch::Tensor patches = cam.scaled.reshape({-1});
        gradcam_focus.mass += mass_inside(patches, coverage);
        gradcam_focus.hits += pointing_hit(patches, coverage) ? 1 : 0;
      }
      c10::InferenceMode inference_mode;
      const ForwardOutput output = model.forward(data.images.to(device), AttentionSettings{});
      correct += int((output.logits.argmax(1).to(torch::kCPU) == data.labels).sum().item<int64_t>());
      for (int i = 0; i < count; ++i) {
        if (path == models.front())
          baseline += (patch_coverage(data.masks[i][0], output.layout) > 0).to(torch::kDouble).mean().item<double>();
        for (int l = 0; l < depth; ++l) {
          const AttentionCapture& capture = output.layers[size_t(l)];
          const auto patches = focus_map(capture, i);
          const auto coverage = patch_coverage(data.masks[i][0], capture.key_layout);
          focus[size_t(l)].mass += mass_inside(patches, coverage);
          focus[size_t(l)].hits += pointing_hit(patches, coverage) ? 1 : 0;
        }
      }
      if (first == 0) {
        for (int l = 0; l < depth; ++l) {
          const AttentionCapture& capture = output.layers[size_t(l)];
          layer_ranks[size_t(l)] = mean_rank(capture);
          layer_sizes[size_t(l)] = capture.layout.total_tokens();  // the matrix's rows: every query token
          const std::string access = capture.placement.access.empty() ? "global" : capture.placement.access;
          layer_kinds[size_t(l)] = to_string(capture.attention.kernel) + " " + access;
        }
        const AttentionCapture& ranked = output.layers[size_t(std::min(kRankLayer, depth - 1))];
        rank = layer_ranks[size_t(std::min(kRankLayer, depth - 1))];
        if (ranked.attention.dwc) {  // the layer's own DWC (a hierarchical model's may have none)
          AttentionSettings without_dwc;
          without_dwc.dwc = false;
          const auto plain = model.forward(data.images.to(device), without_dwc);
          rank_without_dwc = mean_rank(plain.layers[size_t(std::min(kRankLayer, depth - 1))]);
        }
      }
    }
    int best_mass = 0, best_hits = 0;
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < depth; ++l) {
      focus[size_t(l)].mass /= samples;
      focus[size_t(l)].hits /= samples;
      if (focus[size_t(l)].mass > focus[size_t(best_mass)].mass) best_mass = l;
      if (focus[size_t(l)].hits > focus[size_t(best_hits)].hits) best_hits = l;
      layers.push_back({{"layer", l},
                        {"mass_inside", focus[size_t(l)].mass},
                        {"pointing", focus[size_t(l)].hits},
                        {"kind", layer_kinds[size_t(l)]},
                        {"rank", layer_ranks[size_t(l)]},
                        {"matrix_size", layer_sizes[size_t(l)]}});
    }
    gradcam_focus.mass /= samples;
    gradcam_focus.hits /= samples;
    const double accuracy = double(correct) / samples;
    const std::string name = std::filesystem::path(path).stem().string();
    std::cout << std::fixed << std::setprecision(3) << "| " << name << " | " << accuracy << " | " << focus.back().mass
              << " | " << focus[size_t(best_mass)].mass << " (block " << best_mass << ") | " << focus.back().hits
              << " | " << focus[size_t(best_hits)].hits << " (block " << best_hits << ") | " << gradcam_focus.mass
              << " | " << gradcam_focus.hits << " | " << std::setprecision(1) << rank;
    if (rank_without_dwc >= 0) std::cout << " (" << rank_without_dwc << " without DWC)";
    std::cout << " |\n" << std::flush;
    nlohmann::json entry = {{"model", path},
                            {"model_commit", model.source.commit},
                            {"accuracy", accuracy},
                            {"layers", layers},
                            {"gradcam", {{"mass_inside", gradcam_focus.mass}, {"pointing", gradcam_focus.hits}}},
                            {"rank", rank},
                            {"rank_layer", kRankLayer}};
    if (rank_without_dwc >= 0) entry["rank_without_dwc"] = rank_without_dwc;
    report.push_back(entry);
  }
  baseline /= samples;
  std::cout << "\nclass-token attention, mean over heads (models without a class token: the attention each patch "
               "receives, mean over queries and heads); Grad-CAM of the top-1 class at norm1 of the last block; "
            << samples << " held-out images; a uniform map would put " << std::setprecision(3) << baseline
            << " of its mass on the object's patches.\n";
  if (!line.state.out.empty()) {
    std::filesystem::create_directories(line.state.out);
    write_file_atomically((std::filesystem::path(line.state.out) / "eval.json").string(), [&](std::ostream& out) {
      const nlohmann::json file = {{"samples", samples}, {"uniform_mass_inside", baseline}, {"models", report}};
      out << json_text(with_schema(file, "eval-models")) << "\n";
    });
  }
  return 0;
}

}  // namespace attnscope
