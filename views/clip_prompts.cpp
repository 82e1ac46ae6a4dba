#include "views/clip_prompts.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/clip_tokenizer.h"
#include "core/excerpt.h"

namespace attnscope {

const AnalysisOption<std::string>& prompt_option() {
  static const auto option = text_option("prompt", "TEXT", "chefer-clip, legrad: the text prompt the CLIP map is of");
  return option;
}

const AnalysisOption<std::string>& prompts_option() {
  static const auto option = text_option(
      "prompts", "FILE", "zero-shot, textspan: a UTF-8 file of text prompts, one a line (blank lines ignored)");
  return option;
}

TokenizedPrompts tokenize_prompts(const LoadedModel& model, const std::vector<PromptLine>& prompts,
                                  const std::string& what, bool from_file) {
  ClipTextTowerImpl& tower = model.text(what);
  const ClipTokenizer tokenizer = ClipTokenizer::for_model(model.path);
  const size_t context = size_t(std::min<int>(tower.arch().context_length, int(kClipContextLength)));
  std::vector<std::string> texts;
  for (const PromptLine& prompt : prompts) texts.push_back(prompt.text);
  TokenizedPrompts tokenized;
  tokenized.prompts = prompts;
  tokenized.vocabulary_source = tokenizer.vocabulary_source();
  try {
    tokenized.ids = tokenizer.tokenize_tensor(texts, context);
  } catch (const ClipPromptTooLong& error) {
    const PromptLine& prompt = prompts.at(error.index);
    throw std::invalid_argument(
        (from_file ? "line " + std::to_string(prompt.line) + " of the prompt file" : std::string("--prompt")) + " ('" +
        prompt_excerpt(prompt.text) + "') is " + std::to_string(error.tokens) + " tokens with its start and end; " +
        what + "'s text tower reads at most " + std::to_string(error.context_length) + ": shorten it");
  } catch (const ClipTokenizerError& error) {
    throw std::invalid_argument(what + ": " + error.what());
  }
  try {
    tower.check_token_ids(tokenized.ids);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(what + ": the vocabulary " + tokenized.vocabulary_source +
                                " does not fit this text tower: " + error.what());
  }
  return tokenized;
}

TokenizedPrompts prompts_from_file(const LoadedModel& model, const std::string& file, const std::string& what) {
  model.text(what);  // a visual-only file is refused first, naming what it lacks
  if (file.empty()) throw std::invalid_argument(what + " needs --prompts FILE (UTF-8, one prompt a line)");
  return tokenize_prompts(model, read_prompt_file(file), what, true);
}

TokenizedPrompts prompt_from_option(const LoadedModel& model, const std::string& prompt, const std::string& what) {
  model.text(what);
  if (prompt.empty()) throw std::invalid_argument(what + " needs --prompt TEXT (the text the map is of)");
  const std::vector<PromptLine> lines = parse_prompt_text(prompt, "--prompt");
  if (lines.size() != 1)
    throw std::invalid_argument("--prompt is one line of text; got " + std::to_string(lines.size()));
  return tokenize_prompts(model, lines, what, false);
}

nlohmann::json text_summary(const LoadedModel& model, const TokenizedPrompts& tokenized) {
  const ClipTextArch& arch = model.text("the summary").arch();
  return {{"vocabulary", tokenized.vocabulary_source},
          {"context_length", tokenized.ids.size(1)},
          {"prompts", tokenized.prompts.size()},
          {"pooling", to_string(arch.pooling)},
          {"ftfy",
           "not reproduced: ftfy.fix_text, the first step of clip/simple_tokenizer.py's basic_clean, is "
           "skipped (a prompt with mojibake or characters it normalises may tokenize differently)"}};
}

const char* const kTextSummaryRows =
    "| `text.vocabulary` | always | the vocabulary file(s) the prompts were tokenized with |\n"
    "| `text.context_length` | always | the token rows' length (the text tower's context, at most 77) |\n"
    "| `text.prompts` | always | how many prompts |\n"
    "| `text.pooling` | always | the row each prompt's embedding is read at |\n"
    "| `text.ftfy` | always | that ftfy.fix_text is not reproduced |";

}  // namespace attnscope
