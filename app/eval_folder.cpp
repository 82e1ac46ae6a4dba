// `attnscope eval --images DIR (--masks DIR | --boxes FILE.csv) [--labels FILE.csv] --model F`: any
// checkpoint over a folder of your own images with known objects. Per attribution method and layer:
// the pointing game, the map's mass inside the object and its deletion AUC; the accuracy when
// labels are given and the model's classes fit them.
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <sstream>

#include "analysis/attribution.h"
#include "analysis/dino_masks.h"
#include "analysis/faithfulness.h"
#include "analysis/focus_metrics.h"
#include "app/cli.h"
#include "app/eval_folder.h"
#include "core/atomic_file.h"
#include "core/cv_image.h"
#include "core/json_checked.h"
#include "core/number_text.h"
#include "core/output_schemas.h"
#include "core/progress_bar.h"
#include "datasets/glyph_task.h"
#include "exports/export.h"
#include "models/inference.h"

namespace attnscope {

namespace {

namespace fs = std::filesystem;

// A CSV with a header row, read by column name; `file` or `seed` (a glyph_<seed>.png written by
// `attnscope glyphs`) names the image of each row.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  bool glyph_format = false;  // names images by seed, as `attnscope glyphs` writes them

  int column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return int(i);
    return -1;
  }
  std::string image_of(const std::vector<std::string>& row) const {
    const int file = column("file");
    if (file >= 0) return row.at(size_t(file));
    return "glyph_" + row.at(size_t(column("seed"))) + ".png";
  }
};

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    while (!cell.empty() && cell.front() == ' ') cell.erase(cell.begin());
    cells.push_back(cell);
  }
  return cells;
}

CsvTable read_csv(const std::string& path, const std::string& option, const std::vector<std::string>& needed) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(option + " " + path + ": cannot be read");
  CsvTable table;
  std::string line;
  if (!std::getline(in, line)) throw std::invalid_argument(option + " " + path + " is empty");
  table.header = split_csv_line(line);
  table.glyph_format = table.column("file") < 0 && table.column("seed") >= 0;
  if (table.column("file") < 0 && table.column("seed") < 0)
    throw std::invalid_argument(option + " " + path + ": the header needs a 'file' (or 'seed') column");
  for (const auto& name : needed)
    if (table.column(name) < 0)
      throw std::invalid_argument(option + " " + path + ": the header needs a '" + name + "' column");
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty() || line == "\r") continue;
    auto cells = split_csv_line(line);
    if (cells.size() != table.header.size())
      throw std::invalid_argument(option + " " + path + ": line " + std::to_string(number) + " has " +
                                  std::to_string(cells.size()) + " fields, the header " +
                                  std::to_string(table.header.size()));
    table.rows.push_back(std::move(cells));
  }
  return table;
}

// The object of an image: its mask file, or its boxes drawn filled, at the image's own size.
cv::Mat object_mask(const std::string& image_path, const cv::Size& size, const std::string& masks_dir,
                    const std::map<std::string, std::vector<cv::Rect>>& boxes, int64_t max_pixels) {
  const fs::path image(image_path);
  if (!masks_dir.empty()) {
    std::vector<fs::path> candidates = {fs::path(masks_dir) / image.filename()};
    for (const char* extension : {".png", ".bmp", ".tif", ".jpg"})
      candidates.push_back(fs::path(masks_dir) / (image.stem().string() + extension));
    for (const auto& candidate : candidates) {
      if (!fs::is_regular_file(candidate)) continue;
      cv::Mat rgb = to_mat(load_image_rgb(candidate.string(), max_pixels)), gray;
      if (rgb.size() != size)
        throw std::invalid_argument("mask " + candidate.string() + " is " + std::to_string(rgb.cols) + "x" +
                                    std::to_string(rgb.rows) + ", its image " + std::to_string(size.width) + "x" +
                                    std::to_string(size.height));
      cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
      return gray > 0;
    }
    throw std::invalid_argument("no mask for " + image.filename().string() + " in " + masks_dir);
  }
  const auto found = boxes.find(image.filename().string());
  if (found == boxes.end()) throw std::invalid_argument("no box for " + image.filename().string());
  cv::Mat mask(size, CV_8UC1, cv::Scalar(0));
  for (const cv::Rect& box : found->second) cv::rectangle(mask, box, cv::Scalar(255), cv::FILLED);
  return mask;
}

// The mask as the model sees it: transformed like the image, [H, W] uint8 at the input size.
torch::Tensor prepared_mask(const cv::Mat& mask, const InputSettings& input, const LoadedModel& model) {
  cv::Mat rgb, prepared, gray;
  cv::cvtColor(mask, rgb, cv::COLOR_GRAY2RGB);
  prepared = to_mat(prepare_model_input(to_rgb_image(rgb), input, model));
  cv::cvtColor(prepared, gray, cv::COLOR_RGB2GRAY);
  const cv::Mat object = gray > 127;
  return torch::from_blob(object.data, {object.rows, object.cols}, torch::kUInt8).clone();
}

// One row of the table: a method read at one layer (or through all of them).
struct Score {
  std::string method, layer;
  bool random = false;  // the random order and uniform map every method is measured against
  double hits = 0, mass = 0, deletion = 0;
  int images = 0;
};

// Whether the labels can be compared with the model's outputs; empty when they can.
std::string label_mismatch(const LoadedModel& model, const CsvTable& labels, int largest_label) {
  if (model.output_kind() != OutputKind::Logits)
    return "the model outputs " +
           std::string(model.output_kind() == OutputKind::Embedding ? "an embedding" : "features") +
           ", not classes: accuracy is not measured";
  const int classes = model.num_classes();
  const int task_classes = labels.glyph_format ? int(glyph_class_names().size()) : largest_label + 1;
  const bool fits = labels.glyph_format ? classes == task_classes : classes >= task_classes;
  if (fits) return "";
  return "the model has " + std::to_string(classes) + " classes and the labels " +
         (labels.glyph_format ? "are the glyph task's " + std::to_string(task_classes) + " digits"
                              : "go up to class " + std::to_string(largest_label)) +
         ": the model does not fit this task, accuracy is not measured";
}

// `--methods dino-masks`: DINO's masks of layer --layer (default the last) on every image, each head's
// upsampled (nearest) to the image size and scored by its Jaccard index against the object mask; DINO's
// figure is the best head's index averaged over the images (dino issue #54).
int eval_dino_masks(const CommandLine& line, const std::vector<std::string>& images, const std::string& masks_dir) {
  const AppState& state = line.state;
  if (masks_dir.empty())
    throw std::invalid_argument("--methods dino-masks scores masks against object masks: give --masks DIR");
  // The dino-masks analysis's --mass (views/analysis_dino_masks.cpp), typed when given.
  const double* given_mass = state.options.get<double>("mass");
  const double mass = given_mass ? *given_mass : kDefaultDinoMass;
  configure_threads();
  LoadedModel model = load_model(state.model, state.arch_overrides(), resolve_device(state.device));
  std::vector<double> per_head, best_sum;
  int heads = 0, layer = 0;
  std::string layer_name;
  double best_total = 0;
  int scored = 0;
  std::vector<std::string> empty_objects;
  int64_t empty_masks = 0;
  ProgressBar bar;
  for (size_t index = 0; index < images.size(); ++index) {
    bar.show(index, images.size(), fs::path(images[index]).filename().string());
    const RgbImage rgb = load_image_rgb(images[index], state.max_pixels);
    const RgbImage prepared = prepare_model_input(rgb, state.input_settings(), model);
    const torch::Tensor object =
        prepared_mask(object_mask(images[index], cv::Size(rgb.cols, rgb.rows), masks_dir, {}, state.max_pixels),
                      state.input_settings(), model);
    const InferenceResult inference = run_inference(model, prepared, state.attention);
    layer = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
    const AttentionCapture& capture = inference.forward.layers[size_t(layer)];
    layer_name = capture.placement.name;
    const DinoMasks masks = dino_masks(capture, 0, mass);
    const std::vector<double> jaccard = mask_jaccard(masks, object);
    // An empty mask scores 0 whatever the attention: said below, not folded in silently.
    if (!object.ne(0).any().item<bool>()) empty_objects.push_back(fs::path(images[index]).filename().string());
    empty_masks += masks.masks.flatten(1).sum(1).eq(0).sum().item<int64_t>();
    if (per_head.empty()) {
      heads = int(jaccard.size());
      per_head.assign(jaccard.size(), 0.0);
    }
    double best = 0;
    for (size_t h = 0; h < jaccard.size(); ++h) {
      const double j = std::isnan(jaccard[h]) ? 0.0 : jaccard[h];  // both empty: no overlap to count
      per_head[h] += j;
      best = std::max(best, j);
    }
    best_total += best;
    ++scored;
  }
  bar.show(images.size(), images.size(), "done");
  for (double& value : per_head) value /= std::max(1, scored);
  const double jaccard = best_total / std::max(1, scored);
  std::cout << "attnscope eval dino-masks: " << fs::path(state.model).filename().string() << ", " << layer_name
            << ", mass " << mass << ", " << scored << " images of " << line.flags.at("images")
            << "\n\n| head | Jaccard |\n|---|---|\n"
            << std::fixed << std::setprecision(4);
  for (size_t h = 0; h < per_head.size(); ++h) std::cout << "| " << h << " | " << per_head[h] << " |\n";
  std::cout << "\nJaccard (best head per image, averaged over images): " << jaccard << "\n";
  std::cout.unsetf(std::ios::floatfield);
  std::vector<std::string> warnings;
  if (!empty_objects.empty())
    warnings.push_back(std::to_string(empty_objects.size()) + " of " + std::to_string(scored) +
                       " object masks are empty (all zero), first " + empty_objects.front() +
                       ": their Jaccard counts 0; check --masks");
  if (empty_masks > 0)
    warnings.push_back(std::to_string(empty_masks) + " of " + std::to_string(int64_t(scored) * heads) +
                       " DINO masks are empty at --mass " + format_double(mass) +
                       " (no patch is needed to hold that share): their Jaccard counts 0");
  print_warnings("eval", warnings);
  const nlohmann::json report = {{"model", state.model},
                                 {"model_source", model.source.to_json()},
                                 {"images", scored},
                                 {"folder", line.flags.at("images")},
                                 {"objects", "masks " + masks_dir},
                                 {"layer", {{"index", layer}, {"name", layer_name}}},
                                 {"heads", heads},
                                 {"mass", mass},
                                 {"jaccard_per_head", per_head},
                                 {"jaccard", jaccard},
                                 {"empty_object_masks", empty_objects.size()},
                                 {"empty_dino_masks", empty_masks}};
  if (!state.out.empty()) {
    fs::create_directories(state.out);
    write_file_atomically((fs::path(state.out) / "eval.json").string(),
                          [&](std::ostream& out) { out << json_text(with_schema(report, "eval-dino-masks")) << "\n"; });
  }
  return 0;
}

}  // namespace

int eval_folder(const CommandLine& line) {
  const AppState& state = line.state;
  const std::string images_dir = line.flags.at("images"), masks_dir = line.flags.at("masks"),
                    boxes_path = line.flags.at("boxes"), labels_path = line.flags.at("labels");
  if (state.model.empty()) throw std::invalid_argument("--model is required with --images");
  if (masks_dir.empty() == boxes_path.empty())
    throw std::invalid_argument("give the objects with --masks DIR or --boxes FILE.csv (one of them)");
  if (state.methods.dino_masks) {
    const std::vector<std::string> images = list_images(images_dir);
    if (images.empty()) throw std::invalid_argument("no images in " + images_dir);
    return eval_dino_masks(line, images, masks_dir);
  }
  const std::vector<AttributionMethod>& methods = state.methods.methods;
  // With "all", a method that cannot apply to this model (relevance on a family whose attention does
  // not reach autograd) is left out with its reason; a method asked for by name fails the run.
  const bool every_method = state.methods.every;
  std::map<std::string, std::string> not_applicable;
  const std::vector<int> layer_list = parse_index_list("layers", line.flags.at("layers"));
  const std::vector<std::string> images = list_images(images_dir);
  if (images.empty()) throw std::invalid_argument("no images in " + images_dir);

  std::map<std::string, std::vector<cv::Rect>> boxes;
  if (!boxes_path.empty()) {
    const CsvTable table = read_csv(boxes_path, "--boxes", {"x", "y", "w", "h"});
    for (const auto& row : table.rows) {
      const auto at = [&](const char* name) { return parse_int_option("boxes", row[size_t(table.column(name))]); };
      boxes[table.image_of(row)].push_back(cv::Rect(at("x"), at("y"), at("w"), at("h")));
    }
  }
  std::map<std::string, int> labels;
  CsvTable label_table;
  int largest_label = -1;
  if (!labels_path.empty()) {
    label_table = read_csv(labels_path, "--labels", {"label"});
    for (const auto& row : label_table.rows) {
      const int label = parse_int_option("labels", row[size_t(label_table.column("label"))]);
      if (label < 0) throw std::invalid_argument("--labels: class " + std::to_string(label) + " is negative");
      labels[label_table.image_of(row)] = label;
      largest_label = std::max(largest_label, label);
    }
  }

  configure_threads();
  LoadedModel model = load_model(state.model, state.arch_overrides(), resolve_device(state.device));
  Backbone& backbone = model.native("eval's attribution methods");
  const std::string mismatch = labels_path.empty() ? "" : label_mismatch(model, label_table, largest_label);
  const bool use_labels = !labels_path.empty() && mismatch.empty();
  FaithfulnessOptions faithfulness;
  faithfulness.steps = state.steps;
  faithfulness.replacement = state.replacement;
  faithfulness.random_orders = 1;

  std::deque<Score> scores;  // references to its rows stay valid as rows are added
  const auto score_for = [&](const std::string& method, const std::string& layer) -> Score& {
    for (auto& score : scores)
      if (score.method == method && score.layer == layer) return score;
    scores.push_back({method, layer});
    return scores.back();
  };
  int correct = 0, labelled = 0, depth = 0;
  double uniform_mass = 0;
  ProgressBar bar;
  for (size_t index = 0; index < images.size(); ++index) {
    const std::string name = fs::path(images[index]).filename().string();
    bar.show(index, images.size(), name);
    const RgbImage rgb = load_image_rgb(images[index], state.max_pixels);
    const RgbImage prepared = prepare_model_input(rgb, state.input_settings(), model);
    const torch::Tensor object =
        prepared_mask(object_mask(images[index], cv::Size(rgb.cols, rgb.rows), masks_dir, boxes, state.max_pixels),
                      state.input_settings(), model);
    const torch::Tensor input = image_to_tensor(prepared, model.normalization).to(model.device);
    const InferenceResult inference = run_inference(model, prepared, state.attention);
    depth = int(inference.forward.layers.size());
    const auto label = labels.find(name);
    if (!labels_path.empty() && label == labels.end())
      throw std::invalid_argument("--labels " + labels_path + " has no label for " + name);
    if (use_labels) {
      ++labelled;
      correct += inference.top.front().index == label->second ? 1 : 0;
    }
    // eval scores each image's label (or its top-1 class): the class target, per image.
    if (model.output_kind() == OutputKind::Logits) faithfulness.target = class_target(use_labels ? label->second : -1);
    const FaithfulnessProbe probe(backbone, input, state.attention, model.normalization, faithfulness);
    uniform_mass += (patch_coverage(object, inference.forward.layout) > 0).to(torch::kDouble).mean().item<double>();
    for (const AttributionMethod method : methods) {
      const std::string name = to_string(method);
      if (not_applicable.count(name)) continue;
      // Layer-wise methods once per layer; the others once, through every layer ("all").
      std::vector<std::optional<int>> layers = {std::nullopt};
      if (reads_hook_point(method) || method == AttributionMethod::Attention) {
        layers.clear();
        std::vector<int> chosen = layer_list;
        if (chosen.empty())
          for (int l = 0; l < depth; ++l) chosen.push_back(l);
        for (int l : chosen) layers.push_back(l < 0 ? depth + l : l);
      }
      for (const std::optional<int>& layer : layers) {
        AttributionRequest request;
        request.method = method;
        request.target = probe.target();
        request.fusion = state.fusion;
        request.discard = state.discard;
        request.ig_steps = state.ig_steps;
        request.ig_baseline = state.ig_baseline;
        if (layer) {
          if (*layer < 0 || *layer >= depth)
            throw std::invalid_argument("--layers " + line.flags.at("layers") + ": the model has " +
                                        std::to_string(depth) + " attention layers");
          request.attention_layer = *layer;
          request.layer = "blocks." + std::to_string(*layer) + ".norm1";
        }
        AttributionMap map;
        try {
          map = compute_attribution(backbone, input, state.attention, model.normalization, request,
                                    &inference.forward.layers);
        } catch (const std::invalid_argument& e) {
          if (!every_method) throw;
          not_applicable[name] = e.what();
          break;
        }
        const torch::Tensor coverage = patch_coverage(object, map.layout);
        Score& score = score_for(name, reads_hook_point(method) ? map.where : layer ? std::to_string(*layer) : "all");
        score.hits += pointing_hit(map.map.reshape({-1}), coverage) ? 1 : 0;
        score.mass += mass_inside(map.map.reshape({-1}), coverage);
        score.deletion += probe.deletion(map.map).auc;
        ++score.images;
      }
    }
    Score& random = score_for("random", "");
    random.random = true;
    const TokenLayout& grid = inference.forward.layout;
    random.deletion += probe.random_baseline(grid.grid_h, grid.grid_w).deletion.auc;
    random.mass += (patch_coverage(object, grid) > 0).to(torch::kDouble).mean().item<double>();
    ++random.images;
  }
  bar.show(images.size(), images.size(), "done");

  nlohmann::json rows = nlohmann::json::array();
  std::cout << "attnscope eval: " << fs::path(state.model).filename().string() << " on " << images.size()
            << " images of " << images_dir << "\n\n| method | layer | pointing | mass in object | deletion AUC |\n"
            << "|---|---|---|---|---|\n"
            << std::fixed << std::setprecision(3);
  for (const Score& score : scores) {
    const double n = std::max(1, score.images);
    const bool random = score.random;
    std::cout << "| " << (random ? "random / uniform" : score.method) << " | " << score.layer << " | ";
    if (!random) std::cout << score.hits / n;
    std::cout << " | " << score.mass / n << " | " << score.deletion / n << " |\n";
    rows.push_back({{"method", score.method},
                    {"layer", score.layer},
                    {"pointing", random ? nlohmann::json(nullptr) : nlohmann::json(score.hits / n)},
                    {"mass_inside", score.mass / n},
                    {"deletion_auc", score.deletion / n},
                    {"images", score.images}});
  }
  for (const auto& [method, why] : not_applicable) std::cout << "not applicable: " << method << ": " << why << "\n";
  std::cout << "\nrandom: a random order of the patches (deletion) and a uniform map (mass); deletion: "
            << to_string(faithfulness.replacement) << " replacement, " << faithfulness.steps
            << " steps, probability of the " << (use_labels ? "labelled" : "top-1") << " class\n";
  nlohmann::json report = {
      {"model", state.model},
      {"model_source", model.source.to_json()},
      {"images", images.size()},
      {"folder", images_dir},
      {"objects", masks_dir.empty() ? "boxes " + boxes_path : "masks " + masks_dir},
      {"methods", rows},
      {"uniform_mass_inside", uniform_mass / double(images.size())},
      {"not_applicable", not_applicable},
      {"deletion", {{"steps", faithfulness.steps}, {"replacement", to_string(state.replacement)}}}};
  if (use_labels) {
    const double accuracy = double(correct) / std::max(1, labelled);
    std::cout << "accuracy: " << accuracy << " (" << correct << " of " << labelled << " labelled images)\n";
    report["accuracy"] = accuracy;
  } else if (!mismatch.empty()) {
    std::cout << "accuracy: not measured: " << mismatch << "\n";
    report["accuracy"] = nullptr;
    report["accuracy_note"] = mismatch;
  }
  if (!state.out.empty()) {
    fs::create_directories(state.out);
    write_file_atomically((fs::path(state.out) / "eval.json").string(),
                          [&](std::ostream& out) { out << json_text(with_schema(report, "eval-images")) << "\n"; });
  }
  return 0;
}

}  // namespace attnscope
