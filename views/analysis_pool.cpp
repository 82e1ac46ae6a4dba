// Where the pooling head reads the image from (analysis/pool_attention.h): the attention of SigLIP's
// and PE's attention-pool head, or of CaiT's last class-attention block, its one query (a learned
// latent, the class token) over the patches, per head and their mean, a layer of its own after the
// blocks. `analyze` writes the maps and the figure; the workbench draws the figure.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "analysis/pool_attention.h"
#include "models/inference.h"
#include "views/folder_statistics.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using nlohmann::json;

struct PoolViewData : AnalysisViewData {
  PoolMaps maps;
  std::string family;
  std::string error;  // why there is no pool attention (a class-token or mean read-out)
};

std::string pool_title(const PoolViewData& view) {
  std::string title = "where " + view.maps.layer + " reads from (" + view.family + ")";
  if (view.maps.prefix_tokens > 0) {
    char share[96];
    std::snprintf(share, sizeof share, "; %.1f %% of it on ", 100.0 * view.maps.prefix_share.mean().item<double>());
    title +=
        share + (view.maps.prefix_tokens == 1 ? std::string("the class token")
                                              : "the " + std::to_string(view.maps.prefix_tokens) + " prefix tokens");
  }
  return title;
}

Figure pool_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* view = analysis_view_as<PoolViewData>(outcome);
  Figure empty(1, 1);
  if (!view) return empty;
  if (!view->error.empty()) {
    empty.title = view->error;
    return empty;
  }
  const PoolMaps& maps = view->maps;
  const int heads = int(maps.heads.size(0));
  const int cols = std::min(4, heads + 1), rows = (heads + 1 + cols - 1) / cols;
  Figure figure(rows, cols);
  auto overlay = [&](const torch::Tensor& values) {
    HeatmapPanel heatmap;
    heatmap.values = to_grid_map(values);
    heatmap.background = outcome.input_rgb;
    heatmap.opacity = float(state.opacity);
    heatmap.alpha = state.alpha;
    return heatmap;
  };
  figure.panels[0] = {"mean over heads", "pool_mean", overlay(maps.mean)};
  for (int h = 0; h < heads; ++h)
    figure.panels[size_t(h + 1)] = {"head " + std::to_string(h), "pool_head" + std::to_string(h),
                                    overlay(maps.heads[h])};
  figure.title = pool_title(*view);
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.vmin = 0.0f;
  scale.vmax = std::max(1e-6f, maps.heads.max().item<float>());
  scale.label = "the pool's attention";
  figure.scales.push_back(scale);
  return figure;
}

std::shared_ptr<PoolViewData> pool_view(const InferenceResult& result, const std::string& family) {
  auto view = std::make_shared<PoolViewData>();
  view->family = family;
  try {
    view->maps = pool_maps(features_pool(result.forward.pool_attention, family), result.forward.layout);
  } catch (const std::invalid_argument& e) {
    view->error = e.what();
  }
  return view;
}

int analyze_pool(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const InferenceResult inference = run_inference(loaded.model, loaded.prepared, context.state.attention);
  const auto view = pool_view(inference, loaded.model.family());
  if (!view->error.empty()) throw std::invalid_argument("pool: " + view->error);
  context.files->add_npy("pool_heads.npy", view->maps.heads);
  context.files->add_npy("pool_mean.npy", view->maps.mean);
  const RgbImage& image = loaded.prepared;
  const std::string figure =
      add_analyze_figure(context, analyze_figure(*find_analysis("pool"), view, image, context.state), image, "pool");
  json summary = common_summary(context, "pool", inference.forward.layout, loaded);
  json shares = json::array();
  for (int64_t h = 0; h < view->maps.prefix_share.size(0); ++h)
    shares.push_back(view->maps.prefix_share[h].item<double>());
  summary["layer"] = view->maps.layer;
  summary["heads"] = view->maps.heads.size(0);
  summary["prefix_tokens_read"] = view->maps.prefix_tokens;
  summary["prefix_share_per_head"] = shares;
  write_summary(context, "analyze-pool", summary);
  context.print() << "attnscope analyze pool: " << pool_title(*view) << "\nwrote " << context.out.string()
                  << "/{pool_heads.npy, pool_mean.npy, " << figure << ", summary.json}\n";
  return 0;
}

void compute_pool_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  const PanelForwardView& panel = input.panels.front();
  outcome.analysis_view = pool_view(*panel.result, panel.model->family());
}

}  // namespace

AnalysisEntry pool_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-pool", "summary.json", 1},
       "analyze --analysis pool --model SIGLIP --out OUT",
       R"md(`attnscope analyze --analysis pool`: where the pooling head reads the image from, a layer of its own after the blocks: the attention of SigLIP's and PE's attention-pool head (`attn_pool`: a learned latent over the tokens), or of CaiT's last class-attention block (the class token over itself and the patches). Beside it: `pool_heads.npy` [heads, gh, gw] (each head's attention on the patches) and `pool_mean.npy` [gh, gw] (their mean), and the figure. `run` writes the same attention over every token it reads as `pool_attention.npy`.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `layer` | always | the pooling attention's module (`attn_pool`, `blocks_token_only.N.attn`) |
| `heads` | always | its heads |
| `prefix_tokens_read` | always | the tokens before the patches it reads (PE and CaiT: the class token; SigLIP: none) |
| `prefix_share_per_head` | always | per head, the share of its attention on those tokens |)md"});
  entry.name = "pool";
  entry.label = "pool attention";
  entry.help =
      "where the pooling head reads from: SigLIP's and PE's attention-pool head or CaiT's class attention, per head";
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_pool(context); };
  entry.compute = compute_pool_view;
  entry.figure = pool_figure;
  return entry;
}

}  // namespace attnscope
