// The tokenizer whose ids a text tower reads: CLIP's BPE (the vocab.json and merges.txt beside the
// model, else OpenAI's bundled vocabulary) or SigLIP's SentencePiece model beside it, by the rules
// of the tool the file's layout comes from (core/sentencepiece_tokenizer.h).
#pragma once

#include <memory>
#include <string>

#include "core/prompt_tokenizer.h"
#include "models/clip_text.h"

namespace attnscope {

// Throws ClipTokenizerError when the vocabulary cannot be found or read.
std::shared_ptr<const PromptTokenizer> text_tokenizer_for(const std::string& model_path, const ClipTextArch& arch);

// The ids' row length for `arch`: its context, at most CLIP's 77 for CLIP's tokenizer (clip.tokenize's
// rows); SigLIP's rows fill its context, the mask not being causal.
size_t text_context_length(const ClipTextArch& arch);

}  // namespace attnscope
