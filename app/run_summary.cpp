// summary.json of `attnscope run`; see run_summary.h. Its keys are documented in
// docs/output_schemas.md (kind "run"), and tests/test_output_schemas.cpp holds the two together.
#include "app/run_summary.h"

#include <algorithm>
#include <iostream>

#include "analysis/head_spectrum.h"
#include "analysis/spectrum.h"
#include "core/output_schemas.h"
#include "core/progress_bar.h"
#include "models/token_linear.h"

namespace attnscope {

namespace {

// Every knob of the knob table by its name, as summary.json's `settings` names them.
nlohmann::json knob_settings_json(const AttentionSettings& settings) {
  nlohmann::json json = nlohmann::json::object();
  for (const AttentionKnob& knob : attention_knobs()) json[knob.name] = knob.summary(settings);
  return json;
}

}  // namespace

namespace {

// One head's spectrum as `mode` asks (views/panel_maps.h: what the workbench shows), and the
// entropy of the query's row. Run's auto leaves heads whose exact path is not cheap out before.
nlohmann::json head_spectrum_json(const AttentionCapture& capture, int head, int query, RankMode mode,
                                  const SvdProgress& progress) {
  nlohmann::json entry = {{"head", head}, {"entropy", row_entropy(capture.row(0, head, query))}};
  const HeadSpectrum spectrum = head_spectrum(capture, head, mode, progress);
  entry["method"] = spectrum.method;
  if (spectrum.exact()) {
    entry.update({{"rank", spectrum.numerical_rank}, {"effective_rank", spectrum.effective_rank}});
    return entry;
  }
  entry.update(rank_ranges_json(spectrum));
  entry.update({{"singular_values", spectrum.singular_values}, {"singular_value_upper_bounds", spectrum.upper_bounds}});
  return entry;
}

}  // namespace

nlohmann::json run_summary(const RunSummaryInputs& in) {
  const AppState& state = in.state;
  const LoadedModel& model = in.model;
  const InferenceResult& result = in.result;
  const int layer = in.layer, depth = int(result.forward.layers.size());
  const AttentionCapture& capture = result.forward.layers[size_t(layer)];
  const ResolvedQuery& query = in.query;
  // Nothing O(T^3) unless asked: auto summarises every layer when all are small, else the selected
  // layer's heads whose exact path is cheap (DINOv2 at 1036 px has 5,481 tokens: a full SVD per head
  // takes about 17 s on 2 cores).
  const bool every_layer = state.ranks == RankMode::Auto &&
                           std::all_of(result.forward.layers.begin(), result.forward.layers.end(),
                                       [](const AttentionCapture& c) { return c.layout.total_tokens() <= 400; });
  std::string skipped;  // heads left out by auto, for the note
  ProgressBar bar;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < depth; ++l) {
    const AttentionCapture& layer_capture = result.forward.layers[size_t(l)];
    nlohmann::json entry = describe_layer(layer_capture);
    entry["layer"] = l;
    if (state.ranks != RankMode::None && (every_layer || l == layer)) {
      // The query at the same place in the image, in this layer's grid.
      const int layer_query = follow_query(query.token, capture.layout, layer_capture.layout);
      nlohmann::json layer_heads = nlohmann::json::array();
      for (int h = 0; h < layer_capture.heads; ++h) {
        if (state.ranks == RankMode::Auto && !every_layer && !exact_spectrum_is_cheap(layer_capture, h)) {
          skipped += (skipped.empty() ? "" : ",") + std::to_string(h);
          continue;
        }
        // A full SVD at thousands of tokens takes seconds a head: a bar follows it, in percent of
        // the layer's heads on a terminal, a line a head in logs.
        SvdProgress progress;
        const int heads = layer_capture.heads;
        const std::string label = "exact spectrum of layer " + std::to_string(l) + " (" +
                                  std::to_string(layer_capture.layout.total_tokens()) + " tokens), head ";
        const bool followed = state.ranks == RankMode::Exact && !exact_spectrum_is_cheap(layer_capture, h);
        if (followed && !bar.terminal()) bar.show(size_t(h), size_t(heads), label + std::to_string(h));
        if (followed && bar.terminal())
          progress.report = [&, h](double fraction) {
            bar.show(size_t(100.0 * (h + fraction) / heads), 100, label + std::to_string(h));
          };
        layer_heads.push_back(head_spectrum_json(layer_capture, h, layer_query, state.ranks, progress));
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
      {"input_size", {in.prepared.rows, in.prepared.cols}},
      {"resize", to_string(state.resize)},
      {"tokens",
       {{"prefix", capture.layout.prefix_tokens()},
        {"grid", {capture.layout.grid_h, capture.layout.grid_w}},
        {"key_grid", {capture.key_layout.grid_h, capture.key_layout.grid_w}},
        {"total", capture.layout.total_tokens()}}},
      {"variant", to_string(state.attention.variant)},
      {"attention", capture.attention.describe()},
      {"settings", knob_settings_json(state.attention)},
      {"device", result.device},
      {"linear_backend", linear_backend().onednn ? "onednn" : "blas"},
      {"forward_ms", result.milliseconds},
      {"layer", layer},
      {"head", state.head},
      {"query",
       {{"spec", state.query.text()}, {"token", query.token}, {"name", capture.layout.token_name(query.token)}}},
      {"output", {{"kind", to_string(model.output_kind())}, {"size", result.forward.logits.size(-1)}}},
      {"normalization",
       {{"mean", model.normalization.mean}, {"std", model.normalization.std}, {"source", model.normalization_source}}},
      {"preprocessing", preprocessing_json(model, state.input_settings(), in.prepared)},
      {"overlay",
       {{"colormap", to_string(in.overlay_scale.colormap)},
        {"scale", to_string(state.scale)},
        {"vmin", in.overlay_scale.vmin},
        {"vmax", in.overlay_scale.vmax},
        {"log", in.overlay_scale.log},
        {"alpha", to_string(state.alpha)},
        {"opacity", state.opacity}}},
      {"top5", top},
      {"layers", layers},
  };
  if (!query.note.empty()) summary["query"]["note"] = query.note;
  summary["lcm"] = {{"view", enum_name(state.lcm)}, {"applied", in.after_lcm}};
  if (!in.lcm_note.empty()) summary["lcm"]["note"] = in.lcm_note;
  summary["ranks_mode"] = enum_name(state.ranks);
  if (state.ranks == RankMode::Auto && !every_layer)
    summary["layers_note"] =
        "more than 400 tokens: ranks of the selected layer only" +
        (skipped.empty() ? std::string()
                         : "; heads " + skipped +
                               " left out (their exact spectrum is a full SVD: --ranks exact computes it, --ranks "
                               "leading its leading values with bounds)");
  summary["row_format"] = model.backbone->hierarchical()
                              ? "attention_l*_h*.npy: the query's row over the layer's key grid [key_h, key_w]"
                              : "attention_l*_h*.npy: the query's row over all tokens, prefix tokens first";
  summary["assumed"] = assumed_json(model.report.assumed);
  if (!model.architecture.empty()) summary["registered_name"] = model.architecture;
  summary["model_source"] = model.source.to_json();  // which files, which revision made these outputs
  if (!model.report.notes.empty()) summary["notes"] = model.report.notes;
  if (!model.report.warnings.empty()) summary["warnings"] = model.report.warnings;
  return with_schema(summary, "run");
}

}  // namespace attnscope
