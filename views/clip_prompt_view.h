// The workbench's text-prompted CLIP views (chefer-clip, legrad, textspan): every panel whose file
// has a text tower gets the map of the prompt field's text (or, with the field empty, of its
// zero-shot top prompt) drawn over its image, and its heading names the zero-shot top prompt of the
// prompt list (views/clip_prompts.h). A panel without a text tower says why its map is off. What
// each map costs after a prompt change is what its method needs: textspan keeps the panel's
// decomposition, so a new prompt is one text encoding and one product; the gradient maps run one
// forward and backward.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "views/analysis_registry.h"

namespace attnscope {

// One panel's map request: the panel's model and input, the prompt's token row, and the list's
// (textspan contrasts the prompt with the list).
struct ClipMapRequest {
  LoadedModel& model;
  const torch::Tensor& image;       // [1, 3, H, W] as the model's input
  const torch::Tensor& prompt_ids;  // [1, context]
  const torch::Tensor& list_ids;    // [P, context]: the prompt list's rows (P may be 0)
  const std::string& input_key;     // the panel's model and input, for what the method keeps
  const std::string& list_key;      // the prompt list, for what the method keeps of it
  AnalysisCache& cache;
  const InferenceRequest& request;  // the method's own options
  std::function<bool()> cancelled;
};
// The map [gh, gw] in [0, 1] on the panel's patch grid. Throws std::invalid_argument when the
// method cannot map this panel (its reason is shown there).
using ClipMapFunction = std::function<torch::Tensor(const ClipMapRequest&)>;

struct ClipPromptPanel {
  GridMap map;                 // empty when there is none (see error)
  std::string prompt;          // the text mapped
  bool prompt_is_top = false;  // the field was empty: the map is of the zero-shot top prompt
  std::string top_prompt;      // the prompt list's zero-shot top prompt (empty without a list)
  double top_probability = 0;  // its softmax over the list
  std::string list_source;     // where the list came from, or why there is none
  std::string error;           // why this panel has no map (no text tower, a prompt too long, ...)
  std::string short_error;     // the same in a few words, for the figure's panel title
  double milliseconds = 0;     // this panel's map, from the request to the map
};

struct ClipPromptViews : AnalysisViewData {
  std::string method;  // "chefer-clip", "legrad" or "textspan"
  std::vector<ClipPromptPanel> panels;
  std::vector<GridMap> maps;  // panels[i].map, as the side-by-side views draw them
  const std::vector<GridMap>* panel_maps() const override { return &maps; }
  std::string panel_map_label() const override { return method; }
  void describe(nlohmann::json& about) const override;
};

// "textspan 'a purple r' · zero-shot top: 'the digit 4' (93.1 %)": the heading of a panel.
std::string clip_prompt_caption(const std::string& method, const ClipPromptPanel& panel);

// Every panel's map by `map`, and its zero-shot top prompt (kept per panel input and list).
void compute_clip_prompt_views(const AnalysisViewInput& input, InferenceOutcome& outcome, const std::string& method,
                               const ClipMapFunction& map);
// One column per panel: its map over the image it saw, headed as on screen.
Figure clip_prompt_figure(const InferenceOutcome& outcome, const AppState& state);

// What the three entries share: their label, the options they read (the prompt field and the list)
// and the view.
void add_clip_prompt_view(AnalysisEntry& entry, const std::string& label, const ClipMapFunction& map);

}  // namespace attnscope
