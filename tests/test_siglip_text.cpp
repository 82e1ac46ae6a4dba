// SigLIP's text side against an independent reference (tests/python/make_siglip_text_cases.py): the
// SentencePiece tokenizers by the rules of the tool each layout comes from (transformers' SiglipTokenizer
// with T5's vocabulary, SigLIP 2's Gemma vocabulary, open_clip's canonicalize rules), the text towers of a
// transformers SiglipModel folder and an open_clip folder (no causal mask, the last position, a projection
// with a bias), and the sigmoid zero-shot scores with logit_bias, in process and through `analyze`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/clip_maps.h"
#include "core/npy.h"
#include "core/sentencepiece_tokenizer.h"
#include "models/clip_zero_shot.h"
#include "models/cpu_threads.h"
#include "models/text_tokenizer.h"
#include "tests/cli_process.h"
#include "tests/numeric_bounds.h"
#include "tests/test_folder.h"
#include "views/clip_prompts.h"

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace attnscope {
namespace test_siglip_text {

namespace fs = std::filesystem;

const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/siglip_text_cases/";

const nlohmann::json& cases() {
  static const nlohmann::json parsed = [] {
    std::ifstream in(kFolder + "cases.json");
    if (!in) throw std::runtime_error("missing " + kFolder + "cases.json");
    return nlohmann::json::parse(in);
  }();
  return parsed;
}

torch::Tensor case_file(const nlohmann::json& c, const char* key) {
  return read_npy(kFolder + c.at("files").at(key).get<std::string>());
}

LoadedModel load_case(const nlohmann::json& c) {
  ArchOverrides overrides;  // the open_clip trunk is unnamed: its heads are given, as a user would
  overrides.values["heads"] = c.at("heads").get<int>();
  return load_model(kFolder + c.at("model").get<std::string>(), overrides, torch::kCPU);
}

std::vector<std::string> prompts_of(const nlohmann::json& c) { return c.at("prompts").get<std::vector<std::string>>(); }

// Float32 sums along the text tower's path (per block the LayerNorms' and projections' W terms, the
// scores' d, the mixing's L, the MLP's hidden; then the final norm and the head), times the unit
// roundoff: the first-order bound on the embedding's error relative to its largest value (as
// tests/test_clip_text.cpp bounds CLIP's).
double text_bound(const ClipTextArch& arch) {
  const double width = arch.width, head = double(arch.width) / arch.heads;
  return (arch.layers * (5 * width + head + arch.context_length + arch.mlp_hidden) + 2 * width) / double(1 << 24);
}

double relative_error(const torch::Tensor& ours, const torch::Tensor& reference) {
  return max_abs_difference(ours, reference) / reference.abs().max().item<double>();
}

TEST(SiglipTokenizer, EveryRulesetGivesTheReferenceIds) {
  ASSERT_EQ(cases().at("cases").size(), 3u);
  std::set<std::string> rules;
  for (const auto& c : cases().at("cases")) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    const bool open_clip = c.at("rules") == "OpenClip";
    const SentencePieceTokenizer tokenizer =
        SentencePieceTokenizer::for_model(kFolder + c.at("model").get<std::string>(), open_clip);
    rules.insert(c.at("rules").get<std::string>());
    EXPECT_EQ(tokenizer.vocab_size(), c.at("vocab_size").get<int64_t>());
    const torch::Tensor ids = tokenizer.tokenize_tensor(prompts_of(c), c.at("context").get<size_t>());
    const torch::Tensor expected = case_file(c, "ids");
    ASSERT_EQ(ids.sizes(), expected.sizes());
    for (int64_t row = 0; row < ids.size(0); ++row)
      EXPECT_TRUE(torch::equal(ids[row], expected[row]))
          << "prompt '" << prompts_of(c)[size_t(row)] << "': " << ids[row] << " vs " << expected[row];
    EXPECT_EQ(tokenizer.prompt_tokens(ids[0]),
              expected[0].eq(tokenizer.end_token()).nonzero()[0][0].item<int64_t>() + 1);
  }
  EXPECT_EQ(rules, (std::set<std::string>{"TransformersSiglip", "TransformersGemma", "OpenClip"}));
}

TEST(SiglipTokenizer, LongPromptsAndMissingVocabulariesAreRefusedNamingWhy) {
  const SentencePieceTokenizer tokenizer = SentencePieceTokenizer::for_model(kFolder + "hf_siglip2", false);
  std::string long_prompt;
  for (int i = 0; i < 10; ++i) long_prompt += "a photo of a cat ";
  try {
    tokenizer.tokenize({"a cat", long_prompt}, 16);
    ADD_FAILURE() << "a prompt longer than the context was accepted";
  } catch (const ClipPromptTooLong& error) {
    EXPECT_EQ(error.index, 1u);
    EXPECT_GT(error.tokens, 16u);
    EXPECT_CONTAINS(error.what(), "more than the text tower's context of 16");
  }
  try {
    SentencePieceTokenizer::for_model(kFolder + "no_vocabulary", false);
    ADD_FAILURE() << "a folder without a SentencePiece model gave a tokenizer";
  } catch (const ClipTokenizerError& error) {
    EXPECT_CONTAINS(error.what(), "no spiece.model (SigLIP) or tokenizer.model");
  }
  TestFolder temp("siglip_vocabulary");
  const fs::path bogus = temp.path() / "spiece.model";
  std::ofstream(bogus) << "not a protobuf at all";
  EXPECT_THROW(SentencePieceTokenizer::from_file(bogus.string(), SentencePieceRules::TransformersSiglip),
               ClipTokenizerError);
  // The Gemma vocabulary is not the kind SiglipTokenizer reads.
  EXPECT_THROW(
      SentencePieceTokenizer::from_file(kFolder + "hf_siglip2/tokenizer.model", SentencePieceRules::TransformersSiglip),
      ClipTokenizerError);
}

// A config that contradicts the weights leaves the image side open and says why the text side is not.
TEST(SiglipText, AConfigThatContradictsTheWeightsIsSaid) {
  TestFolder temp("siglip_config");
  const fs::path folder = temp.path() / "hf_siglip";
  fs::create_directories(folder);
  for (const char* file : {"model.safetensors", "spiece.model", "config.json"})
    fs::copy_file(kFolder + "hf_siglip/" + file, folder / file);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(folder / "config.json"));
  config["text_config"]["num_hidden_layers"] = 5;
  std::ofstream(folder / "config.json") << config.dump();
  LoadedModel model = load_model(folder.string(), {}, torch::kCPU);
  EXPECT_TRUE(model.text_tower.is_empty());
  EXPECT_CONTAINS(model.text_tower_absent, "text_config.num_hidden_layers is 5");
  EXPECT_CONTAINS(model.text_tower_absent, "has 2 layers");
  try {
    model.text("zero-shot");
    ADD_FAILURE() << "a text tower that cannot be used was used";
  } catch (const std::invalid_argument& error) {
    EXPECT_CONTAINS(error.what(), "num_hidden_layers");
  }
}

TEST(SiglipText, TowersAndSigmoidScoresMatchTheReference) {
  configure_threads(2);
  std::set<std::string> layouts;
  for (const auto& c : cases().at("cases")) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_case(c);
    ASSERT_FALSE(model.text_tower.is_empty()) << model.text_tower_absent;
    const ClipTextArch& arch = model.text_tower->arch();
    layouts.insert(to_string(arch.source_layout));
    EXPECT_FALSE(arch.causal);
    EXPECT_EQ(arch.pooling, TextPooling::LastToken);
    EXPECT_TRUE(arch.projection_bias);
    EXPECT_EQ(arch.scores, TextScores::Sigmoid);
    EXPECT_EQ(arch.tokenizer, TextTokenizerKind::SentencePiece);
    EXPECT_EQ(arch.activation, MlpActivation::GeluTanh);
    EXPECT_EQ(arch.context_length, c.at("context").get<int>());
    EXPECT_NEAR(model.text_tower->logit_bias.item<double>(), c.at("logit_bias").get<double>(), 1e-6);

    // The prompts as the analyses tokenize them (the vocabulary beside the model, by its layout's rules).
    std::vector<PromptLine> lines;
    for (const std::string& prompt : prompts_of(c)) lines.push_back({prompt, lines.size() + 1});
    const TokenizedPrompts tokenized = tokenize_prompts(model, lines, "zero-shot", true);
    EXPECT_TRUE(torch::equal(tokenized.ids, case_file(c, "ids")));

    const double bound = text_bound(arch);
    for (const auto& [reading, moved] : cases().at("wrong_readings").at(c.at("name").get<std::string>()).items())
      EXPECT_GT(moved.get<double>(), bound) << "the reading '" << reading << "' is not told apart";
    const ClipZeroShot scores = clip_zero_shot(model, case_file(c, "image"), tokenized.ids);
    EXPECT_LT(relative_error(scores.text_embeddings, case_file(c, "text_embeddings")), bound);
    // The vision tower's own parity is tests/test_backbones_2026.cpp's; here its embedding feeds the scores.
    EXPECT_LT(relative_error(scores.image_embedding, case_file(c, "image_embedding")), 1e-4);
    // logit = exp(s) cos + b: the cosines' error times exp(s), both embeddings' bounds.
    const double scale = std::exp(c.at("logit_scale").get<double>());
    EXPECT_LT(max_abs_difference(scores.logits, case_file(c, "logits")), scale * (2 * bound + 2e-4));
    EXPECT_LT(max_abs_difference(scores.probabilities, torch::sigmoid(scores.logits)), 1e-7) << "sigmoid per prompt";
    EXPECT_LT(max_abs_difference(scores.probabilities, case_file(c, "probabilities")), scale * (bound + 1e-4));
  }
  EXPECT_EQ(layouts, (std::set<std::string>{"hf-siglip", "open-clip"}));
}

// LeGrad's compute_legrad_siglip: the sum over the last two blocks of the pool attention's clamped
// gradient, the 'a photo of a' correction, min-max, then the upsampling.
TEST(SiglipText, LegradMatchesTheAuthorsSiglipMap) {
  configure_threads(2);
  for (const auto& c : cases().at("cases")) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_case(c);
    const TokenizedPrompts prompt = tokenize_prompts(model, {{prompts_of(c).front(), 1}}, "legrad", false);
    const LegradMap map = legrad_clip(model, case_file(c, "image"), prompt.ids);
    EXPECT_EQ(map.start_block, 0);
    EXPECT_EQ(map.corrected_patches, c.at("legrad_corrected").get<int64_t>());
    // Float32 sums along the vision tower (the patch embedding, per block 5 W + d + T + hidden) and
    // the pool, twice for the gradient's way back.
    const VitArch& arch = model.vit_arch();
    const double width = arch.embed_dim, tokens = 16;
    double path = 3.0 * arch.patch_size * arch.patch_size + 3 * width;
    for (const BlockArch& block : arch.blocks) path += 5 * width + width / arch.heads + tokens + block.mlp_hidden;
    const double bound = 2 * path / double(1 << 24);
    EXPECT_LT(relative_error(map.raw, case_file(c, "legrad_raw")), bound);
    EXPECT_LT(max_abs_difference(map.upsampled, case_file(c, "legrad_upsampled")), bound);
    EXPECT_EQ(map.upsampled.size(0), 64);
  }
}

TEST(SiglipText, ZeroShotCommandWritesSigmoidScoresAndTheTokenizerUsed) {
  const auto& c = cases().at("cases").at(0);  // transformers' SiglipModel with spiece.model
  TestFolder temp("siglip_zero_shot");
  {
    std::ofstream prompts(temp.path() / "prompts.txt");
    for (const std::string& prompt : prompts_of(c)) prompts << prompt << "\n";
  }
  const fs::path out = temp.path() / "out";
  const CommandRun run =
      run_attnscope("analyze --device cpu --analysis zero-shot --model '" + kFolder + c.at("model").get<std::string>() +
                        "' --image '" + std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png' --prompts '" +
                        (temp.path() / "prompts.txt").string() + "' --out '" + out.string() + "'",
                    temp.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(torch::equal(read_npy((out / "tokens.npy").string()), case_file(c, "ids")));
  EXPECT_LT(relative_error(read_npy((out / "text_embeddings.npy").string()), case_file(c, "text_embeddings")), 1e-4);
  std::ifstream summary_file(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_file);
  EXPECT_EQ(summary.at("scores"), "sigmoid per prompt (with logit_bias)");
  EXPECT_NEAR(summary.at("logit_bias").get<double>(), c.at("logit_bias").get<double>(), 1e-6);
  EXPECT_CONTAINS(summary.at("text").at("vocabulary").get<std::string>(),
                  "spiece.model (transformers' SiglipTokenizer)");
  EXPECT_EQ(summary.at("text").at("context_length"), 64);
  std::ifstream csv(out / "zero_shot.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "index,prompt,logit,probability");
  int rows = 0;
  while (std::getline(csv, line)) {
    const double logit =
        std::stod(line.substr(0, line.rfind(',')).substr(line.substr(0, line.rfind(',')).rfind(',') + 1));
    const double probability = std::stod(line.substr(line.rfind(',') + 1));
    EXPECT_NEAR(probability, 1 / (1 + std::exp(-logit)), 1e-6) << line;
    ++rows;
  }
  EXPECT_EQ(rows, int(prompts_of(c).size()));

  // Without the vocabulary: the image side opens, the text side is refused naming the file it needs.
  const CommandRun refused =
      run_attnscope("analyze --device cpu --analysis zero-shot --model '" + kFolder + "no_vocabulary' --image '" +
                        std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images/sign_4.png' --prompts '" +
                        (temp.path() / "prompts.txt").string() + "' --out '" + (temp.path() / "refused").string() + "'",
                    temp.path());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_CONTAINS(refused.err, "spiece.model");
}

}  // namespace test_siglip_text
}  // namespace attnscope
