#include "viewer/result_views.h"

#include <algorithm>
#include <chrono>

#include "analysis/focus_metrics.h"
#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "models/finite_checks.h"

namespace attnscope {

namespace {

std::vector<float> as_floats(const torch::Tensor& t) {
  const torch::Tensor values = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GridMap to_grid_map(const torch::Tensor& grid) {
  GridMap map;
  map.grid_h = int(grid.size(0));
  map.grid_w = int(grid.size(1));
  map.values = as_floats(grid);
  return map;
}

std::vector<int> query_window_cells(const AttentionCapture& whole, int query_token, int head) {
  int64_t local_head = head;
  const AttentionCapture& capture = whole.branches.empty() ? whole : whole.for_head(local_head);
  std::vector<int> cells;
  if (!capture.query_slots.defined()) return cells;
  const auto queries = capture.query_slots.to(torch::kCPU).contiguous();
  const auto keys = capture.key_slots.to(torch::kCPU).contiguous();
  for (int64_t group = 0; group < queries.size(0); ++group) {
    const auto members = queries[group];
    if (!(members == query_token).any().item<bool>()) continue;
    const int prefix = capture.key_layout.prefix_tokens();
    for (int64_t slot = 0; slot < keys.size(1); ++slot) {
      const int64_t token = keys[group][slot].item<int64_t>();
      if (token >= prefix) cells.push_back(int(token) - prefix);
    }
    break;
  }
  return cells;
}

bool dwc_switch_applies(const PanelMaps& panel) {
  return panel.error.empty() && panel.kernel == "focused" && panel.dwc_available;
}

const TokenLayout& map_grid(const AttentionCapture& capture, bool incoming) {
  return incoming ? capture.layout : capture.key_layout;
}

PanelMaps build_panel_maps(const AttentionCapture& capture, const PanelSelection& selection,
                           const std::function<bool()>& cancelled) {
  torch::NoGradGuard no_grad;
  PanelMaps maps;
  maps.description = capture.attention.describe();
  const TokenLayout& queries = capture.layout;
  const TokenLayout& keys = capture.key_layout;
  const int key_prefix = keys.prefix_tokens();
  // "in": the column of the key over the query's place in the image.
  const int key_token = follow_query(selection.query_token, queries, keys);
  // The whole matrix is needed for a column, for what patches give the prefix tokens, and for the
  // matrix view; a row alone otherwise.
  const bool whole_matrix = selection.incoming || key_prefix > 0 || selection.spectrum;
  torch::Tensor mean;
  for (int head = 0; head < capture.heads; ++head) {
    if (cancelled && cancelled()) throw Cancelled();
    torch::Tensor map;
    if (whole_matrix) {
      std::vector<int64_t> all_queries;
      if (selection.after_lcm)
        for (int64_t token = 0; token < queries.total_tokens(); ++token) all_queries.push_back(token);
      const torch::Tensor matrix =
          (selection.after_lcm ? capture.rows_after_lcm(0, head, all_queries) : capture.matrix(0, head))
              .to(torch::kCPU, torch::kFloat);  // [Tq, Tk]
      // The matrix view shows FLatten's equivalent matrix (with its DWC term), whose rank the DWC restores.
      const torch::Tensor equivalent = capture.attention.dwc && !selection.after_lcm
                                           ? capture.equivalent_matrix(0, head).to(torch::kCPU, torch::kFloat)
                                           : matrix;
      map =
          selection.incoming
              ? matrix.select(1, key_token).slice(0, queries.prefix_tokens()).reshape({queries.grid_h, queries.grid_w})
              : capture.key_grid(matrix[selection.query_token]);
      if (key_prefix > 0) {
        // The mean attention patch queries give each prefix token.
        const torch::Tensor received = matrix.slice(0, queries.prefix_tokens()).slice(1, 0, key_prefix).mean(0);
        maps.prefix_received_per_head.push_back(as_floats(received));
      }
      if (selection.spectrum) {
        if (head == selection.matrix_head) {
          maps.matrix_rows = int(equivalent.size(0));
          maps.matrix_cols = int(equivalent.size(1));
          require_finite(equivalent,
                         "the attention matrix of " + capture.placement.name + " head " + std::to_string(head));
          maps.matrix = as_floats(equivalent);
        }
        // The cheapest exact path: factors (linear kernels), window blocks (Swin), else the full SVD.
        const Spectrum spectrum = attention_spectrum(capture, head).spectrum;
        HeadSpectrum head_spectrum;
        head_spectrum.singular_values = as_floats(spectrum.singular_values);
        head_spectrum.tolerance = spectrum.tolerance;
        head_spectrum.numerical_rank = spectrum.numerical_rank;
        head_spectrum.effective_rank = spectrum.effective_rank;
        maps.spectra.push_back(std::move(head_spectrum));
      }
    } else {
      const torch::Tensor row = selection.after_lcm ? capture.rows_after_lcm(0, head, {selection.query_token})[0]
                                                    : capture.row(0, head, selection.query_token);
      map = capture.key_grid(row.to(torch::kCPU, torch::kFloat));
    }
    // NaN or Inf would draw as a flat map on a made-up colour bar: named instead.
    require_finite(map, "the attention of " + capture.placement.name + " head " + std::to_string(head));
    maps.head_maps.push_back(to_grid_map(map));
    maps.uniformity.push_back(uniformity(map));
    mean = mean.defined() ? mean + map : map.clone();
    if (selection.metrics) {
      const FocusSummary summary = summarise_focus(map.reshape({-1}), kFocusTopK, selection.box);
      maps.metrics.push_back({head, summary.entropy, summary.top_k_mass, summary.gini, summary.box_mass});
    }
  }
  maps.mean_map = to_grid_map(mean / double(capture.heads));
  maps.mean_uniformity = uniformity(mean);
  if (!maps.prefix_received_per_head.empty()) {
    maps.prefix_received.assign(size_t(key_prefix), 0.0f);
    for (const auto& per_head : maps.prefix_received_per_head)
      for (int token = 0; token < key_prefix; ++token)
        maps.prefix_received[size_t(token)] += per_head[size_t(token)] / float(capture.heads);
  }
  return maps;
}

GradCamView build_gradcam_view(LoadedModel& model, const cv::Mat& prepared_rgb, const AttentionSettings& settings,
                               int target_class, const std::string& layer) {
  GradCamOptions options;
  options.layer = layer;
  options.target_class = target_class;
  const GradCamResult result = grad_cam(
      model.native("Grad-CAM"), image_to_tensor(prepared_rgb, model.normalization).to(model.device), settings, options);
  GradCamView view;
  view.map = to_grid_map(result.scaled);
  view.target_class = result.target_class;
  view.class_name = output_name(model, result.target_class);
  view.score = result.score;
  view.layer = result.layer;
  view.warning = result.warning;
  view.milliseconds = result.milliseconds;
  return view;
}

RolloutView build_rollout_view(const std::vector<AttentionCapture>& layers, int selected, int query_token,
                               HeadFusion fusion, double discard) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int> indices = rollout_layers(layers, selected);
  std::vector<AttentionCapture> chosen;
  for (int index : indices) chosen.push_back(layers[size_t(index)]);
  RolloutOptions options;
  options.fusion = fusion;
  options.discard_ratio = discard;
  options.query = query_token;
  const RolloutResult result = attention_rollout(chosen, options);
  RolloutView view;
  view.map = to_grid_map(result.patch_map);
  const auto [low, high] = std::minmax_element(view.map.values.begin(), view.map.values.end());
  view.vmin = *low;
  view.vmax = *high > *low ? *high : *low + 1e-6f;
  view.query_name = layers[size_t(selected)].layout.token_name(query_token);
  view.layers = int(indices.size());
  if (indices.size() < layers.size())
    view.note = "layers " + std::to_string(indices.front()) + ".." + std::to_string(indices.back()) + " (stage " +
                std::to_string(layers[size_t(selected)].placement.stage) + "): other stages have other grids";
  view.fusion = fusion;
  view.discard = discard;
  view.milliseconds = milliseconds_since(start);
  return view;
}

FocusView build_focus_view(const AttentionCapture& capture, int head, double p, bool queries,
                           FocusProjectionKind projection) {
  FocusStudyOptions options;
  options.p = p;
  const FocusStudy study = study_focusing(capture, head, options);
  FocusView view;
  view.head = head;
  view.p = p;
  view.source = study.source;
  view.histogram_before = as_floats(study.histogram_before);
  view.histogram_after = as_floats(study.histogram_after);
  view.curve_ps.assign(study.curve_ps.begin(), study.curve_ps.end());
  view.entropy.assign(study.entropy.begin(), study.entropy.end());
  view.top_k_mass.assign(study.top_k_mass.begin(), study.top_k_mass.end());
  const ScoreExample example = example_focus_scores(p);
  view.example_before = as_floats(example.before);
  view.example_after = as_floats(example.after);
  view.projection = project_focusing(capture, head, p, queries, projection);
  return view;
}

}  // namespace attnscope
