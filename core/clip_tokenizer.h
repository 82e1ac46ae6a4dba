// CLIP's text tokenizer: OpenAI's clip/simple_tokenizer.py (byte-level BPE) and clip.tokenize (start
// and end tokens, zero padding to 77, a longer prompt refused), with the vocabulary from OpenAI's
// bpe_simple_vocab_16e6.txt.gz (bundled in assets/clip/) or a Hugging Face folder's vocab.json +
// merges.txt. The text cleaning before BPE is core/clip_text.h: exact except that ftfy.fix_text is
// not reproduced.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/prompt_tokenizer.h"

namespace attnscope {

// The context every CLIP text tower is trained with.
constexpr size_t kClipContextLength = 77;

// Where a tokenizer's vocabulary came from (for summaries).
enum class ClipVocabularyKind {
  OpenAiMerges,      // bpe_simple_vocab_16e6.txt.gz-style: the ids follow from the merges
  HuggingFaceFiles,  // vocab.json (the ids) + merges.txt (the ranks)
};

class ClipTokenizer : public PromptTokenizer {
 public:
  // OpenAI's gzipped merges file: a header line, then the merges on lines 1..48,894 (later lines are
  // ignored, as simple_tokenizer.py slices them off). Ids: the 256 byte symbols, the same with
  // "</w>", one per merge, then <|startoftext|> and <|endoftext|> (49,408).
  static ClipTokenizer from_openai_gz(const std::string& path);
  // A Hugging Face folder's vocab.json and merges.txt ("#version" header, then one merge a line).
  static ClipTokenizer from_hf_files(const std::string& vocab_json, const std::string& merges_txt);
  static ClipTokenizer from_hf_folder(const std::string& folder);
  // assets/clip/bpe_simple_vocab_16e6.txt.gz, what clip.tokenize uses.
  static ClipTokenizer bundled();
  // The vocab.json + merges.txt beside a model file (or inside it when `model_path` is a folder)
  // when both are there, else the bundled OpenAI file; one of the two alone is refused.
  static ClipTokenizer for_model(const std::string& model_path);

  ClipTokenizer(ClipTokenizer&&) noexcept;
  ClipTokenizer& operator=(ClipTokenizer&&) noexcept;
  ~ClipTokenizer() override;

  ClipVocabularyKind vocabulary_kind() const;
  // The file(s) the vocabulary was read from, for messages and summaries.
  const std::string& vocabulary_source() const override;
  // One more than the largest id (the rows a token embedding needs).
  int64_t vocab_size() const;
  int64_t start_token() const;
  int64_t end_token() const;

  // SimpleTokenizer.encode: the BPE ids of a UTF-8 prompt, without start and end tokens.
  // Throws ClipTokenizerError when `utf8` is not valid UTF-8.
  std::vector<int64_t> encode(const std::string& utf8) const;
  // SimpleTokenizer.decode: bytes of the ids' symbols, decoded as UTF-8 with U+FFFD for ill-formed
  // bytes, "</w>" replaced by a space. Throws ClipTokenizerError for an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids) const;

  // clip.tokenize: per prompt, start token, encode(prompt), end token, zeros after. A prompt that
  // does not fit throws ClipPromptTooLong naming the prompt (its first words) and its token count.
  std::vector<std::vector<int64_t>> tokenize(const std::vector<std::string>& prompts,
                                             size_t context_length = kClipContextLength) const;
  // The same as an int64 tensor [prompts, context_length].
  torch::Tensor tokenize_tensor(const std::vector<std::string>& prompts,
                                size_t context_length = kClipContextLength) const override;
  // The nonzero ids of a row (clip.tokenize pads with zeros).
  int64_t prompt_tokens(const torch::Tensor& row) const override;

 private:
  struct Vocabulary;
  explicit ClipTokenizer(std::unique_ptr<Vocabulary> vocabulary);
  std::unique_ptr<Vocabulary> vocabulary_;
};

}  // namespace attnscope
