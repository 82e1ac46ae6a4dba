// LeGrad's map of a CLIP or SigLIP image for a text prompt (analysis/clip_maps.h; WalBouss/LeGrad
// compute_legrad_clip or compute_legrad_siglip with the authors' default layer_index = -2): `analyze` writes the sum
// over the blocks on the patch grid and its bilinear upsampling, min-max normalised.
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

constexpr int kLegradLayerIndex = -2;  // LeWrapper's default: the last two blocks

int analyze_legrad(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  const TokenizedPrompts tokenized = prompt_from_option(loaded.model, prompt_option()(context.state), "legrad");
  const LegradMap map =
      legrad_clip(loaded.model, model_input(loaded.model, loaded.prepared), tokenized.ids, kLegradLayerIndex);
  context.files->add_npy("legrad_raw.npy", map.raw);
  context.files->add_npy("legrad_upsampled.npy", map.upsampled);
  const TokenLayout layout = loaded.model.vit_arch().layout_for(loaded.prepared.rows, loaded.prepared.cols);
  json summary = common_summary(context, "legrad", layout, loaded);
  summary["text"] = text_summary(loaded.model, tokenized);
  summary["prompt"] = tokenized.prompts.front().text;
  summary["layer_index"] = kLegradLayerIndex;
  summary["start_block"] = map.start_block;
  summary["similarities"] = map.similarities;
  summary["corrected_patches"] = map.corrected_patches;
  write_summary(context, "analyze-legrad", summary);
  context.print() << "attnscope analyze legrad: blocks " << map.start_block << ".." << loaded.model.vit_arch().depth - 1
                  << "\nwrote " << context.out.string() << "/{summary.json, legrad_raw.npy, legrad_upsampled.npy}\n";
  return 0;
}

}  // namespace

AnalysisEntry legrad_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-legrad", "summary.json", 1},
       "analyze --analysis legrad --model CLIP --image assets/images/sign_4.png --prompt 'a photo of a sign' --out OUT",
       std::string(
           R"md(`attnscope analyze --analysis legrad`: LeGrad (WalBouss/LeGrad, compute_legrad_clip, layer_index = -2: the last two blocks). Per block, ln_post of the mean over all tokens (class token included) times proj, normalised, dotted with the normalised text embedding, differentiated with respect to that block's attention; ReLU, the mean over heads and query rows, the patch keys. SigLIP's towers (no class token, the attention-pool head's output as the embedding) take the authors' compute_legrad_siglip instead: per block its output tokens through the attention-pool head, normalised, dotted with the normalised text embedding, differentiated with respect to the pool's attention, ReLU, the mean over heads; the map of 'a photo of a' (the authors' correction, tokenized with the model's own vocabulary), min-max normalised, zeroes the patches where it exceeds 0.8; min-max, then the upsampling. Beside it: `legrad_raw.npy` [gh, gw] (the sum over the blocks, before upsampling) and `legrad_upsampled.npy` [H, W] (bilinear by the patch size, then min-max, as the authors return it).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
)md") + kTextSummaryRows +
           R"md(
| `prompt` | always | `--prompt` |
| `layer_index` | always | the authors' layer_index (-2) |
| `start_block` | always | the first block that took part |
| `similarities` | always | per block from `start_block`: the cosine of its feature and the prompt |
| `corrected_patches` | always | SigLIP: the patches the 'a photo of a' correction zeroed (CLIP: 0) |)md"});
  entry.name = "legrad";
  entry.help = "LeGrad's CLIP or SigLIP map for --prompt TEXT (the last two blocks)";
  entry.options = {prompt_option().spec()};
  entry.needs_computed_attention = true;
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_legrad(context); };
  // On the patch grid: the sum over blocks min-max normalised (the file's legrad_upsampled.npy is
  // the same map upsampled to the input first).
  add_clip_prompt_view(entry, "legrad", [](const ClipMapRequest& request) {
    return min_max(legrad_clip(request.model, request.image, request.prompt_ids, kLegradLayerIndex).raw);
  });
  return entry;
}

}  // namespace attnscope
