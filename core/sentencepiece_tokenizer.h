// SigLIP's and SigLIP 2's prompts as token ids, with the SentencePiece model their files ship
// (spiece.model: T5's c4_en vocabulary; tokenizer.model: Gemma's), by the rules of the tool the file
// comes from:
// - transformers' SiglipTokenizer (a SiglipModel folder with the T5 vocabulary): U+2581 read as a
//   space, Python's lower() per character, the literal "</s>" and "<unk>" kept as those tokens (the
//   white space beside them dropped), ASCII punctuation deleted, white space runs made one space and
//   stripped, each piece encoded after "<unk>" without SentencePiece's dummy prefix (the "<unk>"
//   pieces dropped), "</s>" appended unless the prompt already ends with it, padded with "</s>";
// - transformers' GemmaTokenizerFast as SigLIP 2's folders configure it (add_bos_token false,
//   add_eos_token true): the text lower-cased as SigLIP 2 was trained (big_vision; transformers
//   leaves it to the user and says so), the control tokens "<pad>", "<eos>", "<bos>" kept, the rest
//   encoded as it is, "<eos>" appended, padded with "<pad>";
// - open_clip's HFTokenizer(clean="canonicalize"): html.unescape twice and strip (ftfy.fix_text is
//   not reproduced, as for CLIP), "_" made a space, ASCII punctuation deleted, lower(), white space
//   runs made one space, encoded, the end token appended, padded with it (T5) or "<pad>" (Gemma).
// A prompt whose ids with the end token exceed the context is refused (ClipPromptTooLong), where the
// tools cut it: the embedding of a cut prompt is not the prompt's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/prompt_tokenizer.h"

namespace attnscope {

enum class SentencePieceRules { TransformersSiglip, TransformersGemma, OpenClip };
std::string to_string(SentencePieceRules rules);

class SentencePieceTokenizer : public PromptTokenizer {
 public:
  // The file's SentencePiece model (a serialized ModelProto, at most 64 MB). Throws
  // ClipTokenizerError naming the file when it cannot be read or lacks the end token the rules need.
  static SentencePieceTokenizer from_file(const std::string& path, SentencePieceRules rules);
  // The SentencePiece model beside a model file (or inside it when `model_path` is a folder):
  // spiece.model, else tokenizer.model. Throws ClipTokenizerError naming what the folder has instead.
  static std::string find_beside(const std::string& model_path);
  // The rules for a vocabulary: TransformersSiglip or TransformersGemma by its end piece ("</s>": T5's,
  // else Gemma's) for a transformers folder, OpenClip for an open_clip one.
  static SentencePieceTokenizer for_model(const std::string& model_path, bool open_clip);

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer() override;

  const std::string& vocabulary_source() const override;
  SentencePieceRules rules() const;
  int64_t vocab_size() const;
  int64_t end_token() const;
  int64_t pad_token() const;

  // The prompt's ids without the end token, by the rules. Throws ClipTokenizerError when `utf8` is
  // not valid UTF-8.
  std::vector<int64_t> encode(const std::string& utf8) const;
  // Per prompt: encode(prompt), the end token (not twice, for transformers' SigLIP rules), the pad
  // token to `context_length`.
  std::vector<std::vector<int64_t>> tokenize(const std::vector<std::string>& prompts, size_t context_length) const;
  torch::Tensor tokenize_tensor(const std::vector<std::string>& prompts, size_t context_length) const override;
  // The ids up to and including the first end token.
  int64_t prompt_tokens(const torch::Tensor& row) const override;

 private:
  struct Model;
  explicit SentencePieceTokenizer(std::unique_ptr<Model> model);
  // The file read once; without `rules`, transformers' by the vocabulary's kind.
  static std::unique_ptr<Model> read_model(const std::string& path, std::optional<SentencePieceRules> rules);
  std::unique_ptr<Model> model_;
};

}  // namespace attnscope
