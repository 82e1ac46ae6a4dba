// The spatial decomposition of Gandelsman et al. (analysis/clip_maps.h; yossigandelsman/
// clip_text_span, PRSLogger and compute_segmentations.py): every patch's direct contribution to the
// image embedding, summed over layers and heads, dotted with each prompt's normalised embedding,
// minus the mean over the prompts. `analyze` writes the maps and the decomposition's residual.
#include <iomanip>
#include <nlohmann/json.hpp>

#include "analysis/clip_maps.h"
#include "views/analysis_registry.h"
#include "views/clip_prompt_view.h"
#include "views/clip_prompts.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

int analyze_textspan(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  std::string list_source;
  const TokenizedPrompts tokenized = prompts_from_list(loaded.model, context.state, "textspan", list_source);
  const TextSpanComponents components = textspan_components(loaded.model, model_input(loaded.model, loaded.prepared));
  const torch::Tensor text = loaded.model.text("textspan").encode_text(tokenized.ids.to(loaded.model.device));
  const torch::Tensor maps = textspan_maps(components, text);
  context.files->add_npy("textspan.npy", maps);
  const TokenLayout layout = loaded.model.vit_arch().layout_for(loaded.prepared.rows, loaded.prepared.cols);
  json summary = common_summary(context, "textspan", layout, loaded);
  summary["text"] = text_summary(loaded.model, tokenized);
  summary["prompts_file"] = prompts_option()(context.state);
  summary["prompt_list"] = list_source;
  summary["components"] = {{"layers", components.layers},
                           {"heads", components.heads},
                           {"intermediates", 2 * components.layers + 1},
                           {"largest_block_bytes", components.transient_bytes}};
  summary["residual"] = {{"max_abs", components.residual_max_abs}, {"relative", components.residual_relative}};
  write_summary(context, "analyze-textspan", summary);
  context.print() << "attnscope analyze textspan: " << maps.size(0) << " prompts, " << components.layers << " x "
                  << components.heads << " heads; the components sum to the embedding within " << std::setprecision(2)
                  << components.residual_relative << " relative\nwrote " << context.out.string()
                  << "/{summary.json, textspan.npy}\n";
  return 0;
}

// The workbench's map of a prompt: its row of textspan_maps over the prompt list (with the prompt
// added when the list does not hold it), from the panel's kept decomposition and the list's kept
// embeddings: a new prompt costs one text encoding and one product, no image forward.
torch::Tensor textspan_view_map(const ClipMapRequest& request) {
  if (request.list_ids.size(0) == 0)
    throw std::invalid_argument(
        "textspan contrasts the prompt with a prompt list (its map is minus the mean over the prompts): give a "
        "prompt file, or a file with class names");
  const std::string components_key = "textspan-components|" + request.input_key;
  auto components = request.cache.get<TextSpanComponents>(components_key);
  if (!components) {
    components = std::make_shared<const TextSpanComponents>(
        textspan_components(request.model, request.image, request.cancelled));
    request.cache.put(components_key, components);
  }
  ClipTextTowerImpl& tower = request.model.text("textspan");
  const std::string list_key = "textspan-list-text|" + request.model.path + "|" + request.list_key;
  auto list_text = request.cache.get<torch::Tensor>(list_key);
  if (!list_text) {
    list_text = std::make_shared<const torch::Tensor>(
        tower.encode_text(request.list_ids.to(request.model.device), request.cancelled));
    request.cache.put(list_key, list_text);
  }
  const torch::Tensor prompt_ids = request.prompt_ids.to(request.list_ids.device());
  for (int64_t row = 0; row < request.list_ids.size(0); ++row)
    if (torch::equal(request.list_ids[row], prompt_ids[0])) return min_max(textspan_maps(*components, *list_text)[row]);
  const torch::Tensor text = torch::cat({tower.encode_text(request.prompt_ids.to(request.model.device)), *list_text});
  return min_max(textspan_maps(*components, text)[0]);
}

}  // namespace

AnalysisEntry textspan_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-textspan", "summary.json", 1},
       "analyze --analysis textspan --model CLIP --image assets/images/sign_4.png --prompts PROMPTS --out OUT",
       std::string(
           R"md(`attnscope analyze --analysis textspan`: the spatial decomposition of Gandelsman et al. (clip_text_span's PRSLogger and compute_segmentations.py). The class token's output as the direct contributions of the input of block 0, every layer's heads x tokens (out_proj's bias spread over them) and every MLP, through ln_post linearised at its actual mean and std (its mean and bias spread evenly over the 2 L + 1 intermediates), projected and divided by the embedding's norm; the patches' contributions summed over layers and heads, dotted with each normalised text embedding, minus the mean over the prompts. Beside it: `textspan.npy` [P, gh, gw]. The components are streamed a layer and a head at a time.

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
)md") + kTextSummaryRows +
           R"md(
| `prompts_file` | always | the prompt file (empty: the template over the class names) |
| `prompt_list` | always | where the prompts came from, in words |
| `components.layers` | always | the visual tower's blocks |
| `components.heads` | always | heads per block |
| `components.intermediates` | always | 2 L + 1, the parts ln_post's mean and bias are spread over |
| `components.largest_block_bytes` | always | the largest block of components held at once |
| `residual.max_abs` | always | max \|sum of every component - image embedding\| |
| `residual.relative` | always | the same over max \|image embedding\| |)md"});
  entry.name = "textspan";
  entry.help = "the spatial decomposition of CLIP's image embedding, mapped for each of --prompts FILE";
  entry.options = {prompts_option().spec()};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_textspan(context); };
  add_clip_prompt_view(entry, "textspan", textspan_view_map);
  return entry;
}

}  // namespace attnscope
