// The parts a successor kernel computes besides its equivalent matrix, as their papers draw them:
// Agent Attention's agents (each agent's softmax over the keys: its own attention, one map per agent;
// and the query's weights over the agents, its row of q_attn), and PolaFormer's two matrices (the
// query's same-sign row, which weighs the first half of each head's value channels, and its
// opposite-sign row, the second half). Other kernels compute no such parts, and the view says so.
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/grid_map.h"
#include "core/output_files.h"
#include "views/analysis_registry.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;
using torch::indexing::Slice;

// One layer's parts at one head and query.
struct KernelParts {
  std::string label;      // "panel 2: agent" or the variant
  std::string attention;  // what the layer ran, in words
  Kernel kernel = Kernel::Softmax;
  int layer = 0, head = 0;
  std::string query;
  int query_row = -1, query_col = -1;  // the query's cell on the key grid, when it is a patch of it
  TokenLayout keys;
  torch::Tensor agents;          // agent: [A, key_h, key_w], each agent's attention over the key patches
  torch::Tensor agent_weights;   // agent: [A], the query's weights over the agents
  torch::Tensor same, opposite;  // pola: [key_h, key_w], the query's rows of both matrices over the key patches
  std::string none;              // why the kernel has no parts (empty when it has)
};

// The layers a figure draws and the stems naming their rows and files.
struct PartsView {
  std::vector<KernelParts> parts;
  std::vector<std::string> stems;
};

torch::Tensor over_key_patches(const torch::Tensor& row, const TokenLayout& keys) {
  return row.index({Slice(keys.prefix_tokens())}).reshape({keys.grid_h, keys.grid_w}).to(torch::kDouble);
}

KernelParts kernel_parts(const AttentionCapture& capture, int head, int query_token) {
  KernelParts parts;
  parts.kernel = capture.attention.kernel;
  parts.attention = capture.attention.describe();
  parts.head = head;
  parts.keys = capture.key_layout;
  parts.query = capture.layout.token_name(query_token);
  if (query_token >= capture.layout.prefix_tokens() && capture.layout.grid_h == parts.keys.grid_h &&
      capture.layout.grid_w == parts.keys.grid_w) {
    parts.query_row = capture.layout.row_of(query_token);
    parts.query_col = capture.layout.col_of(query_token);
  }
  if (capture.query_slots.defined() || !capture.branches.empty()) {
    parts.none = "its queries attend in windows or stripes; the parts are drawn for global layers";
    return parts;
  }
  if (parts.kernel == Kernel::Agent && capture.features.agent_attention.defined()) {
    const auto agents = capture.features.agent_attention[0][head];  // [A, Tk]
    const int64_t count = agents.size(0);
    std::vector<torch::Tensor> maps;
    for (int64_t a = 0; a < count; ++a) maps.push_back(over_key_patches(agents[a], parts.keys));
    parts.agents = torch::stack(maps);
    parts.agent_weights = capture.features.query_agent_attention[0][head][query_token].to(torch::kDouble);
    return parts;
  }
  if (parts.kernel == Kernel::Pola) {
    const std::vector<int64_t> query{query_token};
    parts.same = over_key_patches(capture.rows(0, head, query)[0], parts.keys);
    parts.opposite = over_key_patches(capture.second_rows(0, head, query)[0], parts.keys);
    return parts;
  }
  parts.none = std::string(kernel_spec(parts.kernel).name) +
               " computes no parts besides its matrix: the agents are Agent Attention's, the two polarities "
               "PolaFormer's";
  return parts;
}

HeatmapPanel part_map(const torch::Tensor& values, const KernelParts& parts) {
  HeatmapPanel map;
  map.values = to_grid_map(values.to(torch::kFloat));
  map.marked_row = parts.query_row;
  map.marked_col = parts.query_col;
  return map;
}

Figure parts_figure(const KernelParts& parts) {
  const std::string where = parts.label + ", layer " + std::to_string(parts.layer) + ", head " +
                            std::to_string(parts.head) + ", query " + parts.query;
  if (!parts.none.empty()) {
    Figure figure(1, 1);
    figure.title = where + kTitleBreak + parts.none;
    return figure;
  }
  ColorScale scale;
  scale.colormap = Colormap::Viridis;
  scale.vmin = 0.0f;
  if (parts.agents.defined()) {
    const int count = int(parts.agents.size(0));
    const int side = std::max(1, int(std::lround(std::sqrt(double(count)))));
    Figure figure(side, side + 1);
    scale.vmax = std::max(1e-9f, parts.agents.max().item<float>());
    scale.label = "each agent's softmax over the keys";
    figure.scales.push_back(scale);
    for (int a = 0; a < count; ++a) {
      char title[64];
      std::snprintf(title, sizeof title, "agent %d (q: %.2f)", a, parts.agent_weights[a].item<double>());
      figure.at(a / side, a % side) = {title, "agent" + std::to_string(a), part_map(parts.agents[a], parts)};
    }
    PlotPanel weights;
    Series series;
    for (int a = 0; a < count; ++a) {
      series.x.push_back(a);
      series.y.push_back(parts.agent_weights[a].item<double>());
    }
    series.markers = true;
    weights.series = {series};
    weights.x_label = "agent";
    weights.y_label = "query's weight";
    weights.whole_x = true;
    figure.at(0, side) = {"the query over the agents", "agent_weights", weights};
    figure.title = where + kTitleBreak + std::to_string(count) + " agents pooled from the queries (" +
                   std::to_string(side) + "x" + std::to_string(side) +
                   "); the matrix is their product, rank <= " + std::to_string(count);
    return figure;
  }
  Figure figure(1, 2);
  scale.vmax = std::max(1e-9f, std::max(parts.same.max().item<float>(), parts.opposite.max().item<float>()));
  scale.label = "the query's weights";
  figure.scales.push_back(scale);
  figure.at(0, 0) = {"same sign (q+k+, q-k-): value channels 1st half", "same_sign", part_map(parts.same, parts)};
  figure.at(0, 1) = {"opposite sign (q+k-, q-k+): 2nd half", "opposite_sign", part_map(parts.opposite, parts)};
  figure.title = where + kTitleBreak + parts.attention;
  return figure;
}

// Every drawn layer's parts, one below the other (one: its figure as it is); `stems` name each's rows
// and files.
Figure parts_figures(const std::vector<KernelParts>& all, const std::vector<std::string>& stems) {
  if (all.size() == 1) return parts_figure(all.front());
  std::vector<Figure> figures;
  std::string title;
  for (const KernelParts& parts : all) {
    figures.push_back(parts_figure(parts));
    title += (title.empty() ? "" : kTitleBreak) + figures.back().title;
  }
  Figure stacked = stacked_figures(figures, stems);
  stacked.title = title;
  return stacked;
}

json parts_json(const KernelParts& parts) {
  json entry = {{"variant", parts.label},
                {"attention", parts.attention},
                {"kernel", kernel_spec(parts.kernel).name},
                {"layer", parts.layer},
                {"head", parts.head},
                {"query", parts.query},
                {"key_grid", {parts.keys.grid_h, parts.keys.grid_w}}};
  if (!parts.none.empty()) entry["none"] = parts.none;
  if (parts.agents.defined()) {
    entry["agents"] = parts.agents.size(0);
    std::vector<double> weights;
    for (int64_t a = 0; a < parts.agent_weights.size(0); ++a) weights.push_back(parts.agent_weights[a].item<double>());
    entry["agent_weights"] = weights;
  }
  if (parts.same.defined()) {
    entry["same_sign_mass"] = parts.same.sum().item<double>();
    entry["opposite_sign_mass"] = parts.opposite.sum().item<double>();
  }
  return entry;
}

int analyze_kernel_parts(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const AppState& state = context.state;
  json variants = json::array();
  std::string written, drawn;
  std::vector<KernelParts> with_parts;
  std::vector<std::string> stems;
  TokenLayout layout;
  for_each_variant_layer(context, loaded, [&](Variant variant, const AttentionCapture& capture, int layer) {
    layout = capture.layout;
    check_head_index(state.head, capture.heads);
    KernelParts parts = kernel_parts(capture, state.head, resolve_query(state.query, capture.layout).token);
    parts.label = to_string(variant);
    parts.layer = layer;
    const std::string stem = parts.label;
    if (parts.agents.defined()) {
      context.files->add_npy("agents_" + stem + ".npy", parts.agents.to(torch::kFloat));
      context.files->add_npy("agent_weights_" + stem + ".npy", parts.agent_weights.to(torch::kFloat));
      written += ", agents_" + stem + ".npy, agent_weights_" + stem + ".npy";
    }
    if (parts.same.defined()) {
      context.files->add_npy("same_sign_" + stem + ".npy", parts.same.to(torch::kFloat));
      context.files->add_npy("opposite_sign_" + stem + ".npy", parts.opposite.to(torch::kFloat));
      written += ", same_sign_" + stem + ".npy, opposite_sign_" + stem + ".npy";
    }
    variants.push_back(parts_json(parts));
    if (parts.none.empty()) {
      with_parts.push_back(std::move(parts));
      stems.push_back(stem);
    }
  });
  if (!with_parts.empty()) {
    auto view = std::make_shared<const AnalysisResult<PartsView>>(PartsView{with_parts, stems});
    drawn = add_analyze_figure(context, analyze_figure(*find_analysis("kernel-parts"), view, loaded.prepared, state),
                               loaded.prepared, "kernel_parts");
    written += ", " + drawn;
  }
  json summary = common_summary(context, "kernel-parts", layout, loaded);
  summary["variants"] = variants;
  write_summary(context, "analyze-kernel-parts", summary);
  context.print() << "attnscope analyze kernel-parts: " << variants.size() << " variant(s)"
                  << (drawn.empty() ? ", none computes agents or two polarities" : "") << "\nwrote "
                  << context.out.string() << "/{summary.json" << written << "}\n";
  return 0;
}

// Every panel whose kernel has parts, one below the other, each at its layer, the requested head and
// its query; none has any: panel 1, saying why.
void compute_parts_view(const AnalysisViewInput& input, InferenceOutcome& outcome) {
  PartsView view, without;
  for (size_t index = 0; index < outcome.panels.size() && index < input.panels.size(); ++index) {
    const PanelMaps& panel = outcome.panels[index];
    if (!input.panels[index].result || panel.heads == 0) continue;
    const AttentionCapture& capture = input.panels[index].result->forward.layers[size_t(panel.layer)];
    KernelParts parts = kernel_parts(capture, std::clamp(input.request.head, 0, panel.heads - 1), panel.query_token);
    parts.label = "panel " + std::to_string(index + 1) + ": " + kernel_spec(parts.kernel).name;
    parts.layer = panel.layer;
    PartsView& into = parts.none.empty() ? view : without;
    into.parts.push_back(std::move(parts));
    into.stems.push_back("panel" + std::to_string(index + 1));
  }
  if (view.parts.empty() && without.parts.empty()) throw std::invalid_argument("kernel parts: no panel has run");
  if (view.parts.empty()) view = {{without.parts.front()}, {without.stems.front()}};
  outcome.analysis_view = std::make_shared<const AnalysisResult<PartsView>>(std::move(view));
}

Figure kernel_parts_figure(const InferenceOutcome& outcome, const AppState&) {
  const auto* view = analysis_result<PartsView>(outcome);
  return view ? parts_figures(view->parts, view->stems) : Figure(1, 1);
}

}  // namespace

AnalysisEntry kernel_parts_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-kernel-parts", "summary.json", 1},
       "analyze --analysis kernel-parts --variants agent,pola --out OUT",
       R"md(`attnscope analyze --analysis kernel-parts`: at the selected layer, head and query, the parts a kernel computes
besides its matrix: Agent Attention's agents (`agents_VARIANT.npy` [A, key_h, key_w], each agent's softmax over the
key patches; `agent_weights_VARIANT.npy` [A], the query's row of q_attn) and PolaFormer's two matrices
(`same_sign_VARIANT.npy`, `opposite_sign_VARIANT.npy` [key_h, key_w], the query's rows).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
| `variants[].variant` | always | the variant |
| `variants[].attention` | always | the attention it ran |
| `variants[].kernel` | always | its kernel |
| `variants[].layer` | always | the layer the parts are read at |
| `variants[].head` | always | the head |
| `variants[].query` | always | the query token, by name |
| `variants[].key_grid` | always | the key grid the maps lie on |
| `variants[].none` | when the kernel has no parts (or attends in windows) | why |
| `variants[].agents` | agent | the agent count |
| `variants[].agent_weights` | agent | the query's weights over the agents |
| `variants[].same_sign_mass` | pola | the sum of the query's same-sign row over the key patches |
| `variants[].opposite_sign_mass` | pola | the sum of its opposite-sign row over the key patches |)md"});
  entry.name = "kernel-parts";
  entry.label = "agents & polarities";
  entry.help = "Agent Attention's agents (each agent's attention, the query over them) and PolaFormer's two matrices";
  entry.flags = {kVariantsFlag};
  entry.needs_computed_attention = true;
  entry.wide_view = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_kernel_parts(context); };
  entry.compute = compute_parts_view;
  entry.figure = kernel_parts_figure;
  return entry;
}

}  // namespace attnscope
