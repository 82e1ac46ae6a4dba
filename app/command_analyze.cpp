// `attnscope analyze`: one analysis of one image (Grad-CAM, attention rollout, the attention
// matrix's spectrum and rank, FLatten's f_p, focus metrics) written as NPY, CSV, PNG and a JSON summary.
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <sstream>

#include "analysis/focus_metrics.h"
#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "app/analyze.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/excerpt.h"
#include "core/npy.h"
#include "core/output_files.h"
#include "core/output_schemas.h"
#include "core/value_scale.h"
#include "datasets/glyph_task.h"
#include "models/inference.h"

namespace attnscope {

namespace analyze {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kAnalyses = {"gradcam",   "rollout",   "spectrum",    "fp",       "metrics",
                                            "gradcam++", "xgradcam",  "layercam",    "eigencam", "hirescam",
                                            "scorecam",  "relevance", "gradrollout", "ig",       "faithfulness"};

const std::vector<std::string> kAnalyzeOptions = {
    "model",       "image",    "out",         "variant",   "p",      "window",        "anchors", "dwc",
    "norm",        "layer",    "head",        "query",     "resize", "size",          "crop",    "interpolation",
    "mean",        "std",      "device",      "arch",      "class",  "gradcam-layer", "fusion",  "discard",
    "box",         "colormap", "scale",       "opacity",   "alpha",  "overwrite",     "methods", "steps",
    "replacement", "ig-steps", "ig-baseline", "max-pixels"};

// The analyses in the order --help and errors list them.
std::string analysis_list() {
  std::string list;
  for (const auto& name : kAnalyses) list += (list.empty() ? "" : ", ") + name;
  return list;
}

const std::vector<CommandFlag> kAnalyzeFlags = {
    {"analysis", "NAME",
     "gradcam, rollout, spectrum, fp, metrics; the attribution methods gradcam++, xgradcam, layercam, eigencam, "
     "hirescam, scorecam, relevance, gradrollout, ig (NAME.npy at the layer's grid); faithfulness (--methods)",
     ""},
    {"variants", "LIST", "spectrum, metrics: variants to compare on the same model (default: --variant)", ""},
    {"top-k", "K", "fp, metrics: keys counted by the top-k mass", "10"},
    {"bins", "N", "fp: histogram bins over cosine similarity [0, 1]", "50"},
    {"object-mask", "FILE", "metrics: object mask image (nonzero = object), transformed like the image", ""},
    {"glyph-seed", "S", "metrics, all: use the generated glyph sample S as the image and its mask as the object", ""},
};

void write_summary(const Context& context, const std::string& kind, const json& summary) {
  context.files->add_text("summary.json", with_schema(summary, kind).dump(2) + "\n");
}

void write_csv(const Context& context, const std::string& name, const std::string& header,
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
cv::Mat overlay_in_colours(const Context& context, const cv::Mat& rgb, const torch::Tensor& map,
                           const ValueScale& scale) {
  const torch::Tensor values = map.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const cv::Mat mat(int(values.size(0)), int(values.size(1)), CV_32FC1, const_cast<float*>(values.data_ptr<float>()));
  return overlay_values(rgb, mat, scale, context.state.opacity, context.state.alpha);
}

ValueScale unit_scale(const Context& context, const std::string& label) {
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

Loaded load_inputs(const Context& context) {
  const AppState& state = context.state;
  const std::string seed_text = context.line.flags.at("glyph-seed");
  if (state.model.empty()) throw std::invalid_argument("--model is required");
  if (state.image.empty() == seed_text.empty()) throw std::invalid_argument("give either --image or --glyph-seed");
  Loaded loaded;
  configure_threads();
  loaded.model = load_model(state.model, ArchOverrides::parse(state.arch), resolve_device(state.device));
  context.warnings = loaded.model.report.warnings;
  configure_input(loaded.model, state.input_settings());
  cv::Mat rgb, mask;
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
    GlyphSample sample = make_glyph_sample(seed);
    rgb = sample.rgb;
    cv::cvtColor(sample.mask, mask, cv::COLOR_GRAY2RGB);
  } else {
    rgb = load_image_rgb(state.image, state.max_pixels);
    const std::string mask_path = context.line.flags.at("object-mask");
    if (!mask_path.empty()) {
      mask = load_image_rgb(mask_path, state.max_pixels);
      if (mask.size() != rgb.size())
        throw std::invalid_argument("--object-mask " + mask_path + " is " + std::to_string(mask.cols) + "x" +
                                    std::to_string(mask.rows) + ", the image " + std::to_string(rgb.cols) + "x" +
                                    std::to_string(rgb.rows));
    }
  }
  loaded.prepared = prepare_model_input(rgb, state.input_settings(), loaded.model);
  if (!mask.empty()) {
    cv::Mat prepared_mask = prepare_model_input(mask, state.input_settings(), loaded.model), gray;
    cv::cvtColor(prepared_mask, gray, cv::COLOR_RGB2GRAY);
    loaded.object_mask = gray > 127;
  }
  return loaded;
}

json common_summary(const Context& context, const std::string& analysis, const TokenLayout& layout,
                    const Loaded& loaded) {
  return {{"analysis", analysis},
          {"preprocessing", preprocessing_json(loaded.model, context.state.input_settings(), loaded.prepared)},
          {"model", context.state.model},
          {"image", context.state.image},
          {"variant", to_string(context.state.attention.variant)},
          {"query", {{"spec", context.state.query}}},
          {"state", to_json(context.state)},
          {"tokens",
           {{"prefix", layout.prefix_tokens()},
            {"grid", {layout.grid_h, layout.grid_w}},
            {"total", layout.total_tokens()}}}};
}

int analyze_gradcam(const Context& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  auto input = image_to_tensor(loaded.prepared, loaded.model.normalization).to(loaded.model.device);
  GradCamOptions options;
  options.layer = state.gradcam_layer;
  options.target_class = state.target_class;
  const GradCamResult result = grad_cam(loaded.model.native("Grad-CAM"), input, state.attention, options);
  const auto upsampled = upsample_map(result.scaled, loaded.prepared.rows, loaded.prepared.cols);
  context.files->add_npy("gradcam_raw.npy", result.cam);
  context.files->add_npy("gradcam.npy", result.scaled);
  context.files->add_npy("gradcam_upsampled.npy", upsampled);
  context.files->add_npy("logits.npy", result.logits);
  // In the session's colour map (viridis unless --colormap says otherwise; jet is still there).
  context.files->add_png("gradcam_overlay.png",
                         overlay_in_colours(context, loaded.prepared, upsampled, unit_scale(context, "max = 1")));

  json summary = common_summary(context, "gradcam", result.layout, loaded);
  summary["layer"] = result.layer;
  summary["class"] = {{"index", result.target_class},
                      {"name", output_name(loaded.model, result.target_class)},
                      {"logit", result.score},
                      {"chosen", state.target_class >= 0                  ? "given"
                                 : loaded.model.output_kind() == "logits" ? "top-1"
                                                                          : "output norm"}};
  summary["max_abs_gradient"] = result.max_abs_gradient;
  summary["milliseconds"] = result.milliseconds;
  summary["normalisation"] = "scaled = (cam - min) / (max + 1e-7), cam = ReLU(sum_c w_c A_c) (pytorch-grad-cam)";
  if (!result.warning.empty()) summary["warning"] = result.warning;
  write_summary(context, "analyze-gradcam", summary);
  if (!result.warning.empty()) std::cerr << "attnscope analyze: warning: " << result.warning << "\n";
  std::cout
      << "attnscope analyze gradcam: " << result.layer << ", target " << output_name(loaded.model, result.target_class)
      << " (score " << result.score << "), " << result.milliseconds << " ms\nwrote " << context.out.string()
      << "/{summary.json, gradcam.npy, gradcam_raw.npy, gradcam_upsampled.npy, logits.npy, gradcam_overlay.png}\n";
  return 0;
}

int analyze_rollout(const Context& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const InferenceResult inference = run_inference(loaded.model, loaded.prepared, state.attention);
  // The blocks that share the selected layer's token grid (a hierarchical stage; every block of a ViT).
  const int selected = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
  std::vector<AttentionCapture> chain;
  for (int index : rollout_layers(inference.forward.layers, selected))
    chain.push_back(inference.forward.layers[size_t(index)]);
  const TokenLayout& layout = chain.front().layout;
  const ResolvedQuery query = resolve_query(state.query, layout);
  RolloutOptions options;
  options.fusion = state.fusion;
  options.discard_ratio = state.discard;
  options.query = query.token;
  const RolloutResult result = attention_rollout(chain, options);
  context.files->add_npy("rollout.npy", result.patch_map);
  context.files->add_npy("rollout_normalised.npy", result.normalised);
  context.files->add_npy("rollout_row.npy", result.row);
  context.files->add_png("rollout_overlay.png", overlay_in_colours(context, inference.input_rgb, result.normalised,
                                                                   unit_scale(context, "max = 1")));
  json summary = common_summary(context, "rollout", layout, loaded);
  summary["fusion"] = to_string(state.fusion);
  summary["discard"] = state.discard;
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  summary["layers"] = inference.forward.layers.size();
  summary["attention"] = inference.forward.layers.back().attention.describe();
  write_summary(context, "analyze-rollout", summary);
  std::cout << "attnscope analyze rollout: " << inference.forward.layers.size() << " layers, fusion "
            << to_string(state.fusion) << ", discard " << state.discard << ", query " << layout.token_name(query.token)
            << "\nwrote " << context.out.string()
            << "/{summary.json, rollout.npy, rollout_normalised.npy, rollout_row.npy, rollout_overlay.png}\n";
  return 0;
}

std::vector<Variant> variants_to_compare(const Context& context) {
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

// One forward pass per variant to compare (--variants), each handed the selected layer's capture.
void for_each_variant_layer(const Context& context, Loaded& loaded,
                            const std::function<void(Variant, const AttentionCapture&, int layer)>& visit) {
  for (Variant variant : variants_to_compare(context)) {
    AttentionSettings settings = context.state.attention;
    settings.variant = variant;
    const InferenceResult inference = run_inference(loaded.model, loaded.prepared, settings);
    const int layer = resolve_layer_index(context.state.layer, int(inference.forward.layers.size()));
    visit(variant, inference.forward.layers[size_t(layer)], layer);
  }
}

json spectrum_json(const AttentionSpectrum& result) {
  return {{"rank", result.spectrum.numerical_rank}, {"effective_rank", result.spectrum.effective_rank},
          {"tolerance", result.spectrum.tolerance}, {"method", result.method},
          {"rank_bound", result.rank_bound},        {"dwc", result.dwc},
          {"milliseconds", result.milliseconds},    {"singular_values", result.spectrum.singular_values.numel()}};
}

int analyze_spectrum(const Context& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  json variants = json::array();
  std::ostringstream csv;  // long format: one row per singular value
  csv << "variant,dwc,index,singular_value\n" << std::setprecision(9);
  TokenLayout layout;
  int layer = 0;
  std::cout << "attnscope analyze spectrum:\n";
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int selected) {
    layer = selected;
    layout = capture.layout;  // the layer's own query grid (hierarchical stages differ)
    check_head_index(state.head, capture.heads);
    const std::string name = to_string(variant);

    torch::NoGradGuard no_grad;
    // FLatten's equivalent matrix (with the DWC term when it ran): the one the spectrum is of.
    const torch::Tensor matrix = capture.equivalent_matrix(0, state.head).to(torch::kCPU, torch::kFloat).contiguous();
    // Keep files of a reasonable size: the matrix as NPY up to 2048 tokens, the picture always.
    if (matrix.size(0) <= 2048) context.files->add_npy(("matrix_" + name + ".npy"), matrix);
    const cv::Mat values(int(matrix.size(0)), int(matrix.size(1)), CV_32F,
                         const_cast<float*>(matrix.data_ptr<float>()));
    ValueRange range;
    range.include(matrix.data_ptr<float>(), size_t(matrix.numel()));
    ScaleSpec spec = state.scale;
    if (spec.mode == ScaleMode::Uniform) spec.mode = ScaleMode::ZeroMax;  // the PNG shows the NPY's weights
    context.files->add_png("matrix_" + name + ".png",
                           colour_values(values, resolve_value_scale(spec, state.colormap, range)));

    std::vector<std::pair<bool, AttentionSpectrum>> results = {
        {capture.attention.dwc, attention_spectrum(capture, state.head, true)}};
    if (capture.attention.dwc) results.push_back({false, attention_spectrum(capture, state.head, false)});
    json entry = {{"variant", name}, {"attention", capture.attention.describe()}, {"head_dim", capture.head_dim}};
    for (const auto& [with_dwc, result] : results) {
      const std::string suffix = with_dwc ? "_dwc" : "";
      context.files->add_npy(("singular_values_" + name + suffix + ".npy"), result.spectrum.singular_values);
      auto values_at = result.spectrum.singular_values.accessor<float, 1>();
      for (int64_t i = 0; i < result.spectrum.singular_values.numel(); ++i)
        csv << name << "," << (with_dwc ? "on" : "off") << "," << i << "," << values_at[i] << "\n";
      entry[with_dwc ? "with_dwc" : (capture.attention.dwc ? "without_dwc" : "matrix")] = spectrum_json(result);
      std::cout << "  " << std::left << std::setw(9) << name << (with_dwc ? "+DWC " : "     ") << "rank "
                << result.spectrum.numerical_rank << " of " << std::min(matrix.size(0), matrix.size(1)) << " (bound "
                << result.rank_bound
                << (capture.head_dim > 0 ? ", d = " + std::to_string(capture.head_dim) : std::string())
                << "), effective rank " << result.spectrum.effective_rank << ", " << result.method << " "
                << result.milliseconds << " ms\n";
    }
    variants.push_back(entry);
  });
  context.files->add_text("spectrum.csv", csv.str());
  json summary = common_summary(context, "spectrum", layout, loaded);
  summary["layer"] = layer;
  summary["head"] = state.head;
  summary["tolerance_rule"] = "s_max * max(T, T) * eps(float32), as numpy.linalg.matrix_rank";
  summary["variants"] = variants;
  write_summary(context, "analyze-spectrum", summary);
  std::cout << "wrote " << context.out.string()
            << "/{summary.json, spectrum.csv, singular_values_*.npy, matrix_*.png}\n";
  return 0;
}

// Fig. 4: toy vectors and the score example need no model; with --model the layer study runs too.
int analyze_fp(const Context& context) {
  const AppState& state = context.state;
  const double p = state.attention.p;
  json summary = {{"analysis", "fp"},
                  {"p", p},
                  {"variant", to_string(state.attention.variant)},
                  {"query", {{"spec", state.query}}},
                  {"state", to_json(state)}};
  // The model first: a file f_p cannot study fails before anything is written.
  std::optional<Loaded> model_inputs;
  if (!state.model.empty()) {
    model_inputs.emplace(load_inputs(context));
    model_inputs->model.native("f_p on a model's layer");
  }
  for (const auto& [name, vectors] : {std::make_pair(std::string("2d"), quarter_circle_vectors(9)),
                                      std::make_pair(std::string("3d"), octant_vectors(40))}) {
    const auto focused = focus_rows(vectors, p);
    const auto cos_before = nearest_axis_cosine(vectors), cos_after = nearest_axis_cosine(focused);
    std::vector<std::vector<double>> rows;
    const int64_t dim = vectors.size(1);
    for (int64_t i = 0; i < vectors.size(0); ++i) {
      std::vector<double> row;
      for (int64_t c = 0; c < dim; ++c) row.push_back(vectors[i][c].item<double>());
      for (int64_t c = 0; c < dim; ++c) row.push_back(focused[i][c].item<double>());
      row.push_back(cos_before[i].item<double>());
      row.push_back(cos_after[i].item<double>());
      rows.push_back(row);
    }
    const std::string header =
        dim == 2 ? "x,y,fx,fy,axis_cos_before,axis_cos_after" : "x,y,z,fx,fy,fz,axis_cos_before,axis_cos_after";
    write_csv(context, ("fp_vectors_" + name + ".csv"), header, rows);
    summary["vectors_" + name] = {{"count", vectors.size(0)},
                                  {"mean_axis_cos_before", cos_before.mean().item<double>()},
                                  {"mean_axis_cos_after", cos_after.mean().item<double>()}};
  }
  const ScoreExample example = example_focus_scores(p);
  std::vector<std::vector<double>> score_rows;
  for (int64_t j = 0; j < example.keys.size(0); ++j)
    score_rows.push_back({double(j), example.before[j].item<double>(), example.after[j].item<double>()});
  write_csv(context, "fp_scores.csv", "key,before,after", score_rows);
  auto as_vector = [](const torch::Tensor& t) {
    auto values = t.to(torch::kDouble).contiguous();
    return std::vector<double>(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  };
  summary["score_example"] = {{"before", as_vector(example.before)}, {"after", as_vector(example.after)}};
  std::cout << "attnscope analyze fp: p = " << p << ", example scores " << json(as_vector(example.before)).dump()
            << " -> " << json(as_vector(example.after)).dump() << "\n";

  std::string written = "fp_vectors_2d.csv, fp_vectors_3d.csv, fp_scores.csv";
  if (model_inputs) {
    Loaded& loaded = *model_inputs;
    const InferenceResult inference = run_inference(loaded.model, loaded.prepared, state.attention);
    const int layer = resolve_layer_index(state.layer, int(inference.forward.layers.size()));
    check_head_index(state.head, inference.forward.layers[size_t(layer)].heads);
    FocusStudyOptions options;
    options.p = p;
    options.top_k = context.line.flag_int("top-k");
    options.histogram_bins = context.line.flag_int("bins");
    const FocusStudy study = study_focusing(inference.forward.layers[size_t(layer)], state.head, options);
    std::vector<std::vector<double>> curve, histogram, axes;
    for (size_t i = 0; i < study.curve_ps.size(); ++i)
      curve.push_back({study.curve_ps[i], study.entropy[i], study.top_k_mass[i]});
    for (int b = 0; b < options.histogram_bins; ++b)
      histogram.push_back({double(b) / options.histogram_bins, double(b + 1) / options.histogram_bins,
                           double(study.histogram_before[b].item<int64_t>()),
                           double(study.histogram_after[b].item<int64_t>())});
    for (int64_t c = 0; c < study.axis_counts.size(0); ++c)
      axes.push_back({double(c), double(study.axis_counts[c].item<int64_t>()),
                      study.axis_cosine_before[c].item<double>(), study.axis_cosine_after[c].item<double>()});
    write_csv(context, "fp_curves.csv", "p,entropy,top_k_mass", curve);
    write_csv(context, "fp_histogram.csv", "cos_low,cos_high,before,after", histogram);
    write_csv(context, "fp_axes.csv", "axis,count,axis_cos_before,axis_cos_after", axes);
    summary["layer"] = layer;
    summary["head"] = state.head;
    summary["preprocessing"] = preprocessing_json(loaded.model, state.input_settings(), loaded.prepared);
    summary["features"] = study.source;
    summary["attention"] = inference.forward.layers[size_t(layer)].attention.describe();
    summary["top_k"] = options.top_k;
    summary["curves"] = {{"p", study.curve_ps}, {"entropy", study.entropy}, {"top_k_mass", study.top_k_mass}};
    written += ", fp_curves.csv, fp_histogram.csv, fp_axes.csv";
    std::cout << "  layer " << layer << " head " << state.head << ": mean row entropy " << study.entropy.front()
              << " (p = " << study.curve_ps.front() << ") -> " << study.entropy.back()
              << " (p = " << study.curve_ps.back() << ")\n";
  }
  write_summary(context, "analyze-fp", summary);
  std::cout << "wrote " << context.out.string() << "/{summary.json, " << written << "}\n";
  return 0;
}

int analyze_metrics(const Context& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  const int top_k = context.line.flag_int("top-k");
  if (top_k < 1) throw std::invalid_argument("--top-k must be >= 1");
  std::ostringstream csv;
  csv << "variant,head,entropy,top_k_mass,gini,box_mass,object_mass\n" << std::setprecision(9);
  json variants = json::array();
  TokenLayout layout;
  int layer = 0;
  ResolvedQuery query;
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int selected) {
    layer = selected;
    layout = capture.layout;  // queries on the layer's grid; its rows lie on its key grid
    const TokenLayout& keys = capture.key_layout;
    query = resolve_query(state.query, layout);
    const torch::Tensor box = state.box.empty() ? torch::Tensor() : box_coverage(parse_patch_box(state.box), keys);
    const torch::Tensor object =
        loaded.object_mask.empty()
            ? torch::Tensor()
            : patch_coverage(torch::from_blob(loaded.object_mask.data,
                                              {loaded.object_mask.rows, loaded.object_mask.cols}, torch::kUInt8)
                                 .clone(),
                             keys);
    json heads = json::array();
    torch::NoGradGuard no_grad;
    for (int head = 0; head < capture.heads; ++head) {
      const torch::Tensor patch_map = capture.row(0, head, query.token).slice(0, keys.prefix_tokens());
      const FocusSummary focus = summarise_focus(patch_map, top_k, box, object);
      auto optional = [](const std::optional<double>& value) { return value ? json(*value) : json(nullptr); };
      heads.push_back({{"head", head},
                       {"entropy", focus.entropy},
                       {"top_k_mass", focus.top_k_mass},
                       {"gini", focus.gini},
                       {"box_mass", optional(focus.box_mass)},
                       {"object_mass", optional(focus.object_mass)}});
      csv << to_string(variant) << "," << head << "," << focus.entropy << "," << focus.top_k_mass << "," << focus.gini
          << "," << (focus.box_mass ? std::to_string(*focus.box_mass) : "") << ","
          << (focus.object_mass ? std::to_string(*focus.object_mass) : "") << "\n";
    }
    variants.push_back(
        {{"variant", to_string(variant)}, {"attention", capture.attention.describe()}, {"heads", heads}});
  });
  context.files->add_text("metrics.csv", csv.str());
  json summary = common_summary(context, "metrics", layout, loaded);
  summary["layer"] = layer;
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  summary["top_k"] = top_k;
  summary["variants"] = variants;
  write_summary(context, "analyze-metrics", summary);
  std::cout << "attnscope analyze metrics: layer " << layer << ", query " << layout.token_name(query.token)
            << "\nwrote " << context.out.string() << "/{summary.json, metrics.csv}\n";
  return 0;
}

}  // namespace analyze

int analyze_command(const Args& args) {
  using namespace analyze;
  const std::string usage =
      "attnscope analyze --analysis gradcam|rollout|spectrum|fp|metrics|gradcam++|xgradcam|layercam|eigencam|hirescam|"
      "scorecam|relevance|gradrollout|ig|faithfulness --model FILE --image FILE --out DIR [options]";
  auto parsed = parse_or_print_help(args, usage, kAnalyzeOptions, kAnalyzeFlags);
  if (!parsed) return 0;
  Context context;
  context.line = *parsed;
  context.state = context.line.state;
  // A session saved by the workbench names its analysis view; --analysis overrides it.
  std::string analysis = context.line.flags["analysis"];
  if (analysis.empty() && context.state.analysis != "none") analysis = context.state.analysis;
  if (analysis == "attribution") analysis = context.state.method;  // the workbench's attribution view
  if (analysis.empty()) throw std::invalid_argument("--analysis is required (" + analysis_list() + ")");
  if (std::find(kAnalyses.begin(), kAnalyses.end(), analysis) == kAnalyses.end())
    throw std::invalid_argument("unknown --analysis '" + excerpt(analysis) + "' (expected " + analysis_list() + ")");
  if (context.state.out.empty()) throw std::invalid_argument("--out is required");
  // Bounded before anything is allocated or written.
  const int bins = context.line.flag_int("bins"), top_k = context.line.flag_int("top-k");
  if (bins < 1 || bins > 100000) throw std::invalid_argument("--bins must be from 1 to 100000");
  if (top_k < 1 || top_k > 1000000) throw std::invalid_argument("--top-k must be from 1 to 1000000");
  context.out = context.state.out;
  context.files = std::make_shared<OutputFiles>(context.state.out, context.state.figure.overwrite);
  int code = 0;
  if (analysis == "gradcam")
    code = analyze_gradcam(context);
  else if (analysis == "rollout")
    code = analyze_rollout(context);
  else if (analysis == "spectrum")
    code = analyze_spectrum(context);
  else if (analysis == "fp")
    code = analyze_fp(context);
  else if (analysis == "metrics")
    code = analyze_metrics(context);
  else if (analysis == "faithfulness")
    code = faithfulness(context);
  else
    code = attribution(context, analysis);
  context.files->write();                       // refuses existing outputs (unless --overwrite) before writing any
  print_warnings("analyze", context.warnings);  // an analysis that fails names the tensors in its error
  return code;
}

}  // namespace attnscope
