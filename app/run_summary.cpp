// summary.json of `attnscope run`; see run_summary.h. Its keys are documented in
// docs/output_schemas.md (kind "run"), and tests/test_output_schemas.cpp holds the two together.
#include "app/run_summary.h"

#include <algorithm>

#include "analysis/spectrum.h"
#include "core/output_schemas.h"
#include "models/token_linear.h"

namespace attnscope {

nlohmann::json run_summary(const RunSummaryInputs& in) {
  const AppState& state = in.state;
  const LoadedModel& model = in.model;
  const InferenceResult& result = in.result;
  const int layer = in.layer, depth = int(result.forward.layers.size());
  const AttentionCapture& capture = result.forward.layers[size_t(layer)];
  const ResolvedQuery& query = in.query;
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
      {"input_size", {in.prepared.rows, in.prepared.cols}},
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
  if (!every_layer) summary["layers_note"] = "more than 400 tokens: ranks of the selected layer only";
  summary["row_format"] = model.backbone->hierarchical()
                              ? "attention_l*_h*.npy: the query's row over the layer's key grid [key_h, key_w]"
                              : "attention_l*_h*.npy: the query's row over all tokens, prefix tokens first";
  summary["assumed"] = assumed_json(model.report.assumed);
  if (!model.architecture.empty()) summary["registered_name"] = model.architecture;
  if (!model.report.notes.empty()) summary["notes"] = model.report.notes;
  if (!model.report.warnings.empty()) summary["warnings"] = model.report.warnings;
  return with_schema(summary, "run");
}

}  // namespace attnscope
