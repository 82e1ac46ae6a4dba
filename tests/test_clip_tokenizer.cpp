// CLIP's tokenizer against the independent reference (tests/python/reference_clip_tokenizer.py, from
// OpenAI's simple_tokenizer.py and clip.tokenize) on the cases of make_clip_tokenizer_cases.py: ids equal
// exactly for both vocabulary sources, every cleaning step alone (html.unescape, str.lower, the split
// classes, bytes.decode with replacement) against Python on every code point or thousands of strings,
// the refusals (a prompt over 77 tokens, corrupt vocabulary files, invalid UTF-8), and the speed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/clip_text.h"
#include "core/clip_tokenizer.h"
#include "core/html_unescape.h"
#include "core/unicode_text.h"

namespace attnscope {
namespace test_clip_tokenizer {

namespace fs = std::filesystem;

const std::string kCases = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/clip_tokenizer_cases/";

const nlohmann::json& cases() {
  static const nlohmann::json parsed = [] {
    std::ifstream in(kCases + "cases.json");
    if (!in) throw std::runtime_error("missing " + kCases + "cases.json (run tests/python/make_all_fixtures.sh)");
    return nlohmann::json::parse(in);
  }();
  return parsed;
}

const ClipTokenizer& openai_tokenizer() {
  static const ClipTokenizer tokenizer = ClipTokenizer::bundled();
  return tokenizer;
}

// A string with its non-ASCII and control characters as \u escapes, for failure messages.
std::string shown(const std::string& utf8) {
  const auto text = decode_utf8(utf8);
  if (!text) return "<invalid UTF-8>";
  std::ostringstream out;
  for (char32_t c : *text) {
    if (c >= 0x20 && c < 0x7F) {
      out << char(c);
    } else {
      char buffer[16];
      std::snprintf(buffer, sizeof buffer, c > 0xFFFF ? "\\U%08X" : "\\u%04X", unsigned(c));
      out << buffer;
    }
  }
  return out.str();
}

std::u32string u32(const std::string& utf8) {
  auto text = decode_utf8(utf8);
  if (!text) throw std::runtime_error("fixture string is not UTF-8: " + shown(utf8));
  return *text;
}

std::vector<int64_t> ids_of(const nlohmann::json& list) { return list.get<std::vector<int64_t>>(); }

TEST(ClipTokenizer, BundledVocabularyHasClipsIds) {
  const auto& tokenizer = openai_tokenizer();
  EXPECT_EQ(tokenizer.vocabulary_kind(), ClipVocabularyKind::OpenAiMerges);
  EXPECT_EQ(tokenizer.vocab_size(), cases().at("vocab_size").get<int64_t>());
  EXPECT_EQ(tokenizer.vocab_size(), 49408);
  EXPECT_EQ(tokenizer.start_token(), cases().at("start").get<int64_t>());
  EXPECT_EQ(tokenizer.end_token(), cases().at("end").get<int64_t>());
  EXPECT_NE(tokenizer.vocabulary_source().find("clip/bpe_simple_vocab_16e6.txt.gz"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(tokenizer.vocabulary_source()).parent_path() / "LICENSE"));
}

// Each step on every prompt: the cleaned text, the split, the ids, and decode.
TEST(ClipTokenizer, EncodeEqualsReferenceOnTheCorpus) {
  const auto& tokenizer = openai_tokenizer();
  size_t checked = 0;
  for (const auto& prompt : cases().at("prompts")) {
    const std::string text = prompt.at("text");
    SCOPED_TRACE("prompt '" + shown(text) + "'");
    const auto cleaned = clip_text::clean_and_lower(u32(text));
    ASSERT_EQ(shown(encode_utf8(cleaned)), shown(prompt.at("cleaned").get<std::string>()));
    std::vector<std::string> words;
    for (const auto& word : clip_text::split_words(cleaned)) words.push_back(shown(encode_utf8(word)));
    std::vector<std::string> expected_words;
    for (const auto& word : prompt.at("words")) expected_words.push_back(shown(word.get<std::string>()));
    ASSERT_EQ(words, expected_words);
    const auto ids = tokenizer.encode(text);
    ASSERT_EQ(ids, ids_of(prompt.at("ids")));
    EXPECT_EQ(shown(tokenizer.decode(ids)), shown(prompt.at("decoded").get<std::string>()));
    ++checked;
  }
  EXPECT_GT(checked, 500u);
}

TEST(ClipTokenizer, HuggingFaceFilesGiveTheSameIds) {
  const auto tokenizer = ClipTokenizer::from_hf_folder(kCases + "hf");
  EXPECT_EQ(tokenizer.vocabulary_kind(), ClipVocabularyKind::HuggingFaceFiles);
  EXPECT_EQ(tokenizer.vocab_size(), 49408);
  EXPECT_EQ(tokenizer.start_token(), 49406);
  EXPECT_EQ(tokenizer.end_token(), 49407);
  for (const auto& prompt : cases().at("prompts")) {
    const std::string text = prompt.at("text");
    ASSERT_EQ(tokenizer.encode(text), ids_of(prompt.at("ids_hf"))) << "prompt '" << shown(text) << "'";
  }
  const auto chosen = ClipTokenizer::for_model(kCases + "hf/model.safetensors");  // the files beside a model
  EXPECT_EQ(chosen.vocabulary_kind(), ClipVocabularyKind::HuggingFaceFiles);
  EXPECT_EQ(ClipTokenizer::for_model(kCases + "hf").vocabulary_kind(), ClipVocabularyKind::HuggingFaceFiles);
}

// Merges out of learned order: each pass takes every occurrence of one pair before the pairs it makes.
TEST(ClipTokenizer, MergesOutOfLearnedOrderFollowBpePasses) {
  const auto tokenizer = ClipTokenizer::from_hf_folder(kCases + "synthetic");
  for (const auto& item : cases().at("synthetic"))
    EXPECT_EQ(tokenizer.encode(item.at("text").get<std::string>()), ids_of(item.at("ids"))) << item.at("text");
}

TEST(ClipTokenizer, TokenizeRowsAndRefusalsAsClipTokenize) {
  const auto& tokenizer = openai_tokenizer();
  std::vector<std::string> fitting;
  std::vector<std::vector<int64_t>> rows;
  size_t refused = 0;
  for (const auto& prompt : cases().at("prompts")) {
    const std::string text = prompt.at("text");
    const auto tokens = prompt.at("tokens").get<size_t>();
    if (!prompt.at("row").is_null()) {
      fitting.push_back(text);
      rows.push_back(ids_of(prompt.at("row")));
      continue;
    }
    ++refused;
    // The refused prompt in the middle of a list: its place, its count, its first words.
    try {
      tokenizer.tokenize({"a photo", text, "a dog"});
      ADD_FAILURE() << "not refused: '" << shown(text) << "'";
    } catch (const ClipPromptTooLong& error) {
      EXPECT_EQ(error.index, 1u);
      EXPECT_EQ(error.tokens, tokens);
      EXPECT_EQ(error.context_length, kClipContextLength);
      const std::string message = error.what();
      EXPECT_NE(message.find("'" + prompt_excerpt(text) + "'"), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(tokens) + " tokens"), std::string::npos) << message;
      EXPECT_NE(message.find("prompt 2"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  EXPECT_GE(refused, 5u);
  EXPECT_EQ(tokenizer.tokenize(fitting), rows);
  const auto tensor = tokenizer.tokenize_tensor(fitting);
  ASSERT_EQ(tensor.sizes(), (std::vector<int64_t>{int64_t(fitting.size()), 77}));
  ASSERT_EQ(tensor.dtype(), torch::kInt64);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t k = 0; k < 77; ++k) ASSERT_EQ(tensor[r][k].item<int64_t>(), rows[r][k]);
  // Exactly 77 tokens fits, 78 does not (the corpus has prompts of 75 and 76 BPE tokens).
  bool saw_77 = false, saw_78 = false;
  for (const auto& prompt : cases().at("prompts")) {
    saw_77 |= prompt.at("tokens") == 77 && !prompt.at("row").is_null();
    saw_78 |= prompt.at("tokens") == 78 && prompt.at("row").is_null();
  }
  EXPECT_TRUE(saw_77 && saw_78);
}

// 1,000 prompts of about ten words, from a fresh tokenizer (an empty cache).
TEST(ClipTokenizer, ThousandPromptsTokenizeWellUnderASecond) {
  const auto tokenizer = ClipTokenizer::bundled();
  std::vector<std::string> prompts;
  for (const auto& prompt : cases().at("bulk")) prompts.push_back(prompt.at("text"));
  const auto started = std::chrono::steady_clock::now();
  const auto rows = tokenizer.tokenize(prompts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "tokenize: " << prompts.size() << " prompts in " << seconds * 1000 << " ms\n";
  EXPECT_LT(seconds, 1.0);  // about 20 ms here; AddressSanitizer makes it a few times slower
  const auto& bulk = cases().at("bulk");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto ids = ids_of(bulk[p].at("ids"));
    ASSERT_EQ(std::vector<int64_t>(rows[p].begin() + 1, rows[p].begin() + 1 + ids.size()), ids) << prompts[p];
  }
}

TEST(ClipTokenizer, EncodeFromManyThreadsAgrees) {
  const auto& tokenizer = openai_tokenizer();
  const auto& bulk = cases().at("bulk");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t p = t; p < bulk.size(); p += 2)
        mismatches[t] += tokenizer.encode(bulk[p].at("text").get<std::string>()) != ids_of(bulk[p].at("ids"));
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(ClipTokenizer, HtmlUnescapeEqualsPython) {
  size_t checked = 0;
  for (const auto& item : cases().at("html")) {
    const std::string text = item.at("text");
    ASSERT_EQ(shown(encode_utf8(html_unescape(u32(text)))), shown(item.at("unescaped").get<std::string>()))
        << "html.unescape('" << shown(text) << "')";
    ++checked;
  }
  EXPECT_GT(checked, 4000u);
}

TEST(ClipTokenizer, LowerEqualsPythonInFinalSigmaContexts) {
  for (const auto& item : cases().at("lower")) {
    const std::string text = item.at("text");
    ASSERT_EQ(shown(encode_utf8(python_lower(u32(text)))), shown(item.at("lowered").get<std::string>()))
        << "'" << shown(text) << "'.lower()";
  }
}

TEST(ClipTokenizer, ReplacingDecoderEqualsPython) {
  for (const auto& item : cases().at("replace")) {
    const std::string hex = item.at("bytes");
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += char(std::stoi(hex.substr(i, 2), nullptr, 16));
    ASSERT_EQ(shown(encode_utf8(decode_utf8_replacing(bytes))), shown(item.at("text").get<std::string>()))
        << "bytes " << hex;
  }
}

TEST(ClipTokenizer, DecodeEqualsReference) {
  const auto& tokenizer = openai_tokenizer();
  for (const auto& item : cases().at("decode"))
    ASSERT_EQ(shown(tokenizer.decode(ids_of(item.at("ids")))), shown(item.at("text").get<std::string>()))
        << item.at("ids").dump();
}

// Every code point: the split classes against the regex module, str.lower, str.isspace and the
// regex module's \s against Python, and Final_Sigma's contexts where this Python's Unicode assigns the
// code point (utf8proc's Unicode may be newer; the count of such code points that differ is printed).
TEST(ClipTokenizer, UnicodePropertiesEqualPythonOnEveryCodePoint) {
  std::ifstream in(kCases + "unicode_tables.json");
  ASSERT_TRUE(in) << "missing unicode_tables.json";
  const auto tables = nlohmann::json::parse(in);
  const auto expand = [](const nlohmann::json& runs) {
    std::vector<char> value(0x110000, '-');
    for (size_t r = 0; r < runs.size(); ++r) {
      const auto start = runs[r][0].get<size_t>();
      const auto end = r + 1 < runs.size() ? runs[r + 1][0].get<size_t>() : size_t(0x110000);
      for (size_t cp = start; cp < end; ++cp) value[cp] = runs[r][1].get<std::string>()[0];
    }
    return value;
  };
  const auto split = expand(tables.at("split_class"));
  const auto sigma = expand(tables.at("sigma_context"));
  std::map<char32_t, std::u32string> lower;
  for (const auto& entry : tables.at("lower")) {
    std::u32string mapped;
    for (const auto& c : entry[1]) mapped += char32_t(c.get<uint32_t>());
    lower[char32_t(entry[0].get<uint32_t>())] = mapped;
  }
  const auto members = [](const nlohmann::json& list) {
    std::vector<bool> in(0x110000, false);
    for (const auto& cp : list) in[cp.get<size_t>()] = true;
    return in;
  };
  const auto isspace = members(tables.at("isspace")), regex_space = members(tables.at("regex_space"));
  std::map<char, std::vector<bool>> letters;
  for (const auto& [letter, list] : tables.at("pattern_letters").items()) letters[letter[0]] = members(list);
  size_t newer_unicode = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    char hex[16];
    std::snprintf(hex, sizeof hex, "U+%04X", unsigned(cp));
    const char kind = "LNOS"[int(clip_text::split_class(cp))];
    ASSERT_EQ(kind, split[cp]) << hex << " split class";
    const auto found = lower.find(cp);
    ASSERT_EQ(python_lower(std::u32string(1, cp)), found == lower.end() ? std::u32string(1, cp) : found->second)
        << hex << " lower";
    ASSERT_EQ(python_isspace(cp), bool(isspace[cp])) << hex << " isspace";
    ASSERT_EQ(regex_module_space(cp), bool(regex_space[cp])) << hex << " regex \\s";
    for (const auto& [letter, matches] : letters)
      ASSERT_EQ(clip_text::matches_pattern_letter(cp, letter), bool(matches[cp])) << hex << " matching " << letter;
    const char context = "ICO"[int(sigma_context(cp))];
    if (sigma[cp] == '?')
      newer_unicode += context != 'O';
    else
      ASSERT_EQ(context, sigma[cp]) << hex << " Final_Sigma context";
  }
  std::cout << "Final_Sigma: " << newer_unicode << " code points unassigned in Python "
            << tables.at("python").get<std::string>() << " (Unicode " << tables.at("unicodedata").get<std::string>()
            << ") are cased or case-ignorable in utf8proc's Unicode\n";
}

TEST(ClipTokenizer, RefusesCorruptVocabularyFiles) {
  for (const auto& item : cases().at("bad_files")) {
    const std::string path = kCases + item.at("files")[0].get<std::string>();
    const std::string expect = item.at("expect");
    SCOPED_TRACE(path);
    try {
      if (item.at("kind") == "openai_gz")
        ClipTokenizer::from_openai_gz(path);
      else
        ClipTokenizer::from_hf_folder(path);
      ADD_FAILURE() << "accepted";
    } catch (const ClipTokenizerError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(expect), std::string::npos) << message;
      EXPECT_NE(message.find(fs::path(path).filename().string()), std::string::npos) << message;
      EXPECT_LT(message.size(), 600u) << message;
    }
  }
  // Beside a model, one of the two Hugging Face files alone is refused rather than ignored.
  try {
    ClipTokenizer::for_model(kCases + "bad/merges_missing/model.safetensors");
    ADD_FAILURE() << "a folder with vocab.json alone accepted";
  } catch (const ClipTokenizerError& error) {
    EXPECT_NE(std::string(error.what()).find("vocab.json but no merges.txt"), std::string::npos) << error.what();
  }
  // A folder with neither: the bundled vocabulary.
  const auto bundled = ClipTokenizer::for_model(kCases + "bad/no_such_model.safetensors");
  EXPECT_EQ(bundled.vocabulary_kind(), ClipVocabularyKind::OpenAiMerges);
}

TEST(ClipTokenizer, RefusesPromptsThatAreNotUtf8) {
  const auto& tokenizer = openai_tokenizer();
  const std::vector<std::pair<std::string, size_t>> bad = {
      {"a photo\xff of", 7}, {"\xc0\xaf", 0}, {"ok \xed\xa0\x80", 3}, {"end \xe2\x82", 4}, {"\xf4\x90\x80\x80", 0}};
  for (const auto& [text, offset] : bad) {
    try {
      tokenizer.encode(text);
      ADD_FAILURE() << "accepted " << shown(text);
    } catch (const ClipTokenizerError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("not valid UTF-8 at byte " + std::to_string(offset)), std::string::npos) << message;
    }
    EXPECT_THROW(tokenizer.tokenize({"fine", text}), ClipTokenizerError);
  }
  EXPECT_THROW(tokenizer.decode({49408}), ClipTokenizerError);
  EXPECT_THROW(tokenizer.decode({-1}), ClipTokenizerError);
}

TEST(ClipTokenizer, PromptExcerptKeepsTheFirstWordsOnOneLine) {
  EXPECT_EQ(prompt_excerpt("a photo of a dog"), "a photo of a dog");
  EXPECT_EQ(prompt_excerpt("two\nlines"), "two lines");
  const std::string words = "a photo of a very long prompt that goes on and on and on about a dog";
  EXPECT_EQ(prompt_excerpt(words), "a photo of a very long prompt that goes on and on and on...");
  const std::string cjk = "\xe4\xb8\x80";  // one character, 3 bytes
  std::string long_word;
  for (int i = 0; i < 40; ++i) long_word += cjk;
  const auto cut = prompt_excerpt(long_word);
  EXPECT_EQ(cut, long_word.substr(0, 60) + "...");
  EXPECT_TRUE(decode_utf8(cut).has_value());
}

}  // namespace test_clip_tokenizer
}  // namespace attnscope
