// What CLIP's text-prompted analyses share (zero-shot, chefer-clip, legrad, textspan): their prompt
// options, the prompts tokenized with the model's vocabulary (a prompt too long for the text tower
// refused naming its line), and the summary block that says how the text was read.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/prompt_file.h"
#include "models/model_loader.h"
#include "views/analysis_options.h"

namespace attnscope {

// --prompt TEXT (chefer-clip, legrad) and --prompts FILE (zero-shot, textspan).
const AnalysisOption<std::string>& prompt_option();
const AnalysisOption<std::string>& prompts_option();

struct TokenizedPrompts {
  std::vector<PromptLine> prompts;
  torch::Tensor ids;              // [P, context] int64: clip.tokenize's rows
  std::string vocabulary_source;  // the file(s) the vocabulary came from
};

// The text tower's (throws naming what the file lacks), then the prompts tokenized with the
// vocabulary beside the model (or the bundled OpenAI one), padded to the tower's context (77 for
// OpenAI's models). `what` names the analysis; `where` how a prompt is named in a refusal ("line 3
// of the prompt file", "--prompt"). Throws std::invalid_argument for a prompt that does not fit.
TokenizedPrompts tokenize_prompts(const LoadedModel& model, const std::vector<PromptLine>& prompts,
                                  const std::string& what, bool from_file);
// --prompts read (required: refused naming the analysis when absent) and tokenized.
TokenizedPrompts prompts_from_file(const LoadedModel& model, const std::string& file, const std::string& what);
// --prompt (required) tokenized: one row.
TokenizedPrompts prompt_from_option(const LoadedModel& model, const std::string& prompt, const std::string& what);

// The summary's `text` block: the vocabulary, the context, and that ftfy.fix_text is not reproduced.
nlohmann::json text_summary(const LoadedModel& model, const TokenizedPrompts& tokenized);

// Documentation rows of the `text` block (docs/analysis_outputs.md).
extern const char* const kTextSummaryRows;

}  // namespace attnscope
