// Chefer et al.'s relevance of a CLIP image for a text prompt (analysis/clip_maps.h; interpret() of
// hila-chefer/Transformer-MM-Explainability's CLIP_explainability.ipynb): `analyze` writes the
// image map raw and min-max normalised, and the text side's relevance of the prompt's tokens.
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

// --start-layer: the image tower's first block (the authors' default, -1: the last one).
const AnalysisOption<int>& start_layer_option() {
  static const auto option =
      count_option("start-layer", "L",
                   "chefer-clip: the image tower's first block (0: every block; negative: from the end; default -1, "
                   "the last block, the authors' current default)",
                   -1, -4096, 4096);
  return option;
}

int analyze_chefer_clip(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const TokenizedPrompts tokenized = prompt_from_option(loaded.model, prompt_option()(context.state), "chefer-clip");
  const CheferClipRelevance relevance = chefer_clip_relevance(loaded.model, model_input(loaded.model, loaded.prepared),
                                                              tokenized.ids, start_layer_option()(context.state));
  context.files->add_npy("chefer-clip_raw.npy", relevance.raw);
  context.files->add_npy("chefer-clip.npy", relevance.normalised);
  context.files->add_npy("chefer-clip_text.npy", relevance.text.to(torch::kFloat));
  const TokenLayout layout = loaded.model.vit_arch().layout_for(loaded.prepared.rows, loaded.prepared.cols);
  json summary = common_summary(context, "chefer-clip", layout, loaded);
  summary["text"] = text_summary(loaded.model, tokenized);
  summary["prompt"] = tokenized.prompts.front().text;
  summary["logit"] = relevance.logit;
  summary["image_start_block"] = relevance.image_start;
  summary["text_start_block"] = relevance.text_start;
  summary["end_of_text"] = relevance.end_of_text;
  summary["raw_range"] = {relevance.raw.min().item<double>(), relevance.raw.max().item<double>()};
  write_summary(context, "analyze-chefer-clip", summary);
  context.print() << "attnscope analyze chefer-clip: logit " << std::setprecision(4) << relevance.logit
                  << ", image blocks " << relevance.image_start << ".." << loaded.model.vit_arch().depth - 1
                  << "\nwrote " << context.out.string()
                  << "/{summary.json, chefer-clip_raw.npy, chefer-clip.npy, chefer-clip_text.npy}\n";
  return 0;
}

}  // namespace

AnalysisEntry chefer_clip_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-chefer-clip", "summary.json", 1},
       "analyze --analysis chefer-clip --model CLIP --image assets/images/sign_4.png --prompt 'a photo of a sign' "
       "--out OUT",
       std::string(
           R"md(`attnscope analyze --analysis chefer-clip`: Chefer et al.'s relevance for the image-prompt logit (interpret() of CLIP_explainability.ipynb): per block from the start block, the mean over heads of clamp(grad * attention, 0), R <- R + A R from the identity. Beside it: `chefer-clip_raw.npy` [gh, gw] (R[0, 1:]), `chefer-clip.npy` (min-max to [0, 1]), `chefer-clip_text.npy` [n] (the text tower's R_text[eot, 1:eot] over its sum, the prompt's n tokens; its last block, the notebook's start_layer_text = -1).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
)md") + kTextSummaryRows +
           R"md(
| `prompt` | always | `--prompt` |
| `logit` | always | logits_per_image of the image and the prompt |
| `image_start_block` | always | the image tower's first block (`--start-layer` resolved) |
| `text_start_block` | always | the text tower's first block (its last) |
| `end_of_text` | always | the position the prompt's embedding is read at |
| `raw_range` | always | `[min, max]` of `chefer-clip_raw.npy` |)md"});
  entry.name = "chefer-clip";
  entry.help = "Chefer et al.'s CLIP relevance for --prompt TEXT (--start-layer)";
  entry.options = {prompt_option().spec(), start_layer_option().spec()};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_chefer_clip(context); };
  add_clip_prompt_view(entry, "chefer-clip", [](const ClipMapRequest& request) {
    return chefer_clip_relevance(request.model, request.image, request.prompt_ids,
                                 start_layer_option()(request.request))
        .normalised;
  });
  return entry;
}

}  // namespace attnscope
