#include "views/clip_prompts.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/clip_tokenizer.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "models/text_tokenizer.h"

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

const AnalysisOption<std::string>& prompt_template_option() {
  static const auto option = text_option(
      "prompt-template", "TEXT",
      "the workbench's CLIP views without --prompts: the prompt list is this template over the class names, every {} "
      "standing for the name (default: the file's prompt_template metadata, else 'a photo of a {}')",
      [](const std::string& text) {
        if (!text.empty() && text.find("{}") == std::string::npos)
          throw std::invalid_argument("--prompt-template needs {} where the class name goes, got '" +
                                      prompt_excerpt(text) + "'");
      });
  return option;
}

namespace {

// The file's class names for prompts: its classifier's, else a JSON list under "class_names" in its
// metadata (a CLIP file has no classifier to match them against).
std::vector<std::string> prompt_class_names(const LoadedModel& model) {
  if (!model.class_names.empty()) return model.class_names;
  const auto found = model.metadata.find("class_names");
  if (found == model.metadata.end()) return {};
  std::vector<std::string> names;
  try {
    const nlohmann::json parsed = parse_json_checked(found->second, "metadata class_names");
    if (!parsed.is_array()) return {};
    for (const auto& name : parsed)
      if (name.is_string()) names.push_back(name.get<std::string>());
  } catch (const std::invalid_argument&) {
    return {};
  }
  return names;
}

}  // namespace

PromptList workbench_prompt_list(const LoadedModel& model, const AnalysisSettings& settings) {
  PromptList list;
  const std::string& file = prompts_option()(settings);
  if (!file.empty()) {
    list.prompts = read_prompt_file(file);
    list.source = "the prompt file " + std::filesystem::path(file).filename().string();
    return list;
  }
  const std::vector<std::string> names = prompt_class_names(model);
  if (names.empty()) {
    list.missing = "no prompt list: give a prompt file (--prompts) or a file with class names";
    return list;
  }
  // The file's names become prompts: held to what a prompt file may hold (issue 60: two million names
  // ran for a minute, then out of memory).
  size_t bytes = 0;
  for (const std::string& name : names) bytes += name.size() + 1;
  if (names.size() > kMaxPrompts || bytes > kMaxPromptFileBytes) {
    list.missing = "the file names " + std::to_string(names.size()) + " classes (" + std::to_string(bytes) +
                   " bytes), more than a prompt list may hold (" + std::to_string(kMaxPrompts) + " prompts, " +
                   std::to_string(kMaxPromptFileBytes >> 20) + " MB): give a prompt file (--prompts)";
    return list;
  }
  std::string pattern = prompt_template_option()(settings);
  std::string where = "--prompt-template";
  if (pattern.empty()) {
    const auto declared = model.metadata.find("prompt_template");
    const bool usable = declared != model.metadata.end() && declared->second.find("{}") != std::string::npos;
    pattern = usable ? declared->second : "a photo of a {}";
    where = usable ? "the file's template" : "CLIP's template";
  }
  for (size_t index = 0; index < names.size(); ++index) {
    // Every {} is the class name (a template may name it twice: "a {}, a kind of {}").
    std::string text = pattern;
    for (size_t at = text.find("{}"); at != std::string::npos; at = text.find("{}", at + names[index].size()))
      text.replace(at, 2, names[index]);
    list.prompts.push_back({text, index + 1});
  }
  list.source = where + " '" + prompt_excerpt(pattern) + "' over " + std::to_string(names.size()) + " class names";
  return list;
}

TokenizedPrompts tokenize_prompts(const LoadedModel& model, const std::vector<PromptLine>& prompts,
                                  const std::string& what, bool from_file) {
  const ClipTextTowerImpl& tower = model.text(what);
  std::shared_ptr<const PromptTokenizer> tokenizer;
  try {
    tokenizer = text_tokenizer_for(model.path, tower.arch());
  } catch (const ClipTokenizerError& error) {
    throw std::invalid_argument(what + ": " + error.what());
  }
  return tokenize_prompts(model, *tokenizer, prompts, what, from_file);
}

TokenizedPrompts tokenize_prompts(const LoadedModel& model, const PromptTokenizer& tokenizer,
                                  const std::vector<PromptLine>& prompts, const std::string& what, bool from_file) {
  ClipTextTowerImpl& tower = model.text(what);
  // A vocabulary of another model gives ids the tower would read wrongly; its end token decides
  // where each prompt's embedding is read, so a mismatch there is named before any prompt is.
  if (const auto* bpe = dynamic_cast<const ClipTokenizer*>(&tokenizer);
      bpe && bpe->end_token() != tower.arch().end_of_text_id) {
    const ClipTokenizer& tokenizer = *bpe;
    throw std::invalid_argument(
        what + ": the vocabulary " + tokenizer.vocabulary_source() + " ends each prompt with id " +
        std::to_string(tokenizer.end_token()) + ", but this text tower's end of text is id " +
        std::to_string(tower.arch().end_of_text_id) + " (of " + std::to_string(tower.arch().vocab_size) +
        " token ids): they belong to different models; put the model's own vocab.json and "
        "merges.txt beside the checkpoint");
  }
  const size_t context = text_context_length(tower.arch());
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
        prompt_excerpt(prompt.text) + "') is " + std::to_string(error.tokens) + " tokens with its " +
        (tower.arch().tokenizer == TextTokenizerKind::SentencePiece ? "end token; " : "start and end; ") + what +
        "'s text tower reads at most " + std::to_string(error.context_length) + ": shorten it");
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

TokenizedPrompts prompts_from_list(const LoadedModel& model, const AnalysisSettings& settings, const std::string& what,
                                   std::string& source) {
  model.text(what);  // a visual-only file is refused first, naming what it lacks
  const PromptList list = workbench_prompt_list(model, settings);
  if (list.prompts.empty())
    throw std::invalid_argument(what + " needs --prompts FILE (UTF-8, one prompt a line), or a file with class names " +
                                "for --prompt-template" + (list.missing.empty() ? "" : ": " + list.missing));
  source = list.source;
  return tokenize_prompts(model, list.prompts, what, !prompts_option()(settings).empty());
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
  return {
      {"vocabulary", tokenized.vocabulary_source},
      {"context_length", tokenized.ids.size(1)},
      {"prompts", tokenized.prompts.size()},
      {"pooling", to_string(arch.pooling)},
      {"scores", to_string(arch.scores)},
      {"ftfy", arch.tokenizer == TextTokenizerKind::SentencePiece && arch.source_layout != CheckpointLayout::OpenClip
                   ? "not used by this tokenizer"
                   : "not reproduced: ftfy.fix_text, the first step of the tokenizer's basic_clean, is skipped "
                     "(a prompt with mojibake or characters it normalises may tokenize differently)"}};
}

const char* const kTextSummaryRows =
    "| `text.vocabulary` | always | the vocabulary file(s) the prompts were tokenized with, and the rules (SigLIP: "
    "which tool's) |\n"
    "| `text.context_length` | always | the token rows' length (CLIP: the text tower's context, at most 77; SigLIP: "
    "its context, 64 or 16) |\n"
    "| `text.prompts` | always | how many prompts |\n"
    "| `text.pooling` | always | the row each prompt's embedding is read at |\n"
    "| `text.scores` | always | how logits become probabilities (CLIP: softmax over the prompts; SigLIP: sigmoid "
    "per prompt) |\n"
    "| `text.ftfy` | always | that ftfy.fix_text is not reproduced (or not used, for transformers' SigLIP "
    "tokenizers) |";

}  // namespace attnscope
