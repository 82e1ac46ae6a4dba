// Sparse-autoencoder features (analysis/sae_features.h) of the session's SAE (--sae) on one image:
// per token its K strongest features, the map of one feature over the image (class token and
// registers apart), the clicked patch's strongest features, and the reconstruction's normalised
// MSE, L0 and silent features at the SAE's point. With --images DIR, each feature's top images and
// patches over the folder (bounded by features x K, resumable from what the run has written), and a
// grid of the top images of --feature with the patches where it fires.
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/residual_stream.h"
#include "analysis/sae_features.h"
#include "core/atomic_file.h"
#include "core/json_checked.h"
#include "core/npy.h"
#include "core/number_text.h"
#include "views/analysis_options.h"
#include "views/folder_statistics.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const AnalysisOption<int>& feature_option() {
  static const auto option =
      count_option("feature", "N",
                   "sae: the feature whose map is drawn and written (sae_feature_N.npy), and whose top images --images "
                   "shows (default -1: the query patch's strongest feature)",
                   -1, -1, int(kMaxSaeFeatures));
  return option;
}

const AnalysisOption<int>& top_option() {
  static const auto option = count_option(
      "top", "K", "sae: the features kept per token, and with --images the images kept per feature (default 8)", 8, 1,
      256);
  return option;
}

std::shared_ptr<const SparseAutoencoder> session_sae(const AttentionSettings& settings) {
  if (settings.sae.file.empty())
    throw std::invalid_argument(
        "the sae analysis needs --sae FILE: saev's sae.pt, or a ViT-Prisma, SAELens or dictionary_learning folder");
  return open_sparse_autoencoder(settings.sae.file);
}

// The feature shown: --feature, or the query token's strongest.
struct ShownFeature {
  int index = 0;
  bool given = false;
};
// --feature within the SAE (-1, the default, is always within it).
void check_feature_option(const SparseAutoencoder& sae, int option) {
  if (option >= sae.d_sae)
    throw std::invalid_argument("--feature " + std::to_string(option) + ": the SAE has features 0.." +
                                std::to_string(sae.d_sae - 1));
}

ShownFeature shown_feature(const SparseAutoencoder& sae, const torch::Tensor& features, int option, int query) {
  check_feature_option(sae, option);
  if (option >= 0) return {option, true};
  return {int(features[query].argmax().item<int64_t>()), false};
}

// A feature's activations over the patch grid.
GridMap feature_map(const torch::Tensor& features, const TokenLayout& layout, int feature) {
  return patch_grid_values(features.select(1, feature).slice(0, layout.prefix_tokens()), layout);
}

// A feature's map over its image in the session's opacity and alpha, `marked` outlined where it is a patch.
HeatmapPanel feature_heatmap(GridMap values, const RgbImage& image, const TokenLayout& layout, int marked,
                             const AppState& state) {
  HeatmapPanel heatmap;
  heatmap.values = std::move(values);
  heatmap.background = image;
  heatmap.opacity = float(state.opacity);
  heatmap.alpha = state.alpha;
  if (layout.is_patch(marked)) {
    heatmap.marked_row = layout.row_of(marked);
    heatmap.marked_col = layout.col_of(marked);
  }
  return heatmap;
}

// One top image of a feature, drawn: the image as the model saw it and the feature over it.
struct TopImage {
  RgbImage rgb;
  GridMap map;
  std::string name;
  int64_t index = 0;  // in the folder's order
  double value = 0;
  int64_t token = 0;
  TokenLayout layout;
};

// Feature `feature`'s first `count` top images of a pass over `images`, each run again for its map.
std::vector<TopImage> draw_top_images(const LoadedModel& loaded, VisionTransformerImpl& model,
                                      const SparseAutoencoder& sae, const AttentionSettings& settings,
                                      const InputSettings& input, int64_t max_pixels,
                                      const std::vector<std::string>& images, const SaeTopImages& top, int feature,
                                      int count, const std::function<bool()>& cancelled = {}) {
  std::vector<TopImage> drawn;
  for (int rank = 0; rank < count && rank < top.k; ++rank) {
    const double value = top.values[feature][rank].item<double>();
    const int64_t index = top.images[feature][rank].item<int64_t>();
    if (!(value > 0) || index < 0) break;
    const PreparedImage image = prepare_image_file(loaded, input, images[size_t(index)], max_pixels);
    const SaeImageReport report = sae_image_report(model, sae, settings.sae.hook, image.input, settings, cancelled);
    TopImage shown;
    shown.rgb = image.rgb;
    shown.layout = report.layout;
    shown.map = feature_map(report.features, report.layout, feature);
    shown.name = fs::path(images[size_t(index)]).filename().string();
    shown.index = index;
    shown.value = value;
    shown.token = top.tokens[feature][rank].item<int64_t>();
    drawn.push_back(std::move(shown));
  }
  return drawn;
}

// Everything the view and the CLI draw from one image.
struct SaeViewData : AnalysisViewData {
  std::shared_ptr<const SparseAutoencoder> sae;
  std::shared_ptr<const SaeImageReport> report;
  ShownFeature feature;
  int query = 0;
  int top = 8;
  RgbImage image;
  std::string hook;  // --sae-hook as given
  // With the images option: the shown feature's top images over the folder (the search by images).
  std::vector<TopImage> top_images;
  std::string folder, folder_note;
  std::string error;
  double milliseconds = 0;
};

std::string feature_words(const ShownFeature& feature) {
  return "feature " + std::to_string(feature.index) + (feature.given ? "" : " (the query's strongest)");
}

Figure sae_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = dynamic_cast<const SaeViewData*>(outcome.analysis_view.get());
  if (!view) return Figure(1, 1);
  if (!view->report) {
    Figure figure(1, 1);
    figure.title = "SAE features: " + view->error;
    return figure;
  }
  const SaeImageReport& report = *view->report;
  const SparseAutoencoder& sae = *view->sae;
  const TokenLayout& layout = report.layout;
  const int top_shown = std::min<int>(int(view->top_images.size()), 4);
  // The map and the query's features, then the folder's top images two a row (the column is narrow).
  Figure figure(1 + (top_shown + 1) / 2, 2);
  const HeatmapPanel heatmap = feature_heatmap(feature_map(report.features, layout, view->feature.index), view->image,
                                               layout, view->query, state);
  const float high = *std::max_element(heatmap.values.values.begin(), heatmap.values.values.end());
  figure.at(0, 0) = {feature_words(view->feature) + " over the patches",
                     "sae_feature_" + std::to_string(view->feature.index), heatmap};
  PlotPanel bars;
  Series stems, heads;
  const TokenTopFeatures top =
      top_features_per_token(report.features.slice(0, view->query, view->query + 1), view->top);
  std::ostringstream listed;
  listed << std::setprecision(3);
  for (int64_t i = 0; i < top.values.size(1); ++i) {
    const double value = top.values[0][i].item<double>();
    if (value <= 0) break;
    stems.x.insert(stems.x.end(), {double(i), double(i)});
    stems.y.insert(stems.y.end(), {0.0, value});
    heads.x.push_back(double(i));
    heads.y.push_back(value);
    if (i < 6) listed << (i ? ", " : "") << "#" << top.indices[0][i].item<int64_t>() << " " << value;
  }
  stems.pairs = true;
  stems.colour = heads.colour = 0;
  heads.markers = true;
  heads.line = false;
  bars.series = {stems, heads};
  bars.x_label = "rank";
  bars.y_label = "activation";
  bars.whole_x = true;
  const std::string query_name = layout.token_name(view->query);
  figure.at(0, 1) = {"strongest at " + query_name + (listed.str().empty() ? ": none fire" : ": " + listed.str()),
                     "sae_query_top", bars};
  for (int i = 0; i < top_shown; ++i) {
    const TopImage& image = view->top_images[size_t(i)];
    const HeatmapPanel top_map = feature_heatmap(image.map, image.rgb, image.layout, int(image.token), state);
    char title[200];
    std::snprintf(title, sizeof title, "top %d over the folder: %s %.3g", i + 1, image.name.c_str(), image.value);
    figure.panels[size_t(2 + i)] = {
        title, "sae_feature_" + std::to_string(view->feature.index) + "_top" + std::to_string(i + 1), top_map};
  }
  char stats[300];
  std::snprintf(stats, sizeof stats, "normalised MSE %.3g, L0 %.1f, %.0f%% of features silent on this image",
                report.normalised_mse, report.l0, 100.0 * report.silent_fraction);
  figure.title = sae.describe() + kTitleBreak + std::string(stats);
  if (!sae.hook) figure.title += std::string(kTitleBreak) + "at " + stream_point_name(report.point) + " (--sae-hook)";
  std::string prefix;
  for (int token = 0; token < layout.prefix_tokens(); ++token) {
    char value[64];
    std::snprintf(value, sizeof value, "%s %.3g", layout.token_name(token).c_str(),
                  report.features[token][view->feature.index].item<double>());
    prefix += (prefix.empty() ? "" : ", ") + std::string(value);
  }
  if (!prefix.empty()) figure.title += kTitleBreak + feature_words(view->feature) + " on " + prefix;
  if (!view->folder_note.empty()) figure.title += kTitleBreak + view->folder_note;
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = 0;
  float shown_high = high;
  for (int i = 0; i < top_shown; ++i) shown_high = std::max(shown_high, float(view->top_images[size_t(i)].value));
  scale.vmax = shown_high > 0 ? shown_high : 1e-6f;
  scale.label = "activation of feature " + std::to_string(view->feature.index);
  figure.scales.push_back(scale);
  return figure;
}

// ---- The folder pass -----------------------------------------------------------------------

Figure top_images_figure(const std::vector<TopImage>& images, int feature, const std::string& heading,
                         const AppState& state) {
  const int count = std::max(1, int(images.size()));
  const int cols = std::min(count, 4), rows = (count + cols - 1) / cols;
  Figure figure(rows, cols);
  double high = 1e-6;
  for (const TopImage& image : images) high = std::max(high, image.value);
  for (size_t i = 0; i < images.size(); ++i) {
    const HeatmapPanel heatmap =
        feature_heatmap(images[i].map, images[i].rgb, images[i].layout, int(images[i].token), state);
    char title[200];
    std::snprintf(title, sizeof title, "%zu. %s: %.3g", i + 1, images[i].name.c_str(), images[i].value);
    figure.panels[i] = {title, "sae_feature_" + std::to_string(feature) + "_top" + std::to_string(i + 1), heatmap};
  }
  figure.title = "feature " + std::to_string(feature) + ": its top images" + kTitleBreak + heading;
  if (images.empty()) figure.title += kTitleBreak + std::string("it fired on none of the images");
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = 0;
  scale.vmax = float(high);
  scale.label = "activation of feature " + std::to_string(feature);
  figure.scales.push_back(scale);
  return figure;
}

int analyze_sae_image(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  VisionTransformerImpl& model = residual_stream_model(loaded.model.native("sparse-autoencoder features"));
  auto view = std::make_shared<SaeViewData>();
  view->sae = session_sae(state.attention);
  const SparseAutoencoder& sae = *view->sae;
  view->hook = state.attention.sae.hook;
  const auto start = std::chrono::steady_clock::now();
  view->report = std::make_shared<const SaeImageReport>(sae_image_report(
      model, sae, state.attention.sae.hook, model_input(loaded.model, loaded.prepared), state.attention));
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const SaeImageReport& report = *view->report;
  const TokenLayout& layout = report.layout;
  const ResolvedQuery query = resolve_query(state.query, layout);
  view->query = query.token;
  view->top = top_option()(state);
  view->feature = shown_feature(sae, report.features, feature_option()(state), query.token);
  view->image = loaded.prepared;
  const TokenTopFeatures top = top_features_per_token(report.features, view->top);
  context.files->add_npy("sae_topk_indices.npy", top.indices);
  context.files->add_npy("sae_topk_values.npy", top.values);
  const std::string feature_file = "sae_feature_" + std::to_string(view->feature.index) + ".npy";
  const torch::Tensor activations = report.features.select(1, view->feature.index).contiguous();
  context.files->add_npy(feature_file, activations);
  const std::string figure =
      add_analyze_figure(context, analyze_figure(*find_analysis("sae"), view, view->image, state), view->image, "sae");

  json summary = common_summary(context, "sae", layout, loaded);
  json notes = json::array();
  for (const std::string& note : sae.notes) notes.push_back(note);
  summary["sae"] = {{"format", sae.format},
                    {"source", sae.source},
                    {"kind", sae.kind},
                    {"activation", enum_name(sae.activation)},
                    {"d_in", sae.d_in},
                    {"features", sae.d_sae},
                    {"k", sae.k},
                    {"hook", stream_point_name(report.point)},
                    {"hook_in_file", sae.hook_text.empty() ? json(nullptr) : json(sae.hook_text)},
                    {"hook_from", sae.hook ? "file" : "--sae-hook"},
                    {"normalisation", enum_name(sae.normalisation)},
                    {"subtracts_b_dec", sae.subtract_b_dec},
                    {"class_token_only", sae.class_token_only},
                    {"notes", notes}};
  summary["reconstruction"] = {
      {"normalised_mse", report.normalised_mse},
      {"l0", report.l0},
      {"silent_fraction", report.silent_fraction},
      {"tokens", report.tokens_read},
      {"definition",
       "over the tokens the SAE reads: sum ||x - x_hat||^2 / sum ||x - mean over tokens of x||^2; L0 the mean count of "
       "features above 0 per token; silent: features at 0 on every token of this image"}};
  json top_query = json::array();
  for (int64_t i = 0; i < top.indices.size(1); ++i)
    if (top.values[query.token][i].item<double>() > 0)
      top_query.push_back({{"feature", top.indices[query.token][i].item<int64_t>()},
                           {"activation", top.values[query.token][i].item<double>()}});
  summary["query"]["token"] = query.token;
  summary["query"]["name"] = layout.token_name(query.token);
  summary["query"]["top_features"] = top_query;
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  const int64_t peak = activations.argmax().item<int64_t>();
  json prefix = json::object();
  for (int token = 0; token < layout.prefix_tokens(); ++token)
    prefix[layout.token_name(token)] = activations[token].item<double>();
  summary["feature"] = {{"index", view->feature.index},
                        {"chosen_by", view->feature.given ? "--feature" : "the query's strongest feature"},
                        {"max", activations.max().item<double>()},
                        {"max_token", peak},
                        {"max_token_name", layout.token_name(int(peak))},
                        {"prefix_tokens", prefix},
                        {"file", feature_file}};
  summary["top"] = view->top;
  summary["milliseconds"] = view->milliseconds;
  if (state.attention.sae.intervenes())
    summary["intervention"] = {{"off", sae_features_text(state.attention.sae.off)},
                               {"add", sae_adds_text(state.attention.sae.add)},
                               {"note", "the features are read before the intervention at the same point"}};
  write_summary(context, "analyze-sae", summary);
  context.print() << "attnscope analyze sae: " << sae.describe() << " at " << stream_point_name(report.point) << "\n"
                  << "  normalised MSE " << report.normalised_mse << ", L0 " << report.l0 << ", "
                  << 100.0 * report.silent_fraction << "% silent; " << feature_words(view->feature)
                  << (activations.max().item<double>() > 0 ? " peaks at " + layout.token_name(int(peak)) + " (" +
                                                                 format_double(activations.max().item<double>()) + ")"
                                                           : std::string(" does not fire on this image"))
                  << "\n"
                  << "wrote " << context.out.string() << "/{summary.json, sae_topk_indices.npy, sae_topk_values.npy, "
                  << feature_file << ", " << figure << "}\n";
  return 0;
}

int analyze_sae_folder(const AnalyzeContext& context) {
  const AppState& state = context.state;
  const AnalyzeFolder run = analyze_folder(context);
  const auto sae = session_sae(state.attention);
  const int k = top_option()(state);
  json summary = {{"analysis", "sae"}, {"images", run.images.size()}, {"folder", run.folder}};
  std::string written;
  for_each_analyze_model(
      context, run, [&](size_t m, LoadedModel& loaded, const AttentionSettings& settings, const std::string& label) {
        if (m > 0) return;
        VisionTransformerImpl& model = residual_stream_model(loaded.native("sparse-autoencoder features"));
        const StreamPoint point = sae_stream_point(*sae, settings.sae.hook, model.arch().depth, model.arch().embed_dim);
        const int option = feature_option()(state);
        check_feature_option(*sae, option);  // said before the pass, not after it
        SaeFolderPass pass;
        pass.top.start(sae->d_sae, k);
        json key = {{"model", run.models[0]},
                    {"sae", sae->source},
                    {"point", stream_point_name(point)},
                    {"k", k},
                    {"images", run.images},
                    {"settings", settings_key(settings)},
                    {"input", to_json(state)["input"]}};
        const std::string progress_folder = (context.out / ".sae-folder-pass").string();
        if (pass.load(progress_folder, json_text(key)))
          context.print() << "attnscope analyze sae: went on from image " << pass.top.images_done << " of "
                          << run.images.size() << " (" << progress_folder << ")\n";
        const FolderProgress progress = folder_progress(context, run.images);
        c10::InferenceMode inference_mode;
        for (int64_t i = pass.top.images_done; i < int64_t(run.images.size()); ++i) {
          if (progress.report) progress.report(int(i), int(run.images.size()));
          const PreparedImage image =
              prepare_image_file(loaded, state.input_settings(), run.images[size_t(i)], state.max_pixels);
          pass.add(i, sae_image_report(model, *sae, settings.sae.hook, image.input, settings, progress.cancelled),
                   *sae);
          if ((i + 1) % 16 == 0 && i + 1 < int64_t(run.images.size())) pass.save(progress_folder, json_text(key));
        }
        if (progress.report) progress.report(int(run.images.size()), int(run.images.size()));
        const SaeTopImages& top = pass.top;
        context.files->add_npy("sae_top_values.npy", top.values);
        context.files->add_npy("sae_top_images.npy", top.images);
        context.files->add_npy("sae_top_tokens.npy", top.tokens);
        context.files->add_npy("sae_feature_image_counts.npy", top.image_counts);
        context.files->add_npy("sae_feature_token_counts.npy", top.token_counts);
        written =
            "sae_top_values.npy, sae_top_images.npy, sae_top_tokens.npy, sae_feature_image_counts.npy, "
            "sae_feature_token_counts.npy";
        // The feature drawn: --feature, or the one with the largest activation over the folder.
        const int feature = option >= 0 ? option : int(top.values.select(1, 0).argmax().item<int64_t>());
        std::vector<TopImage> shown;
        std::ostringstream csv;
        csv << "rank,image,file,activation,token,row,col\n" << std::setprecision(9);
        shown = draw_top_images(loaded, model, *sae, settings, state.input_settings(), state.max_pixels, run.images,
                                top, feature, k);
        for (size_t rank = 0; rank < shown.size(); ++rank) {
          const int token = int(shown[rank].token);
          const TokenLayout& layout = shown[rank].layout;
          csv << rank + 1 << "," << shown[rank].index << "," << shown[rank].name << "," << shown[rank].value << ","
              << token << "," << (layout.is_patch(token) ? layout.row_of(token) : -1) << ","
              << (layout.is_patch(token) ? layout.col_of(token) : -1) << "\n";
        }
        const std::string stem = "sae_feature_" + std::to_string(feature) + "_top";
        context.files->add_text(stem + ".csv", csv.str());
        const Figure figure = top_images_figure(
            shown, feature, sae->describe() + ", " + images_heading(int(run.images.size()), run.folder), state);
        written += ", " + stem + ".csv, " +
                   add_analyze_figure(context, figure, shown.empty() ? RgbImage() : shown[0].rgb, stem);
        summary["model"] = run.models[0];
        summary["label"] = label;
        summary["sae"] = {{"format", sae->format},
                          {"source", sae->source},
                          {"description", sae->describe()},
                          {"hook", stream_point_name(point)},
                          {"features", sae->d_sae}};
        summary["top"] = k;
        summary["folder_pass"] = {
            {"normalised_mse", pass.normalised_mse()},
            {"l0", pass.l0()},
            {"dead_fraction", top.dead_fraction()},
            {"dead_definition", "features at 0 on every token of every image"},
            {"image_score",
             "a feature's largest activation over the image's patch tokens (the class token for a "
             "class-token SAE)"}};
        summary["feature"] = {{"index", feature},
                              {"chosen_by", option >= 0 ? "--feature" : "the largest activation over the folder"},
                              {"images_firing", top.image_counts[feature].item<int64_t>()},
                              {"shown", shown.size()},
                              {"file", stem + ".csv"}};
        context.print() << "attnscope analyze sae: " << sae->describe() << " over " << run.images.size()
                        << " images: normalised MSE " << summary["folder_pass"]["normalised_mse"].get<double>()
                        << ", L0 " << summary["folder_pass"]["l0"].get<double>() << ", " << 100.0 * top.dead_fraction()
                        << "% dead; feature " << feature << " fires on " << top.image_counts[feature].item<int64_t>()
                        << " images\n";
        std::error_code error;
        fs::remove_all(progress_folder, error);  // the pass is whole: nothing to go on from
      });
  summary.update(folder_images_json(run));
  write_summary(context, "analyze-sae", summary);
  context.print() << "wrote " << context.out.string() << "/{summary.json, " << written << "}\n";
  return 0;
}

int analyze_sae(const AnalyzeContext& context) {
  return images_folder(context.state).empty() ? analyze_sae_image(context) : analyze_sae_folder(context);
}

// The images option's folder through panel 1's model (the pass kept in the cache, and, when a
// newer request stops it, what it had done), then the shown feature's top images drawn.
void search_top_images(const AnalysisViewInput& input, const PanelForwardView& panel, SaeViewData& view) {
  const ViewFolder folder = view_folder(input.request, "find each feature's top images in");
  if (!folder.error.empty()) {
    if (!images_folder(input.request).empty()) view.folder_note = folder.error;
    return;
  }
  LoadedModel& loaded = *panel.model;
  VisionTransformerImpl& model = residual_stream_model(loaded.native("sparse-autoencoder features"));
  const SparseAutoencoder& sae = *view.sae;
  const int k = view.top;
  SaeFolderPass initial;
  initial.top.start(sae.d_sae, k);
  const auto pass = folder_pass(
      &input.cache, folder_key("sae", input.request, panel, folder.images, std::to_string(k)), folder.images.size(),
      view_progress(input), initial, [&](SaeFolderPass& state, size_t i) {
        const PreparedImage image =
            prepare_image_file(loaded, input.request.input_settings(), folder.images[i], input.request.max_pixels);
        const SaeImageReport report =
            sae_image_report(model, sae, panel.settings.sae.hook, image.input, panel.settings, input.cancelled);
        state.add(int64_t(i), report, sae);
      });
  const int feature = view.feature.index;
  view.top_images = draw_top_images(loaded, model, sae, panel.settings, input.request.input_settings(),
                                    input.request.max_pixels, folder.images, pass->top, feature, 4, input.cancelled);
  view.folder_note = "feature " + std::to_string(feature) + " fires on " +
                     std::to_string(pass->top.image_counts[feature].item<int64_t>()) + " of " +
                     images_heading(int(folder.images.size()), folder.folder) + "; " +
                     std::to_string(int(std::lround(100.0 * pass->top.dead_fraction()))) + "% of features fire on none";
}

void compute_sae_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  auto view = std::make_shared<SaeViewData>();
  outcome.analysis_view = view;
  const PanelForwardView& panel = input.panels.front();
  try {
    if (!panel.model || !panel.result) throw std::invalid_argument("panel 1 has no model");
    view->sae = session_sae(panel.settings);
    view->hook = panel.settings.sae.hook;
    const std::string key = "sae|" + panel.input_key + "|" + settings_key(panel.settings);
    view->report = input.cache.get<SaeImageReport>(key);
    if (!view->report) {
      VisionTransformerImpl& model = residual_stream_model(panel.model->native("sparse-autoencoder features"));
      auto report = std::make_shared<const SaeImageReport>(
          sae_image_report(model, *view->sae, panel.settings.sae.hook,
                           model_input(*panel.model, panel.result->input_rgb), panel.settings, input.cancelled));
      input.cache.put(key, report);
      view->report = report;
    }
    view->query = outcome.query_token;
    if (view->query < 0 || view->query >= view->report->layout.total_tokens()) view->query = 0;
    view->top = top_option()(input.request);
    view->feature = shown_feature(*view->sae, view->report->features, feature_option()(input.request), view->query);
    view->image = outcome.input_rgb;
    search_top_images(input, panel, *view);
  } catch (const std::invalid_argument& e) {
    view->report.reset();
    view->error = e.what();
  }
  view->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

AnalysisEntry sae_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-sae", "summary.json", 1},
       "analyze --analysis sae --sae assets/sae/demo --out OUT",
       R"md(`attnscope analyze --analysis sae --sae FILE`: the sparse autoencoder's features at its point of the residual stream, on one image (or with `--images DIR`, each feature's top images over the folder).

| key | when | meaning |
|---|---|---|
| block `analysis` | one image | |
| `sae.format` | one image | `saev`, `ViT-Prisma`, `SAELens` or `dictionary_learning` |
| `sae.source` | one image | the file or folder read |
| `sae.kind` | one image | the library's own name of its architecture |
| `sae.activation` | one image | `relu`, `tanh-relu`, `topk`, `batchtopk`, `jumprelu` or `gated` |
| `sae.d_in` | one image | the stream's width it reads |
| `sae.features` | one image | its features |
| `sae.k` | one image | TopK's k (0: none) |
| `sae.hook` | one image | the point it reads (TransformerLens's name) |
| `sae.hook_in_file` | one image | the hook in the file's own words, or null |
| `sae.hook_from` | one image | `file` or `--sae-hook` |
| `sae.normalisation` | one image | `none`, `constant_norm_rescale` or `layer_norm` |
| `sae.subtracts_b_dec` | one image | whether encode reads x - b_dec |
| `sae.class_token_only` | one image | trained on the class token alone |
| `sae.notes` | one image | what reading the file assumed |
| `reconstruction.normalised_mse` | one image | sum of squared errors over the tokens read / their sum of squares about their mean |
| `reconstruction.l0` | one image | mean count of features above 0 per token |
| `reconstruction.silent_fraction` | one image | features at 0 on every token of the image |
| `reconstruction.tokens` | one image | tokens read |
| `reconstruction.definition` | one image | the definitions |
| `query.token` | one image | the query token (`--query`) |
| `query.name` | one image | its name |
| `query.top_features[].feature` | one image | its features above 0 among the top `--top`, strongest first |
| `query.top_features[].activation` | one image | each one's activation |
| `query.note` | when the query fell back | why |
| `feature.index` | one image | the feature drawn and written |
| `feature.chosen_by` | one image | `--feature` or the query's strongest |
| `feature.max` | one image | its largest activation |
| `feature.max_token` | one image | the token of it |
| `feature.max_token_name` | one image | its name |
| `feature.prefix_tokens.*` | when the model has prefix tokens | its activation on each prefix token, by name (`cls`, `reg0`) |
| `feature.file` | one image | `sae_feature_N.npy`: its activation on every token |
| `top` | always | `--top` |
| `milliseconds` | one image | the forward and the SAE |
| `intervention.off` | with `--sae-off`/`--sae-add` | features switched off |
| `intervention.add` | with `--sae-off`/`--sae-add` | features added, FEATURE:SCALE |
| `intervention.note` | with `--sae-off`/`--sae-add` | that the features are read before it |
| `images` | with `--images` | images read |
| `folder` | with `--images` | the folder |
| `model` | with `--images` | the model |
| `label` | with `--images` | its label |
| `sae.description` | with `--images` | the SAE in words |
| `folder_pass.normalised_mse` | with `--images` | over every token of every image |
| `folder_pass.l0` | with `--images` | mean features above 0 per token |
| `folder_pass.dead_fraction` | with `--images` | features that fired on no token of any image |
| `folder_pass.dead_definition` | with `--images` | the definition |
| `folder_pass.image_score` | with `--images` | how an image is scored for a feature |
| `feature.images_firing` | with `--images` | images the feature fired on |
| `feature.shown` | with `--images` | top images drawn |
| `images_used` | with `--images` | the folder's images read, by name |
| `images_skipped[].file` | with `--images` | an image that could not be read |
| `images_skipped[].why` | with `--images` | why |)md"});
  entry.name = "sae";
  entry.label = "SAE features";
  entry.help =
      "a sparse autoencoder's features (--sae FILE): top features per token, --feature N's map, its top "
      "images over --images DIR";
  entry.options = {feature_option().spec(), top_option().spec(), images_option()};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_sae(context); };
  entry.compute = compute_sae_view;
  entry.figure = sae_figure;
  return entry;
}

}  // namespace attnscope
