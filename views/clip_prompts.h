// What CLIP's text-prompted analyses share (zero-shot, chefer-clip, legrad, textspan): their prompt
// options, the prompts tokenized with the model's vocabulary (a prompt too long for the text tower
// refused naming its line), and the summary block that says how the text was read.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/prompt_file.h"
#include "core/prompt_tokenizer.h"
#include "models/model_loader.h"
#include "views/analysis_options.h"

namespace attnscope {

// --prompt TEXT (chefer-clip, legrad) and --prompts FILE (zero-shot, textspan).
const AnalysisOption<std::string>& prompt_option();
const AnalysisOption<std::string>& prompts_option();
// --prompt-template: the workbench's prompt list when no --prompts file is given, "{}" standing for
// each class name.
const AnalysisOption<std::string>& prompt_template_option();

// The prompt list the workbench's CLIP views score (each panel's zero-shot top prompt, and the
// prompts textspan contrasts with): --prompts FILE when given, else the template (--prompt-template,
// else the file's "prompt_template" metadata, else CLIP's "a photo of a {}") over the class names
// (the file's, or its "class_names" metadata). `source` says which in words; no prompts and
// `missing` set when there is neither a file nor class names.
struct PromptList {
  std::vector<PromptLine> prompts;
  std::string source;
  std::string missing;
};
PromptList workbench_prompt_list(const LoadedModel& model, const AnalysisSettings& settings);

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
// The same with a tokenizer already read (text_tokenizer_for(model.path, ...)): the workbench keeps
// it, so that a new prompt costs no vocabulary read.
TokenizedPrompts tokenize_prompts(const LoadedModel& model, const PromptTokenizer& tokenizer,
                                  const std::vector<PromptLine>& prompts, const std::string& what, bool from_file);
// The prompt list (workbench_prompt_list: --prompts, else the template over the class names)
// tokenized; refused naming the analysis when there is neither. `source` receives where it came from.
TokenizedPrompts prompts_from_list(const LoadedModel& model, const AnalysisSettings& settings, const std::string& what,
                                   std::string& source);
// --prompt (required) tokenized: one row.
TokenizedPrompts prompt_from_option(const LoadedModel& model, const std::string& prompt, const std::string& what);

// The summary's `text` block: the vocabulary, the context, and that ftfy.fix_text is not reproduced.
nlohmann::json text_summary(const LoadedModel& model, const TokenizedPrompts& tokenized);

// Documentation rows of the `text` block (docs/analysis_outputs.md).
extern const char* const kTextSummaryRows;

}  // namespace attnscope
