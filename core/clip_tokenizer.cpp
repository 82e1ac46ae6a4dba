#include "core/clip_tokenizer.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <torch/torch.h>

#include "core/assets.h"
#include "core/clip_text.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "core/unicode_text.h"

namespace attnscope {

namespace clip_vocabulary {

// simple_tokenizer.py keeps merges[1:49152-256-2+1]: 48,894 merges after the header line.
constexpr size_t kMerges = 49152 - 256 - 2;
constexpr const char* kStartOfText = "<|startoftext|>";
constexpr const char* kEndOfText = "<|endoftext|>";
// Bounds on what a vocabulary file may make us read or allocate (its text is decoded to 4 bytes a
// character): OpenAI's file is 1.4 MB (3.2 MB inflated), a Hugging Face vocab.json about 1.6 MB and
// merges.txt 0.5 MB.
constexpr size_t kMaxFileBytes = size_t(16) << 20;
constexpr size_t kMaxInflatedBytes = size_t(16) << 20;
constexpr size_t kMaxVocabularyEntries = size_t(1) << 20;
constexpr int64_t kMaxTokenId = int64_t(1) << 24;
// Words whose BPE is kept (simple_tokenizer.py keeps every word; this bounds the memory).
constexpr size_t kMaxCachedWords = size_t(1) << 16;

[[noreturn]] void fail(const std::string& message) { throw ClipTokenizerError(message); }

// bytes_to_unicode(): the printable bytes stand for themselves, the other 68 for U+0100 onwards, in
// the order simple_tokenizer.py lists them (which is the order of the first 256 ids).
struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int, 256> order{};  // order[i]: the byte of id i
  std::unordered_map<char32_t, unsigned char> char_to_byte;

  ByteAlphabet() {
    const auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0, shifted = 0;
    for (int b = 0; b < 256; ++b)
      if (printable(b)) {
        byte_to_char[b] = char32_t(b);
        order[next++] = b;
      }
    for (int b = 0; b < 256; ++b)
      if (!printable(b)) {
        byte_to_char[b] = char32_t(256 + shifted++);
        order[next++] = b;
      }
    for (int b = 0; b < 256; ++b) char_to_byte[byte_to_char[b]] = static_cast<unsigned char>(b);
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

std::string byte_symbol(int byte, bool end_of_word) {
  std::string symbol;
  append_utf8(byte_alphabet().byte_to_char[byte], symbol);
  if (end_of_word) symbol += "</w>";
  return symbol;
}

std::string read_bounded_file(const std::string& path, const std::string& what) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) fail("cannot read " + what + " " + path + ": no such file");
  if (!std::filesystem::is_regular_file(status)) fail(what + " " + path + " is not a regular file");
  const auto size = std::filesystem::file_size(path, error);
  if (error) fail("cannot read " + what + " " + path + ": " + error.message());
  if (size > kMaxFileBytes)
    fail(what + " " + path + " has " + std::to_string(size) + " bytes, more than the " +
         std::to_string(kMaxFileBytes >> 20) + " MB a CLIP vocabulary file may have");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in || !in.read(bytes.data(), std::streamsize(size))) fail("cannot read " + what + " " + path);
  return bytes;
}

// The one gzip member of `compressed`, checked (CRC and length) by zlib.
std::string gunzip(const std::string& compressed, const std::string& shown) {
  if (compressed.size() < 18 || static_cast<unsigned char>(compressed[0]) != 0x1F ||
      static_cast<unsigned char>(compressed[1]) != 0x8B)
    fail(shown + " is not a gzip file (expected OpenAI's bpe_simple_vocab_16e6.txt.gz)");
  // The trailer's length (modulo 2^32) sizes the first allocation, never past the bound.
  const auto tail = [&](size_t k) {
    return uint32_t(static_cast<unsigned char>(compressed[compressed.size() - 4 + k]));
  };
  const size_t declared = tail(0) | (tail(1) << 8) | (tail(2) << 16) | (tail(3) << 24);
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) fail("cannot start zlib to read " + shown);
  std::string inflated;
  inflated.reserve(std::min(declared, kMaxInflatedBytes));
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = uInt(compressed.size());
  std::array<char, 1 << 16> chunk;
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
    stream.avail_out = uInt(chunk.size());
    status = inflate(&stream, Z_NO_FLUSH);
    const size_t produced = chunk.size() - stream.avail_out;
    if (inflated.size() + produced > kMaxInflatedBytes) {
      inflateEnd(&stream);
      fail(shown + " inflates to more than " + std::to_string(kMaxInflatedBytes >> 20) +
           " MB; OpenAI's CLIP vocabulary inflates to 3.2 MB");
    }
    inflated.append(chunk.data(), produced);
  }
  const std::string zlib_message = stream.msg ? stream.msg : "";
  const size_t left_over = stream.avail_in;
  inflateEnd(&stream);
  // Z_BUF_ERROR: no progress with output room left, so the input ended inside the stream.
  if (status == Z_BUF_ERROR) fail(shown + " is truncated: its compressed data ends early (download it again)");
  if (status != Z_STREAM_END)
    fail(shown + " is corrupt: " + (zlib_message.empty() ? "zlib cannot inflate it" : zlib_message));
  if (left_over != 0) fail(shown + " has " + std::to_string(left_over) + " bytes after its compressed data");
  return inflated;
}

// str.split() with no argument: the parts between runs of whitespace.
std::vector<std::u32string> split_on_whitespace(const std::u32string& line) {
  std::vector<std::u32string> parts;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && python_isspace(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !python_isspace(line[i])) ++i;
    if (i > start) parts.push_back(line.substr(start, i - start));
  }
  return parts;
}

// The merges as simple_tokenizer.py (and transformers' CLIPTokenizer) keep them: lines 1..48,894 of
// `text` split at '\n', each two symbols.
std::vector<std::pair<std::string, std::string>> parse_merges(const std::string& bytes, const std::string& shown,
                                                              bool strip_first) {
  size_t bad = 0;
  auto text = decode_utf8(bytes, &bad);
  if (!text) fail(shown + " is not valid UTF-8 (at byte " + std::to_string(bad) + ")");
  // transformers strips the whole text before splitting it into lines; simple_tokenizer.py does not.
  if (strip_first) *text = python_strip(*text);
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_number = 0, start = 0;
  while (start <= text->size() && merges.size() < kMerges) {
    size_t end = text->find(U'\n', start);
    if (end == std::u32string::npos) end = text->size();
    if (end == text->size() && start == end && line_number > 0) break;  // a final newline ends the last line
    const std::u32string line = text->substr(start, end - start);
    if (line_number == 0) {
      if (line.find(U"#version") == std::u32string::npos)
        fail(shown + " does not start with a \"#version\" header line (its first line is '" +
             one_line(excerpt(encode_utf8(line), 80)) + "'): it is not a CLIP merges file");
    } else {
      const auto parts = split_on_whitespace(line);
      if (parts.size() != 2)
        fail(shown + " line " + std::to_string(line_number + 1) + " is not a merge of two symbols: '" +
             one_line(excerpt(encode_utf8(line), 80)) + "'");
      merges.emplace_back(encode_utf8(parts[0]), encode_utf8(parts[1]));
    }
    ++line_number;
    start = end + 1;
  }
  return merges;
}

}  // namespace clip_vocabulary

// The vocabulary (ids and merge ranks on interned symbols) and the cache of words already encoded.
struct ClipTokenizer::Vocabulary {
  ClipVocabularyKind kind = ClipVocabularyKind::OpenAiMerges;
  std::string source;
  // Every symbol the vocabulary or the merges name, interned: merges compare symbols by index.
  std::unordered_map<std::string, int> symbol_index;
  std::vector<std::string> symbols;
  std::vector<int64_t> symbol_id;              // per symbol: its id, or -1 when the vocabulary lacks it
  std::unordered_map<int64_t, int> id_symbol;  // the decoder: id -> symbol
  struct Merge {
    int rank;
    int merged;
  };
  std::unordered_map<uint64_t, Merge> merges;             // (left << 32 | right) -> rank and merged symbol
  std::array<int, 256> byte_symbol{}, byte_symbol_end{};  // a byte's symbol, and with "</w>"
  int64_t start_id = 0, end_id = 0, size = 0;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  int intern(const std::string& symbol) {
    const auto [found, added] = symbol_index.emplace(symbol, int(symbols.size()));
    if (added) {
      symbols.push_back(symbol);
      symbol_id.push_back(-1);
    }
    return found->second;
  }

  static uint64_t pair_key(int left, int right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

  // Interns the byte symbols and the merges (ranks in order; a repeated pair keeps its last rank,
  // as dict(zip(merges, range(...))) does).
  void add_merges(const std::vector<std::pair<std::string, std::string>>& list) {
    for (int b = 0; b < 256; ++b) {
      byte_symbol[b] = intern(clip_vocabulary::byte_symbol(b, false));
      byte_symbol_end[b] = intern(clip_vocabulary::byte_symbol(b, true));
    }
    for (size_t rank = 0; rank < list.size(); ++rank) {
      const int left = intern(list[rank].first), right = intern(list[rank].second);
      const int merged = intern(list[rank].first + list[rank].second);
      merges[pair_key(left, right)] = {int(rank), merged};
    }
  }

  // Sets the ids; a symbol given twice keeps its last id (dict(zip(vocab, range(...)))).
  void set_id(const std::string& symbol, int64_t id) { symbol_id[intern(symbol)] = id; }

  void finish() {
    for (size_t s = 0; s < symbols.size(); ++s)
      if (symbol_id[s] >= 0) id_symbol[symbol_id[s]] = int(s);
    start_id = symbol_id[symbol_index.at(clip_vocabulary::kStartOfText)];
    end_id = symbol_id[symbol_index.at(clip_vocabulary::kEndOfText)];
    for (int64_t id : symbol_id) size = std::max(size, id + 1);
  }

  // SimpleTokenizer.bpe then the encoder: the ids of one word (UTF-8 bytes of one split match).
  // bpe() repeats: take the adjacent pair of lowest rank, merge its occurrences in one pass from the
  // left. The same here on a linked list with a heap of candidate pairs, so that a long word costs
  // n log n instead of bpe()'s up to (merges x n).
  std::vector<int64_t> word_ids(const std::string& word) const {
    if (word == clip_vocabulary::kStartOfText) return {start_id};  // the cache's two seeded entries
    if (word == clip_vocabulary::kEndOfText) return {end_id};
    const int n = int(word.size());
    std::vector<int> symbol(n), next(n), previous(n);
    std::vector<char> alive(n, 1);
    for (int k = 0; k < n; ++k) {
      const auto byte = static_cast<unsigned char>(word[k]);
      symbol[k] = k + 1 < n ? byte_symbol[byte] : byte_symbol_end[byte];
      next[k] = k + 1 < n ? k + 1 : -1;
      previous[k] = k - 1;
    }
    struct Candidate {
      int rank, position;
      uint64_t pair;
    };
    // Lowest rank first; within a rank (one pair), leftmost first.
    const auto later = [](const Candidate& a, const Candidate& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> candidates(later);
    const auto pair_at = [&](int position) { return pair_key(symbol[position], symbol[next[position]]); };
    const auto add_candidate = [&](int position) {
      if (position < 0 || next[position] < 0) return;
      const auto found = merges.find(pair_at(position));
      if (found != merges.end()) candidates.push({found->second.rank, position, found->first});
    };
    for (int k = 0; k + 1 < n; ++k) add_candidate(k);
    std::vector<int> positions;
    while (!candidates.empty()) {
      const Candidate best = candidates.top();
      candidates.pop();
      // Entries go stale when a neighbour merges; an occurrence is one whose pair is still there.
      const auto still_there = [&](int position) {
        return alive[position] && next[position] >= 0 && pair_at(position) == best.pair;
      };
      if (!still_there(best.position)) continue;
      // One pass of bpe(): every occurrence of this pair now, left to right. A merge makes no new
      // occurrence of it (its result differs from both halves), so none is pushed during the pass.
      positions.assign(1, best.position);
      while (!candidates.empty() && candidates.top().rank == best.rank) {
        positions.push_back(candidates.top().position);
        candidates.pop();
      }
      const int merged = merges.at(best.pair).merged;
      for (const int position : positions) {
        if (!still_there(position)) continue;  // taken by the merge on its left (a a a)
        const int right = next[position];
        symbol[position] = merged;
        alive[right] = 0;
        next[position] = next[right];
        if (next[position] >= 0) previous[next[position]] = position;
        add_candidate(previous[position]);
        add_candidate(position);
      }
    }
    std::vector<int64_t> ids;
    for (int position = 0; position >= 0; position = next[position]) {
      // Loading checked that every byte symbol and merge result has an id.
      const int part = symbol[position];
      if (symbol_id[part] < 0)
        clip_vocabulary::fail("CLIP vocabulary " + source + " has no id for '" + symbols[part] + "'");
      ids.push_back(symbol_id[part]);
    }
    return ids;
  }

  std::vector<int64_t> cached_word_ids(const std::string& word) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      const auto found = cache.find(word);
      if (found != cache.end()) return found->second;
    }
    auto ids = word_ids(word);
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= clip_vocabulary::kMaxCachedWords) cache.clear();
    cache.emplace(word, ids);
    return ids;
  }
};

ClipTokenizer::ClipTokenizer(std::unique_ptr<Vocabulary> vocabulary) : vocabulary_(std::move(vocabulary)) {}
ClipTokenizer::ClipTokenizer(ClipTokenizer&&) noexcept = default;
ClipTokenizer& ClipTokenizer::operator=(ClipTokenizer&&) noexcept = default;
ClipTokenizer::~ClipTokenizer() = default;

ClipTokenizer ClipTokenizer::from_openai_gz(const std::string& path) {
  using namespace clip_vocabulary;
  const std::string shown = "CLIP vocabulary " + path;
  const auto merges = parse_merges(gunzip(read_bounded_file(path, "CLIP vocabulary"), shown), shown, false);
  if (merges.size() < kMerges)
    fail(shown + " holds " + std::to_string(merges.size()) + " merges; CLIP's vocabulary has " +
         std::to_string(kMerges) + " (is it OpenAI's bpe_simple_vocab_16e6.txt.gz?)");
  auto vocabulary = std::make_unique<Vocabulary>();
  vocabulary->kind = ClipVocabularyKind::OpenAiMerges;
  vocabulary->source = path;
  vocabulary->add_merges(merges);
  // The ids: byte symbols in bytes_to_unicode's order, the same with "</w>", the merges, the two
  // special tokens.
  int64_t id = 0;
  for (int end_of_word = 0; end_of_word < 2; ++end_of_word)
    for (int i = 0; i < 256; ++i) vocabulary->set_id(byte_symbol(byte_alphabet().order[i], end_of_word), id++);
  for (const auto& [left, right] : merges) vocabulary->set_id(left + right, id++);
  vocabulary->set_id(kStartOfText, id++);
  vocabulary->set_id(kEndOfText, id++);
  vocabulary->finish();
  return ClipTokenizer(std::move(vocabulary));
}

ClipTokenizer ClipTokenizer::from_hf_files(const std::string& vocab_json, const std::string& merges_txt) {
  using namespace clip_vocabulary;
  const std::string merges_shown = "CLIP merges file " + merges_txt;
  const auto merges = parse_merges(read_bounded_file(merges_txt, "CLIP merges file"), merges_shown, true);
  if (merges.empty()) fail(merges_shown + " holds no merges");
  const std::string vocab_shown = "CLIP vocabulary " + vocab_json;
  nlohmann::json entries;
  try {
    entries = read_json_file(vocab_json, vocab_shown, kMaxFileBytes);
  } catch (const std::invalid_argument& error) {
    fail(error.what());
  }
  if (!entries.is_object()) fail(vocab_shown + " is not a JSON object of symbol: id");
  if (entries.size() > kMaxVocabularyEntries)
    fail(vocab_shown + " has " + std::to_string(entries.size()) + " entries, more than " +
         std::to_string(kMaxVocabularyEntries));
  auto vocabulary = std::make_unique<Vocabulary>();
  vocabulary->kind = ClipVocabularyKind::HuggingFaceFiles;
  vocabulary->source = vocab_json + " + " + merges_txt;
  vocabulary->add_merges(merges);
  std::unordered_map<int64_t, std::string> seen_ids;
  for (const auto& [symbol, value] : entries.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= kMaxTokenId)
      fail(vocab_shown + ": the id of '" + excerpt(symbol, 80) + "' is " + excerpt(value.dump(), 80) +
           ", not an integer in [0, " + std::to_string(kMaxTokenId) + ")");
    const int64_t id = value.get<int64_t>();
    const auto [previous, added] = seen_ids.emplace(id, symbol);
    if (!added)
      fail(vocab_shown + " gives id " + std::to_string(id) + " to both '" + excerpt(previous->second, 80) + "' and '" +
           excerpt(symbol, 80) + "'");
    vocabulary->set_id(symbol, id);
  }
  // Every symbol BPE can produce needs an id: the byte symbols, each merge's result, the specials.
  const auto require = [&](const std::string& symbol, const std::string& why) {
    const auto found = vocabulary->symbol_index.find(symbol);
    if (found == vocabulary->symbol_index.end() || vocabulary->symbol_id[found->second] < 0)
      fail(vocab_shown + " lacks '" + excerpt(symbol, 80) + "' (" + why + "): it does not belong with " + merges_txt);
  };
  for (int b = 0; b < 256; ++b) {
    require(byte_symbol(b, false), "the symbol of byte " + std::to_string(b));
    require(byte_symbol(b, true), "the symbol of byte " + std::to_string(b) + " ending a word");
  }
  for (size_t rank = 0; rank < merges.size(); ++rank)
    require(merges[rank].first + merges[rank].second, "the result of merge " + std::to_string(rank + 1));
  require(kStartOfText, "the start token");
  require(kEndOfText, "the end token");
  vocabulary->finish();
  return ClipTokenizer(std::move(vocabulary));
}

ClipTokenizer ClipTokenizer::from_hf_folder(const std::string& folder) {
  const std::filesystem::path root(folder);
  return from_hf_files((root / "vocab.json").string(), (root / "merges.txt").string());
}

ClipTokenizer ClipTokenizer::bundled() {
  std::string path;
  try {
    path = asset_path("clip/bpe_simple_vocab_16e6.txt.gz");
  } catch (const std::runtime_error& error) {
    clip_vocabulary::fail(std::string("CLIP's bundled vocabulary is missing: ") + error.what());
  }
  return from_openai_gz(path);
}

ClipTokenizer ClipTokenizer::for_model(const std::string& model_path) {
  std::error_code error;
  const std::filesystem::path model(model_path);
  auto folder = std::filesystem::is_directory(model, error) ? model : model.parent_path();
  if (folder.empty()) folder = ".";
  const auto vocab = folder / "vocab.json", merges = folder / "merges.txt";
  const bool has_vocab = std::filesystem::exists(vocab, error), has_merges = std::filesystem::exists(merges, error);
  if (has_vocab && has_merges) return from_hf_files(vocab.string(), merges.string());
  if (has_vocab || has_merges)
    clip_vocabulary::fail("the folder " + folder.string() + " has " +
                          (has_vocab ? "vocab.json but no merges.txt" : "merges.txt but no vocab.json") +
                          ": a Hugging Face CLIP tokenizer needs both (add the missing one, or remove the other to use "
                          "OpenAI's bundled vocabulary)");
  return bundled();
}

ClipVocabularyKind ClipTokenizer::vocabulary_kind() const { return vocabulary_->kind; }
const std::string& ClipTokenizer::vocabulary_source() const { return vocabulary_->source; }
int64_t ClipTokenizer::vocab_size() const { return vocabulary_->size; }
int64_t ClipTokenizer::start_token() const { return vocabulary_->start_id; }
int64_t ClipTokenizer::end_token() const { return vocabulary_->end_id; }

std::vector<int64_t> ClipTokenizer::encode(const std::string& utf8) const {
  size_t bad = 0;
  const auto text = decode_utf8(utf8, &bad);
  if (!text)
    clip_vocabulary::fail("a prompt is not valid UTF-8 at byte " + std::to_string(bad) + " (after '" +
                          prompt_excerpt(utf8.substr(0, bad)) + "'); save the prompts as UTF-8");
  std::vector<int64_t> ids;
  for (const auto& word : clip_text::split_words(clip_text::clean_and_lower(*text))) {
    const auto word_ids = vocabulary_->cached_word_ids(encode_utf8(word));
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  }
  return ids;
}

std::string ClipTokenizer::decode(const std::vector<int64_t>& ids) const {
  const auto& alphabet = clip_vocabulary::byte_alphabet();
  std::string bytes;
  for (const int64_t id : ids) {
    const auto found = vocabulary_->id_symbol.find(id);
    if (found == vocabulary_->id_symbol.end())
      clip_vocabulary::fail("token id " + std::to_string(id) + " is not in the CLIP vocabulary " + vocabulary_->source);
    const std::string& symbol = vocabulary_->symbols[found->second];
    const auto characters = decode_utf8(symbol);  // symbols are UTF-8: the files were checked
    for (const char32_t c : characters.value_or(U"")) {
      const auto byte = alphabet.char_to_byte.find(c);
      if (byte == alphabet.char_to_byte.end())
        clip_vocabulary::fail("token id " + std::to_string(id) + " ('" + excerpt(symbol, 80) +
                              "') has a character outside CLIP's byte alphabet");
      bytes += char(byte->second);
    }
  }
  const std::u32string text = decode_utf8_replacing(bytes);
  static const std::u32string kEndOfWord = U"</w>";
  std::u32string spaced;
  spaced.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kEndOfWord.size(), kEndOfWord) == 0) {
      spaced += U' ';
      i += kEndOfWord.size();
    } else {
      spaced += text[i++];
    }
  }
  return encode_utf8(spaced);
}

std::vector<std::vector<int64_t>> ClipTokenizer::tokenize(const std::vector<std::string>& prompts,
                                                          size_t context_length) const {
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(prompts.size());
  for (size_t index = 0; index < prompts.size(); ++index) {
    const auto ids = encode(prompts[index]);
    const size_t tokens = ids.size() + 2;
    if (tokens > context_length)
      throw ClipPromptTooLong("prompt " + std::to_string(index + 1) + " ('" + prompt_excerpt(prompts[index]) +
                                  "') has " + std::to_string(tokens) +
                                  " tokens with its start and end tokens, more than CLIP's context of " +
                                  std::to_string(context_length) + " (clip.tokenize refuses it too): shorten it",
                              index, tokens, context_length);
    std::vector<int64_t> row(context_length, 0);
    row[0] = start_token();
    std::copy(ids.begin(), ids.end(), row.begin() + 1);
    row[tokens - 1] = end_token();
    rows.push_back(std::move(row));
  }
  return rows;
}

torch::Tensor ClipTokenizer::tokenize_tensor(const std::vector<std::string>& prompts, size_t context_length) const {
  return token_rows_tensor(tokenize(prompts, context_length), context_length);
}

int64_t ClipTokenizer::prompt_tokens(const torch::Tensor& row) const { return row.ne(0).sum().item<int64_t>(); }

}  // namespace attnscope
