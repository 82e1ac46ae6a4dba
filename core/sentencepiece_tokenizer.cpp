#include "core/sentencepiece_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <torch/torch.h>

#include "core/clip_text.h"
#include "core/excerpt.h"
#include "core/sentencepiece_backend.h"
#include "core/unicode_text.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxVocabularyModelBytes = 64u << 20;  // Gemma's tokenizer.model is 4.2 MB
constexpr char32_t kSpieceUnderline = U'\u2581';

// A serialized ModelProto with normalizer_spec.add_dummy_prefix = false appended: protobuf merges a
// repeated embedded message field into the one before, so this is what transformers'
// SiglipTokenizer.get_spm_processor builds through the protobuf module.
const std::string kNoDummyPrefix("\x1a\x02\x18\x00", 4);

bool is_ascii_punctuation(char32_t c) {  // Python's string.punctuation
  return (c >= U'!' && c <= U'/') || (c >= U':' && c <= U'@') || (c >= U'[' && c <= U'`') || (c >= U'{' && c <= U'~');
}

std::u32string without_ascii_punctuation(const std::u32string& text) {
  std::u32string kept;
  for (char32_t c : text)
    if (!is_ascii_punctuation(c)) kept += c;
  return kept;
}

// re.sub(r"\s+", " ", text) with a str pattern (\s is str.isspace), then str.strip().
std::u32string collapse_spaces_and_strip(const std::u32string& text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    if (python_isspace(text[i])) {
      out += U' ';
      while (i < text.size() && python_isspace(text[i])) ++i;
    } else {
      out += text[i++];
    }
  }
  return python_strip(out);
}

// " ".join(text.split()): the same for runs of white space, none left at the ends.
std::u32string split_and_join(const std::u32string& text) { return collapse_spaces_and_strip(text); }

std::u32string python_lstrip(const std::u32string& text) {
  size_t begin = 0;
  while (begin < text.size() && python_isspace(text[begin])) ++begin;
  return text.substr(begin);
}

std::u32string python_rstrip(const std::u32string& text) {
  size_t end = text.size();
  while (end > 0 && python_isspace(text[end - 1])) --end;
  return text.substr(0, end);
}

struct Chunk {
  bool special = false;
  std::u32string text;
};

// Left to right, the longest special literal at each position (transformers' Trie.split); with
// `strip_beside`, the white space beside a special is dropped (AddedToken lstrip and rstrip).
std::vector<Chunk> split_on_specials(const std::u32string& text, std::vector<std::u32string> specials,
                                     bool strip_beside) {
  std::sort(specials.begin(), specials.end(),
            [](const std::u32string& a, const std::u32string& b) { return a.size() > b.size(); });
  std::vector<Chunk> chunks;
  std::u32string plain;
  for (size_t i = 0; i < text.size();) {
    const std::u32string* found = nullptr;
    for (const std::u32string& special : specials)
      if (!special.empty() && text.compare(i, special.size(), special) == 0) {
        found = &special;
        break;
      }
    if (!found) {
      plain += text[i++];
      continue;
    }
    chunks.push_back({false, plain});
    chunks.push_back({true, *found});
    plain.clear();
    i += found->size();
  }
  chunks.push_back({false, plain});
  if (strip_beside)
    for (size_t k = 0; k < chunks.size(); ++k) {
      if (!chunks[k].special) continue;
      if (k + 1 < chunks.size() && !chunks[k + 1].special) chunks[k + 1].text = python_lstrip(chunks[k + 1].text);
      if (k > 0 && !chunks[k - 1].special) chunks[k - 1].text = python_rstrip(chunks[k - 1].text);
    }
  return chunks;
}

std::u32string lower_each_character(const std::u32string& text) {
  std::u32string lowered;
  for (char32_t c : text) lowered += python_lower(std::u32string(1, c));
  return lowered;
}

}  // namespace

std::string to_string(SentencePieceRules rules) {
  switch (rules) {
    case SentencePieceRules::TransformersSiglip:
      return "transformers' SiglipTokenizer";
    case SentencePieceRules::TransformersGemma:
      return "transformers' GemmaTokenizerFast for SigLIP 2 (lower-cased, as SigLIP 2 was trained)";
    case SentencePieceRules::OpenClip:
      break;
  }
  return "open_clip's HFTokenizer (clean='canonicalize')";
}

struct SentencePieceTokenizer::Model {
  std::unique_ptr<SentencePieceBackend> processor;
  std::unique_ptr<SentencePieceBackend> without_dummy_prefix;  // TransformersSiglip's "<unk>" trick
  SentencePieceRules rules = SentencePieceRules::OpenClip;
  std::string source;
  int64_t end = 1, pad = 1;
  std::vector<std::u32string> specials;  // kept as their own tokens (transformers' added tokens)
  size_t unk_pieces = 0;                 // len(Encode("<unk>")) without the dummy prefix

  std::vector<int64_t> ids_of(const std::vector<std::string>& pieces) const {
    std::vector<int64_t> ids;
    for (const std::string& piece : pieces) ids.push_back(processor->piece_to_id(piece));
    return ids;
  }

  std::vector<int64_t> encode_plain(const std::u32string& text) const {
    const std::vector<int> ids = processor->encode_ids(encode_utf8(text));
    return {ids.begin(), ids.end()};
  }

  std::vector<int64_t> encode_siglip(const std::u32string& prompt) const {
    std::u32string text(1, kSpieceUnderline);
    for (char32_t c : prompt) text += c == kSpieceUnderline ? U' ' : c;
    std::vector<std::string> tokens;
    for (const Chunk& chunk : split_on_specials(lower_each_character(text), specials, true)) {
      if (chunk.text.empty()) continue;
      if (chunk.special) {
        tokens.push_back(encode_utf8(chunk.text));
        continue;
      }
      const std::u32string canonical = collapse_spaces_and_strip(without_ascii_punctuation(chunk.text));
      const std::vector<std::string> pieces = without_dummy_prefix->encode_pieces("<unk>" + encode_utf8(canonical));
      tokens.insert(tokens.end(), pieces.size() >= unk_pieces ? pieces.begin() + long(unk_pieces) : pieces.begin(),
                    pieces.end());
    }
    if (tokens.size() > 1 && tokens[0] == "\u2581" && (tokens[1] == "</s>" || tokens[1] == "<unk>"))
      tokens.erase(tokens.begin());
    return ids_of(tokens);
  }

  std::vector<int64_t> encode_gemma(const std::u32string& prompt) const {
    std::vector<int64_t> ids;
    for (const Chunk& chunk : split_on_specials(python_lower(prompt), specials, false)) {
      if (chunk.special) {
        ids.push_back(processor->piece_to_id(encode_utf8(chunk.text)));
      } else if (!chunk.text.empty()) {
        const auto part = encode_plain(chunk.text);
        ids.insert(ids.end(), part.begin(), part.end());
      }
    }
    return ids;
  }

  std::vector<int64_t> encode_open_clip(const std::u32string& prompt) const {
    std::u32string text = clip_text::basic_clean(prompt);  // html.unescape twice, strip (no ftfy)
    for (char32_t& c : text)
      if (c == U'_') c = U' ';
    return encode_plain(split_and_join(python_lower(without_ascii_punctuation(text))));
  }
};

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Model> model) : model_(std::move(model)) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::from_file(const std::string& path, SentencePieceRules rules) {
  return SentencePieceTokenizer(read_model(path, rules));
}

std::unique_ptr<SentencePieceTokenizer::Model> SentencePieceTokenizer::read_model(
    const std::string& path, std::optional<SentencePieceRules> asked) {
  std::error_code error;
  const auto bytes = fs::file_size(path, error);
  if (error) throw ClipTokenizerError("cannot read the SentencePiece model " + path + ": " + error.message());
  if (bytes > kMaxVocabularyModelBytes)
    throw ClipTokenizerError("the SentencePiece model " + path + " is " + std::to_string(bytes >> 20) +
                             " MB; a vocabulary model is at most 64 MB (Gemma's is 4.2 MB)");
  std::ifstream in(path, std::ios::binary);
  std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw ClipTokenizerError("cannot read the SentencePiece model " + path);
  auto model = std::make_unique<Model>();
  try {
    model->processor = load_sentencepiece(proto);
  } catch (const std::exception& error) {
    throw ClipTokenizerError(path + " is not a SentencePiece model (" + excerpt(error.what(), 160) + ")");
  }
  const SentencePieceBackend& processor = *model->processor;
  const int end = processor.eos_id();
  if (end < 0 || end >= processor.piece_size())
    throw ClipTokenizerError("the SentencePiece model " + path +
                             " has no end-of-sequence piece, which every SigLIP prompt ends with");
  // Which of transformers' tokenizers the vocabulary belongs to: T5's end piece is "</s>".
  const bool t5 = processor.id_to_piece(end) == "</s>";
  const SentencePieceRules rules = asked ? *asked
                                   : t5  ? SentencePieceRules::TransformersSiglip
                                         : SentencePieceRules::TransformersGemma;
  model->rules = rules;
  model->end = end;
  model->pad = t5 || processor.pad_id() < 0 ? end : processor.pad_id();
  if (rules == SentencePieceRules::TransformersSiglip) {
    if (!t5 || processor.piece_to_id("<unk>") != processor.unk_id())
      throw ClipTokenizerError("the SentencePiece model " + path +
                               " is not T5's kind (end piece '</s>', '<unk>'), which SiglipTokenizer reads");
    try {
      model->without_dummy_prefix = load_sentencepiece(proto + kNoDummyPrefix);
    } catch (const std::exception& error) {
      throw ClipTokenizerError(path + ": " + excerpt(error.what(), 160));
    }
    model->unk_pieces = model->without_dummy_prefix->encode_pieces("<unk>").size();
    model->specials = {U"</s>", U"<unk>"};
  } else if (rules == SentencePieceRules::TransformersGemma) {
    for (int id = 0; id < processor.piece_size(); ++id)
      if (processor.is_control(id)) model->specials.push_back(decode_utf8_replacing(processor.id_to_piece(id)));
  }
  model->source = path + " (" + to_string(rules) + ")";
  return model;
}

std::string SentencePieceTokenizer::find_beside(const std::string& model_path) {
  std::error_code error;
  const fs::path folder =
      fs::is_directory(model_path, error) ? fs::path(model_path) : fs::path(model_path).parent_path();
  for (const char* name : {"spiece.model", "tokenizer.model"})
    if (fs::is_regular_file(folder / name, error)) return (folder / name).string();
  const bool json = fs::exists(folder / "tokenizer.json", error);
  throw ClipTokenizerError(
      "SigLIP's prompts need its SentencePiece vocabulary: no spiece.model (SigLIP) or tokenizer.model (SigLIP 2's "
      "Gemma vocabulary) in " +
      folder.string() +
      (json ? "; its tokenizer.json is a fast-tokenizer file attnscope does not read: put the model's "
              "SentencePiece file beside it (google/siglip-* ship spiece.model, google/siglip2-* tokenizer.model)"
            : ""));
}

SentencePieceTokenizer SentencePieceTokenizer::for_model(const std::string& model_path, bool open_clip) {
  const std::optional<SentencePieceRules> rules =
      open_clip ? std::optional(SentencePieceRules::OpenClip) : std::nullopt;
  return SentencePieceTokenizer(read_model(find_beside(model_path), rules));
}

const std::string& SentencePieceTokenizer::vocabulary_source() const { return model_->source; }
SentencePieceRules SentencePieceTokenizer::rules() const { return model_->rules; }
int64_t SentencePieceTokenizer::vocab_size() const { return model_->processor->piece_size(); }
int64_t SentencePieceTokenizer::end_token() const { return model_->end; }
int64_t SentencePieceTokenizer::pad_token() const { return model_->pad; }

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& utf8) const {
  size_t offset = 0;
  const auto text = decode_utf8(utf8, &offset);
  if (!text) throw ClipTokenizerError("the prompt is not valid UTF-8 (byte " + std::to_string(offset) + ")");
  switch (model_->rules) {
    case SentencePieceRules::TransformersSiglip:
      return model_->encode_siglip(*text);
    case SentencePieceRules::TransformersGemma:
      return model_->encode_gemma(*text);
    case SentencePieceRules::OpenClip:
      break;
  }
  return model_->encode_open_clip(*text);
}

std::vector<std::vector<int64_t>> SentencePieceTokenizer::tokenize(const std::vector<std::string>& prompts,
                                                                   size_t context_length) const {
  std::vector<std::vector<int64_t>> rows;
  for (size_t index = 0; index < prompts.size(); ++index) {
    std::vector<int64_t> row = encode(prompts[index]);
    // SiglipTokenizer._add_eos_if_not_present: a prompt ending in "</s>" keeps that one.
    if (!(model_->rules == SentencePieceRules::TransformersSiglip && !row.empty() && row.back() == model_->end))
      row.push_back(model_->end);
    if (row.size() > context_length)
      throw ClipPromptTooLong("prompt " + std::to_string(index + 1) + " ('" + prompt_excerpt(prompts[index]) +
                                  "') has " + std::to_string(row.size()) +
                                  " tokens with its end token, more than the text tower's context of " +
                                  std::to_string(context_length) +
                                  " (SigLIP's tools would cut it, and its embedding would not be the prompt's): "
                                  "shorten it",
                              index, row.size(), context_length);
    row.resize(context_length, model_->pad);
    rows.push_back(std::move(row));
  }
  return rows;
}

torch::Tensor SentencePieceTokenizer::tokenize_tensor(const std::vector<std::string>& prompts,
                                                      size_t context_length) const {
  return token_rows_tensor(tokenize(prompts, context_length), context_length);
}

int64_t SentencePieceTokenizer::prompt_tokens(const torch::Tensor& row) const {
  const torch::Tensor ends = row.flatten().eq(model_->end).nonzero();
  return ends.numel() ? ends[0][0].item<int64_t>() + 1 : row.numel();
}

}  // namespace attnscope
