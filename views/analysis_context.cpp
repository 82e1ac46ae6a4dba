// What the analyses' headless runs share (views/analysis_context.h).
#include "views/analysis_context.h"
#include "core/grid_map.h"

#include "models/head_ablation.h"
#include "views/option_catalog.h"

#include "views/analysis_registry.h"

#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/excerpt.h"
#include "core/json_checked.h"
#include "core/output_schemas.h"
#include "datasets/glyph_images.h"
#include "models/inference.h"

namespace attnscope {

using nlohmann::json;

namespace {

// 1 where a mask image is light: its grey level, as OpenCV's RGB2GRAY rounds it (14-bit fixed
// point), above 127.
torch::Tensor object_pixels(const RgbImage& mask) {
  torch::Tensor object = torch::zeros({mask.rows, mask.cols}, torch::kUInt8);
  uint8_t* out = object.data_ptr<uint8_t>();
  for (int y = 0; y < mask.rows; ++y) {
    const uint8_t* pixel = mask.row(y);
    for (int x = 0; x < mask.cols; ++x, pixel += 3)
      *out++ = ((pixel[0] * 4899 + pixel[1] * 9617 + pixel[2] * 1868 + (1 << 13)) >> 14) > 127;
  }
  return object;
}

}  // namespace

const CommandFlag kVariantsFlag = {"variants", "LIST",
                                   "spectrum, metrics: variants to compare on the same model (default: --variant)", ""};
const CommandFlag kTopKFlag = {"top-k", "K", "fp, metrics: keys counted by the top-k mass", "10"};

void write_summary(const AnalyzeContext& context, const std::string& kind, const json& summary) {
  context.files->add_text("summary.json", json_text(with_schema(summary, summary_schema(kind))) + "\n");
}

AttributionTarget session_target(const AnalyzeContext& context, Loaded& loaded) {
  const AppState& state = context.state;
  return resolve_target_spec(state.target, {loaded.model, state.input_settings(), state.attention, state.max_pixels});
}

json target_json(const AttributionTarget& target, const LoadedModel& model) {
  json block = {{"kind", target_kind(target.kind).name},
                {"spec", to_string(target.spec)},
                {"description", describe(target)},
                {"chosen", target.chosen}};
  if (target.kind == TargetKind::Class && target.index >= 0) {
    block["class_index"] = target.index;
    block["class_name"] = output_name(model, target.index);
  }
  if (target.kind == TargetKind::Text) {
    block["prompt"] = target.spec.prompt;
    block["prompt_tokens"] = target.prompt_tokens;
    block["logit_scale"] = target.scale;
    block["logit_bias"] = target.bias;
    block["tokenizer"] = target.tokenizer;
  }
  if (target.kind == TargetKind::Image) block["file"] = target.spec.image_file;
  return block;
}

void write_csv(const AnalyzeContext& context, const std::string& name, const std::string& header,
               const std::vector<std::vector<double>>& rows) {
  std::ostringstream stream;
  stream << header << "\n" << std::setprecision(9);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) stream << (i ? "," : "") << row[i];
    stream << "\n";
  }
  context.files->add_text(name, stream.str());
}

// A map over the model's input image in the session's colour map, opacity and alpha mode, on `scale`.
RgbImage overlay_in_colours(const AnalyzeContext& context, const RgbImage& rgb, const torch::Tensor& map,
                            const ValueScale& scale) {
  return overlay_values(rgb, to_grid_map(map).view(), scale, context.state.opacity, context.state.alpha);
}

void warn_if_undrawn(const AnalyzeContext& context, const ExportedFigure& exported) {
  if (!exported.figure_path.empty()) return;
  context.warnings.push_back("figure " + exported.stem + " not drawn: " + kNoFigures + "; its numbers are in " +
                             exported.stem + "_data/");
}

ValueScale unit_scale(const AnalyzeContext& context, const std::string& label) {
  ValueScale scale;
  scale.colormap = context.state.colormap;
  scale.label = label;
  return scale;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

Loaded load_inputs(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const std::string seed_text = context.line.flags.at("glyph-seed");
  if (state.model.empty()) throw std::invalid_argument("--model is required");
  if (state.image.empty() == seed_text.empty()) throw std::invalid_argument("give either --image or --glyph-seed");
  Loaded loaded;
  configure_threads();
  loaded.model = load_model(state.model, state.arch_overrides(), resolve_device(state.device));
  context.warnings = loaded.model.report.warnings;
  configure_input(loaded.model, state.input_settings());
  RgbImage rgb, mask;
  if (!seed_text.empty()) {
    uint64_t seed = 0;
    size_t used = 0;
    try {
      seed = std::stoull(seed_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != seed_text.size() || seed_text.find('-') != std::string::npos)
      throw std::invalid_argument("--glyph-seed expects a non-negative integer, got '" + excerpt(seed_text) + "'");
    GlyphImages sample = glyph_sample_images(seed);
    rgb = sample.rgb;
    mask = sample.mask;
  } else {
    rgb = load_image_rgb(state.image, state.max_pixels);
    const std::string mask_path = context.line.flags.at("object-mask");
    if (!mask_path.empty()) {
      mask = load_image_rgb(mask_path, state.max_pixels);
      if (mask.rows != rgb.rows || mask.cols != rgb.cols)
        throw std::invalid_argument("--object-mask " + mask_path + " is " + std::to_string(mask.cols) + "x" +
                                    std::to_string(mask.rows) + ", the image " + std::to_string(rgb.cols) + "x" +
                                    std::to_string(rgb.rows));
    }
  }
  loaded.prepared = prepare_model_input(rgb, state.input_settings(), loaded.model);
  // Mean ablation's means before any forward (the gradient methods run the model themselves).
  prepare_head_ablation(loaded.model, state.attention, loaded.prepared.rows, loaded.prepared.cols);
  if (!mask.empty())
    loaded.object_mask = object_pixels(prepare_model_input(mask, state.input_settings(), loaded.model));
  return loaded;
}

json common_summary(const AnalyzeContext& context, const std::string& analysis, const TokenLayout& layout,
                    const Loaded& loaded) {
  return {{"analysis", analysis},
          {"preprocessing", preprocessing_json(loaded.model, context.state.input_settings(), loaded.prepared)},
          {"model", context.state.model},
          {"image", context.state.image},
          {"variant", to_string(context.state.attention.variant)},
          {"query", {{"spec", context.state.query.text()}}},
          {"state", to_json(context.state)},
          {"tokens",
           {{"prefix", layout.prefix_tokens()},
            {"grid", {layout.grid_h, layout.grid_w}},
            {"total", layout.total_tokens()}}}};
}

std::vector<Variant> variants_to_compare(const AnalyzeContext& context) {
  std::vector<Variant> variants;
  const auto names = split_list(context.line.flags.at("variants"));
  if (names.empty()) return {context.state.attention.variant};
  for (const auto& name : names) {
    try {
      variants.push_back(parse_variant(name));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--variants: ") + e.what());
    }
  }
  return variants;
}

void for_each_variant_layer(const AnalyzeContext& context, Loaded& loaded,
                            const std::function<void(Variant, const AttentionCapture&, int layer)>& visit) {
  for (Variant variant : variants_to_compare(context)) {
    AttentionSettings settings = context.state.attention;
    settings.variant = variant;
    const InferenceResult inference = run_inference(loaded.model, loaded.prepared, settings);
    const int layer = resolve_layer_index(context.state.layer, int(inference.forward.layers.size()));
    visit(variant, inference.forward.layers[size_t(layer)], layer);
  }
}

}  // namespace attnscope
