#include "models/text_tokenizer.h"

#include <algorithm>

#include "core/clip_tokenizer.h"
#include "core/sentencepiece_tokenizer.h"

namespace attnscope {

std::shared_ptr<const PromptTokenizer> text_tokenizer_for(const std::string& model_path, const ClipTextArch& arch) {
  if (arch.tokenizer == TextTokenizerKind::SentencePiece)
    return std::make_shared<const SentencePieceTokenizer>(
        SentencePieceTokenizer::for_model(model_path, arch.source_layout == CheckpointLayout::OpenClip));
  return std::make_shared<const ClipTokenizer>(ClipTokenizer::for_model(model_path));
}

size_t text_context_length(const ClipTextArch& arch) {
  if (arch.tokenizer == TextTokenizerKind::SentencePiece) return size_t(arch.context_length);
  return size_t(std::min<int>(arch.context_length, int(kClipContextLength)));
}

}  // namespace attnscope
