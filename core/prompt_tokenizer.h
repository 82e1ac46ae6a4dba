// What the text-prompted analyses need of a tokenizer, whichever vocabulary the text tower reads:
// CLIP's byte-level BPE (core/clip_tokenizer.h) or SigLIP's SentencePiece (core/sentencepiece_tokenizer.h).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

namespace attnscope {

// A vocabulary file that cannot be used, a prompt that is not UTF-8, an id outside the vocabulary.
class ClipTokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A prompt whose tokens, with the start and end tokens, do not fit the context (clip.tokenize's
// RuntimeError). `index` is the prompt's place in the list passed to tokenize.
class ClipPromptTooLong : public ClipTokenizerError {
 public:
  ClipPromptTooLong(const std::string& message, size_t index, size_t tokens, size_t context_length)
      : ClipTokenizerError(message), index(index), tokens(tokens), context_length(context_length) {}
  size_t index;
  size_t tokens;  // with the start and end tokens
  size_t context_length;
};

// A prompt as error messages quote it: on one line, cut after its first words (at most about 60
// bytes, never inside a character), with "..." when cut.
std::string prompt_excerpt(const std::string& prompt);

// Token rows, each `context_length` ids long, as an int64 tensor [rows, context_length].
torch::Tensor token_rows_tensor(const std::vector<std::vector<int64_t>>& rows, size_t context_length);

class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  // The file(s) the vocabulary was read from, and the rules it applies, for messages and summaries.
  virtual const std::string& vocabulary_source() const = 0;
  // One row of `context_length` ids per prompt, as the text tower reads them. A prompt that does not
  // fit throws ClipPromptTooLong; a prompt that is not UTF-8 ClipTokenizerError.
  virtual torch::Tensor tokenize_tensor(const std::vector<std::string>& prompts, size_t context_length) const = 0;
  // How many ids of a row are the prompt's own (start, tokens, end), for summaries.
  virtual int64_t prompt_tokens(const torch::Tensor& row) const = 0;
};

}  // namespace attnscope
