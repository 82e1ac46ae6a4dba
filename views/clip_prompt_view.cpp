#include "views/clip_prompt_view.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "models/clip_zero_shot.h"
#include "models/text_tokenizer.h"
#include "views/clip_prompts.h"
#include "views/panel_maps.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

// The zero-shot top prompt of a panel's input over the list.
struct TopPrompt {
  size_t index = 0;
  double probability = 0;
};

const PromptTokenizer& kept_tokenizer(const LoadedModel& model, AnalysisCache& cache) {
  const std::string key = "text-tokenizer|" + model.path;
  auto tokenizer = cache.get<PromptTokenizer>(key);
  if (!tokenizer) {
    tokenizer = text_tokenizer_for(model.path, model.text("the prompt").arch());
    cache.put(key, tokenizer);
  }
  return *tokenizer;
}

std::string list_key(const PromptList& list) {
  std::string key = list.source;
  for (const PromptLine& prompt : list.prompts) key += '\n' + prompt.text;
  return key;
}

ClipPromptPanel clip_prompt_panel(const AnalysisViewInput& input, const PanelForwardView& forward,
                                  const ClipMapFunction& map) {
  const auto start = std::chrono::steady_clock::now();
  ClipPromptPanel panel;
  LoadedModel& model = *forward.model;
  const PromptList list = workbench_prompt_list(model, input.request);
  panel.list_source = list.missing.empty() ? list.source : list.missing;
  const PromptTokenizer& tokenizer = kept_tokenizer(model, input.cache);
  const std::string listed = list_key(list);
  torch::Tensor list_ids = torch::zeros({0, 1}, torch::kLong);
  const torch::Tensor image = model_input(model, forward.result->input_rgb);
  if (!list.prompts.empty()) {
    const std::string ids_key = "clip-list-ids|" + model.path + "|" + listed;
    auto ids = input.cache.get<torch::Tensor>(ids_key);
    if (!ids) {
      ids = std::make_shared<const torch::Tensor>(
          tokenize_prompts(model, tokenizer, list.prompts, "the prompt list", !prompts_option()(input.request).empty())
              .ids);
      input.cache.put(ids_key, ids);
    }
    list_ids = *ids;
    const std::string top_key = "clip-top|" + forward.input_key + "|" + listed;
    auto top = input.cache.get<TopPrompt>(top_key);
    if (!top) {
      const ClipZeroShot scores = clip_zero_shot(model, image, list_ids, input.cancelled);
      TopPrompt best;
      best.index = size_t(scores.probabilities.argmax().item<int64_t>());
      best.probability = scores.probabilities[int64_t(best.index)].item<double>();
      top = std::make_shared<const TopPrompt>(best);
      input.cache.put(top_key, top);
    }
    panel.top_prompt = list.prompts[top->index].text;
    panel.top_probability = top->probability;
  }
  panel.prompt = prompt_option()(input.request);
  if (panel.prompt.empty()) {
    if (panel.top_prompt.empty())
      throw std::invalid_argument("type a prompt (the field above), or give a prompt list: " + list.missing);
    panel.prompt = panel.top_prompt;
    panel.prompt_is_top = true;
  }
  const torch::Tensor prompt_ids =
      tokenize_prompts(model, tokenizer, parse_prompt_text(panel.prompt, "the prompt field"), "the prompt", false).ids;
  try {
    const torch::Tensor values = map(ClipMapRequest{model, image, prompt_ids, list_ids, forward.input_key, listed,
                                                    input.cache, input.request, input.cancelled});
    panel.map = to_grid_map(values.to(torch::kCPU, torch::kFloat));
  } catch (const std::invalid_argument& refused) {
    // A map its authors do not define for this model (SigLIP has no class token): the zero-shot
    // top prompt above still holds.
    panel.error = refused.what();
    panel.short_error = "no map";
  }
  panel.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return panel;
}

}  // namespace

std::string clip_prompt_caption(const std::string& method, const ClipPromptPanel& panel) {
  std::string caption = method + " '" + prompt_excerpt(panel.prompt) + "'";
  if (panel.prompt_is_top) caption += " (the top prompt)";
  if (!panel.error.empty()) caption = method + ": " + panel.error;
  if (!panel.top_prompt.empty()) {
    char probability[32];
    std::snprintf(probability, sizeof probability, "%.1f %%", 100.0 * panel.top_probability);
    caption += "  \u00b7  zero-shot top: '" + prompt_excerpt(panel.top_prompt) + "' (" + probability + ")";
  }
  return caption;
}

void ClipPromptViews::describe(nlohmann::json& about) const {
  nlohmann::json shown = nlohmann::json::array();
  for (const ClipPromptPanel& panel : panels)
    shown.push_back({{"prompt", panel.prompt},
                     {"prompt_is_top", panel.prompt_is_top},
                     {"top_prompt", panel.top_prompt},
                     {"top_probability", panel.top_probability},
                     {"list", panel.list_source},
                     {"error", panel.error},
                     {"milliseconds", panel.milliseconds}});
  about["clip_prompt"] = {{"method", method}, {"panels", shown}};
}

void compute_clip_prompt_views(const AnalysisViewInput& input, InferenceOutcome& outcome, const std::string& method,
                               const ClipMapFunction& map) {
  auto views = std::make_shared<ClipPromptViews>();
  views->method = method;
  for (size_t index = 0; index < input.panels.size(); ++index) {
    const PanelForwardView& forward = input.panels[index];
    ClipPromptPanel panel;
    if (!forward.model || !forward.result) {
      panel.error = outcome.panels[index].error;
      panel.short_error = "no model";
    } else if (forward.model->text_tower.is_empty()) {
      panel.error = "no text target: " + forward.model->text_tower_absent;
      panel.short_error = "no text tower";
    } else {
      try {
        panel = clip_prompt_panel(input, forward, map);
      } catch (const Cancelled&) {
        throw;  // a newer request: the worker drops this one
      } catch (const std::exception& e) {
        // A refused prompt, list or vocabulary (a broken vocab.json beside the file, say) is this
        // panel's reason; the other panels still draw.
        panel = ClipPromptPanel{};
        panel.error = e.what();
        panel.short_error = "no map";
      }
    }
    PanelMaps& maps = outcome.panels[index];
    maps.description = clip_prompt_caption(method, panel) + "  \u00b7  " + maps.description;
    views->maps.push_back(panel.map);
    views->panels.push_back(std::move(panel));
  }
  outcome.analysis_view = std::move(views);
}

Figure clip_prompt_figure(const InferenceOutcome& outcome, const AppState& state) {
  const auto* views = analysis_view_as<ClipPromptViews>(outcome);
  const size_t shown = views ? views->panels.size() : 0;
  Figure figure(1, int(std::max<size_t>(1, shown)));
  // The panels' titles stay short (they do not wrap); what each mapped and its top prompt go in
  // the title, which wraps at its breaks.
  figure.title = views ? views->method : std::string("CLIP");
  for (size_t index = 0; index < shown && index < outcome.panels.size(); ++index) {
    const ClipPromptPanel& view = views->panels[index];
    const std::string number = std::to_string(index + 1);
    Panel& panel = figure.at(0, int(index));
    panel.title = view.map.values.empty() ? number + ": " + view.short_error : number;
    if (view.map.values.empty()) {  // an empty cell draws no title: the reason goes in the figure's
      figure.title += kTitleBreak + number + ": " + view.short_error;
      continue;
    }
    figure.title += kTitleBreak + number + ": '" + prompt_excerpt(view.prompt) + "'";
    if (!view.top_prompt.empty()) {
      char probability[32];
      std::snprintf(probability, sizeof probability, "%.1f %%", 100.0 * view.top_probability);
      figure.title +=
          kTitleBreak + number + ": zero-shot top '" + prompt_excerpt(view.top_prompt) + "' (" + probability + ")";
    }
    HeatmapPanel heatmap;
    heatmap.values = view.map;
    heatmap.background = outcome.panels[index].input_rgb;
    heatmap.opacity = float(state.opacity);
    heatmap.alpha = state.alpha;
    panel.data_name = views->method + "_panel" + number;
    panel.content = heatmap;
  }
  ColorScale scale;
  scale.colormap = state.colormap;
  scale.label = (views ? views->method : std::string("map")) + ", min-max to [0, 1]";
  figure.scales.push_back(scale);
  return figure;
}

void add_clip_prompt_view(AnalysisEntry& entry, const std::string& label, const ClipMapFunction& map) {
  entry.label = label;
  // The prompt field and the list first, in one order for every CLIP view, then the method's own.
  std::vector<OptionSpec> options = {prompt_option().spec(), prompts_option().spec(), prompt_template_option().spec()};
  for (const OptionSpec& own : entry.options)
    if (std::none_of(options.begin(), options.end(), [&](const OptionSpec& shared) { return shared.name == own.name; }))
      options.push_back(own);
  entry.options = std::move(options);
  const std::string method = entry.name;
  entry.compute = [method, map](const AnalysisViewInput& input, InferenceOutcome& outcome) {
    compute_clip_prompt_views(input, outcome, method, map);
  };
  entry.figure = clip_prompt_figure;
}

}  // namespace attnscope
