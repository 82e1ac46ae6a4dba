// CLIP's zero-shot scores of the image over a file of prompts (models/clip_zero_shot.h), as
// clip/model.py's CLIP.forward computes logits_per_image: `analyze` writes the scores as CSV, the
// embeddings before normalisation and the token rows.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/clip_tokenizer.h"
#include "models/clip_zero_shot.h"
#include "views/analysis_registry.h"
#include "views/clip_prompts.h"
#include "views/representation_features.h"

namespace attnscope {

namespace {

using nlohmann::json;

// A CSV field as RFC 4180 quotes it: in double quotes (doubled inside) when it holds a comma, a
// quote or a line break, or starts or ends with white space; as it is otherwise.
std::string csv_field(const std::string& text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string::npos || text.front() == ' ' || text.back() == ' ';
  if (!quote) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

int analyze_zero_shot(const AnalyzeContext& context) {
  Loaded loaded = load_inputs(context);
  std::string list_source;
  const TokenizedPrompts tokenized = prompts_from_list(loaded.model, context.state, "zero-shot", list_source);
  const ClipZeroShot scores = clip_zero_shot(loaded.model, model_input(loaded.model, loaded.prepared), tokenized.ids);
  const torch::Tensor logits = scores.logits.to(torch::kCPU, torch::kDouble);
  const torch::Tensor probabilities = scores.probabilities.to(torch::kCPU, torch::kDouble);
  std::ostringstream csv;
  csv << "index,prompt,logit,probability\n" << std::setprecision(9);
  int64_t best = 0;
  for (int64_t i = 0; i < logits.size(0); ++i) {
    csv << i << ',' << csv_field(tokenized.prompts[size_t(i)].text) << ',' << logits[i].item<double>() << ','
        << probabilities[i].item<double>() << '\n';
    if (logits[i].item<double>() > logits[best].item<double>()) best = i;
  }
  context.files->add_text("zero_shot.csv", csv.str());
  context.files->add_npy("text_embeddings.npy", scores.text_embeddings.to(torch::kCPU, torch::kFloat));
  context.files->add_npy("image_embedding.npy", scores.image_embedding.to(torch::kCPU, torch::kFloat));
  context.files->add_npy("tokens.npy", tokenized.ids.to(torch::kLong));
  const TokenLayout layout = loaded.model.vit_arch().layout_for(loaded.prepared.rows, loaded.prepared.cols);
  json summary = common_summary(context, "zero-shot", layout, loaded);
  summary["text"] = text_summary(loaded.model, tokenized);
  summary["prompts_file"] = prompts_option()(context.state);
  summary["prompt_list"] = list_source;
  const ClipTextTowerImpl& tower = loaded.model.text("zero-shot");
  summary["logit_scale"] = tower.logit_scale.exp().item<double>();
  summary["logit_bias"] = tower.logit_bias.defined() ? tower.logit_bias.item<double>() : 0.0;
  summary["scores"] = to_string(tower.arch().scores);
  summary["top"] = {{"index", best},
                    {"line", tokenized.prompts[size_t(best)].line},
                    {"prompt", tokenized.prompts[size_t(best)].text},
                    {"logit", logits[best].item<double>()},
                    {"probability", probabilities[best].item<double>()}};
  write_summary(context, "analyze-zero-shot", summary);
  context.print() << "attnscope analyze zero-shot: " << logits.size(0) << " prompts, top '"
                  << prompt_excerpt(tokenized.prompts[size_t(best)].text) << "' (p = " << std::setprecision(3)
                  << probabilities[best].item<double>() << ")\nwrote " << context.out.string()
                  << "/{summary.json, zero_shot.csv, text_embeddings.npy, image_embedding.npy, tokens.npy}\n";
  return 0;
}

}  // namespace

AnalysisEntry zero_shot_analysis() {
  AnalysisEntry entry;
  entry.outputs.push_back(
      {{"analyze-zero-shot", "summary.json", 1},
       "analyze --analysis zero-shot --model CLIP --image assets/images/sign_4.png --prompts "
       "PROMPTS --out OUT",
       std::string(
           R"md(`attnscope analyze --analysis zero-shot`: CLIP's scores of the image over the prompts of `--prompts` (logits_per_image: `logit_scale.exp()` times the cosine; their softmax over the file's prompts). SigLIP's add `logit_bias` and each prompt's probability is its own sigmoid (SiglipModel's `torch.sigmoid(logits_per_image)`), so they need not sum to one. Beside it: `zero_shot.csv` (`index,prompt,logit,probability`, the prompt as in the file), `text_embeddings.npy` [P, E] and `image_embedding.npy` [E] (float32, before normalisation), `tokens.npy` [P, context] int64 (clip.tokenize's rows; the context is 77 for OpenAI's models).

| key | when | meaning |
|---|---|---|
| block `analysis` | always | |
)md") + kTextSummaryRows +
           R"md(
| `prompts_file` | always | the prompt file (empty: the template over the class names) |
| `prompt_list` | always | where the prompts came from, in words |
| `logit_scale` | always | `logit_scale.exp()`, the logits' scale |
| `logit_bias` | always | SigLIP's `logit_bias` added to every logit (0 for CLIP) |
| `scores` | always | how logits become probabilities: `softmax over the prompts` (CLIP) or `sigmoid per prompt (with logit_bias)` (SigLIP) |
| `top.index` | always | the prompt with the largest logit (0-based among the prompts) |
| `top.line` | always | its line in the file |
| `top.prompt` | always | its text |
| `top.logit` | always | its logit |
| `top.probability` | always | its probability |)md"});
  entry.name = "zero-shot";
  entry.help = "CLIP's (or SigLIP's sigmoid) zero-shot scores of the image over --prompts FILE";
  entry.options = {prompts_option().spec(), prompt_template_option().spec()};
  entry.run = [](const AnalyzeContext& context, const std::string&) { return analyze_zero_shot(context); };
  return entry;
}

}  // namespace attnscope
