// CLIP's zero-shot scores and text-prompted maps (analysis/clip_maps.h, `analyze --analysis zero-shot,
// chefer-clip, legrad, textspan`) against tests/python/reference_clip_maps.py, written from the authors'
// code (Transformer-MM-Explainability's interpret(), LeGrad's compute_legrad_clip, clip_text_span's
// PRSLogger and compute_segmentations.py), on random-weight CLIPs in OpenAI's (state_dict and
// TorchScript archive) and Hugging Face's layouts; the CLI end to end; the refusals of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "analysis/clip_maps.h"
#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "core/npy.h"
#include "core/prompt_file.h"
#include "models/clip_zero_shot.h"
#include "models/cpu_threads.h"
#include "tests/case_folder.h"
#include "tests/numeric_bounds.h"
#include "tests/test_folder.h"
#include "views/clip_prompts.h"

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace attnscope {
namespace test_clip_maps {

namespace fs = std::filesystem;

const CaseFolder& folder() {
  static const CaseFolder cases("clip_maps_cases");
  return cases;
}

torch::Tensor case_file(const nlohmann::json& c, const char* key) { return folder().array(c.at("files"), key); }

LoadedModel load_case(const nlohmann::json& c) {
  return load_model(folder().dir() + c.at("model").get<std::string>(), {}, torch::kCPU);
}

torch::Tensor case_image() { return read_npy(folder().dir() + "image.npy").to(torch::kFloat); }

// ---- Tolerances. A float32 sum of K terms is the exact sum of terms off by at most K u relative
// (u = 2^-24). Along one visual block the residual stream runs through the LayerNorm's sums (W),
// the q/k/v projection (W), the scores (the head width d), the probabilities times v (T tokens), the
// output projection (W), the second LayerNorm (W), the MLP's two products (W, hidden); the patch
// embedding (3 p^2), ln_pre, ln_post and the projection (W each) before and after. The text tower
// the same with L = 77 positions. The path's total times u bounds a forward quantity's error
// relative to its largest magnitude at first order (unit-gain random weights neither amplify nor
// damp much). A gradient goes back through the same products transposed: twice the path.
constexpr double kUnitRoundoff = 1.0 / (1 << 24);

double vision_path(const nlohmann::json& c) {
  const double width = c.at("vision_width"), hidden = 4 * width, head = width / c.at("vision_heads").get<double>();
  const double tokens = 1.0 + 36, patch = c.at("patch");
  return 3 * patch * patch + 3 * width + c.at("vision_layers").get<double>() * (5 * width + head + tokens + hidden);
}

double text_path(const nlohmann::json& c) {
  const double width = c.at("text_width"), hidden = 4 * width, head = 64;
  return 2 * width + c.at("text_layers").get<double>() * (5 * width + head + 77 + hidden);
}

double relative_error(const torch::Tensor& ours, const torch::Tensor& reference) {
  return max_abs_difference(ours, reference) / reference.abs().max().item<double>();
}

// ---- Parity with the authors' code on every layout.

TEST(ClipMapsParity, CheferLegradAndTextspanMatchTheAuthorsOnEveryLayout) {
  configure_threads(2);
  ASSERT_EQ(folder().cases().size(), 3u);
  const torch::Tensor image = case_image();
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_case(c);
    ASSERT_FALSE(model.text_tower.is_empty()) << model.text_tower_absent;
    EXPECT_EQ(to_string(model.vit_arch().source_layout), c.at("layout").get<std::string>());
    const torch::Tensor ids = case_file(c, "ids");
    const double vision = vision_path(c) * kUnitRoundoff, text = text_path(c) * kUnitRoundoff;
    const int blocks = c.at("vision_layers");

    // Chefer et al.: the logit's gradient (twice both paths) times the attention (one vision path),
    // carried through R <- R + cam R once per block taking part.
    for (const auto& [start, key] :
         {std::pair<int, const char*>{-1, "chefer_raw"}, std::pair<int, const char*>{0, "chefer_raw_all"}}) {
      SCOPED_TRACE(std::string(key));
      const CheferClipRelevance relevance = chefer_clip_relevance(model, image, ids.narrow(0, 0, 1), start);
      const int taking_part = blocks - relevance.image_start;
      const torch::Tensor reference = case_file(c, key);
      const double bound = taking_part * (3 * vision + 2 * text);
      const double error = relative_error(relevance.raw, reference);
      EXPECT_LT(error, bound) << "raw map";
      std::printf("  %s %-15s relative error %.2e (bound %.2e)\n", c.at("name").get<std::string>().c_str(), key, error,
                  bound);
      // min-max: the raw error over the range, twice (the minimum and maximum move too).
      const double range = (reference.max() - reference.min()).item<double>();
      EXPECT_LT(max_abs_difference(relevance.normalised, min_max(reference)),
                3 * error * reference.abs().max().item<double>() / range + 1e-6);
      if (start == -1) {
        // The text side from its last block: one block of the same products.
        const torch::Tensor text_reference = case_file(c, "chefer_text");
        ASSERT_EQ(relevance.text.sizes(), text_reference.sizes());
        EXPECT_LT(relative_error(relevance.text, text_reference), 2 * (3 * text + 2 * vision));
      }
    }

    // LeGrad: each block's cosine gradient (twice the vision path, the text embedding's path once),
    // summed over the blocks.
    {
      const LegradMap map = legrad_clip(model, image, ids.narrow(0, 1, 1));
      EXPECT_EQ(map.start_block, blocks - 2);
      const torch::Tensor reference = case_file(c, "legrad_raw");
      const double bound = 2 * (2 * vision + text);
      const double error = relative_error(map.raw, reference);
      EXPECT_LT(error, bound) << "legrad raw";
      std::printf("  %s legrad_raw      relative error %.2e (bound %.2e)\n", c.at("name").get<std::string>().c_str(),
                  error, bound);
      const torch::Tensor upsampled = case_file(c, "legrad_upsampled");
      ASSERT_EQ(map.upsampled.sizes(), upsampled.sizes());
      const double range = (reference.max() - reference.min()).item<double>();
      EXPECT_LT(max_abs_difference(map.upsampled, upsampled),
                3 * error * reference.abs().max().item<double>() / range + 1e-6);
    }

    // TextSpan: the decomposition is float64 arithmetic on the float32 forward's values; the map
    // is a product of E terms with the normalised text embeddings; relative to the heat before the
    // mean over prompts is taken (the centring cancels).
    {
      const TextSpanComponents components = textspan_components(model, image);
      EXPECT_LT(components.residual_relative, vision) << "the components sum to the embedding";
      const torch::Tensor embeddings = model.text("test").encode_text(ids);
      const torch::Tensor maps = textspan_maps(components, embeddings);
      const torch::Tensor reference = case_file(c, "textspan"), heat = case_file(c, "textspan_heat");
      ASSERT_EQ(maps.sizes(), reference.sizes());
      const double magnitude = heat.abs().max().item<double>();
      const double bound = 2 * (vision + text) + 2 * c.at("embed_dim").get<double>() * kUnitRoundoff;
      const double error = max_abs_difference(maps, reference) / magnitude;
      EXPECT_LT(error, bound) << "textspan";
      std::printf("  %s textspan        relative error %.2e (bound %.2e), residual %.2e\n",
                  c.at("name").get<std::string>().c_str(), error, bound, components.residual_relative);
      // Bounded transient: one head's [T, C] and its projection [T, E] in float64.
      EXPECT_EQ(components.transient_bytes,
                int64_t(37) * (c.at("vision_width").get<int64_t>() + c.at("embed_dim").get<int64_t>()) * 8);
    }
  }
}

// A prompt map that ignored the prompt, or the authors' reading of the wrong block, would not
// match: the fixture's prompts differ, and the start block changes the map (checked there).
TEST(ClipMapsParity, DifferentPromptsGiveDifferentMaps) {
  const nlohmann::json& c = folder().cases().at(0);
  LoadedModel model = load_case(c);
  const torch::Tensor image = case_image(), ids = case_file(c, "ids");
  const torch::Tensor first = legrad_clip(model, image, ids.narrow(0, 0, 1)).raw;
  const torch::Tensor second = legrad_clip(model, image, ids.narrow(0, 1, 1)).raw;
  EXPECT_GT(relative_error(first, second), 1e-3);
}

// ---- CLIP's preprocessing is the default for CLIP files.

TEST(ClipPreprocessing, ClipFilesDeclareBicubicShortSideAndFullCentreCrop) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    const LoadedModel model = load_case(c);
    ASSERT_TRUE(model.declared.resize.has_value());
    EXPECT_EQ(*model.declared.resize, ResizeMode::Timm);
    ASSERT_TRUE(model.declared.crop_pct.has_value());
    EXPECT_DOUBLE_EQ(*model.declared.crop_pct, 1.0);
    ASSERT_TRUE(model.declared.interpolation.has_value());
    EXPECT_EQ(*model.declared.interpolation, Interpolation::Bicubic);
    EXPECT_FLOAT_EQ(model.normalization.mean[0], 0.48145466f);
    EXPECT_FLOAT_EQ(model.normalization.std[2], 0.27577711f);
    const Preprocessing used = resolve_preprocessing(InputSettings{}, model.declared);
    EXPECT_DOUBLE_EQ(used.crop_pct, 1.0);
  }
}

// ---- The command line, end to end: the files and their values.

struct CliRun {
  TestFolder temp{"clip_maps"};
  CommandRun command;
  fs::path out() const { return temp.path() / "out"; }
};

std::unique_ptr<CliRun> run_cli(const nlohmann::json& c, const std::string& arguments) {
  auto run = std::make_unique<CliRun>();
  run->command =
      run_attnscope("analyze --device cpu --model '" + folder().dir() + c.at("model").get<std::string>() +
                        "' --image '" + folder().dir() + "image.png' --out '" + run->out().string() + "' " + arguments,
                    run->temp.path());
  return run;
}

std::vector<std::string> csv_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ClipMapsCli, ZeroShotWritesScoresEmbeddingsAndTokens) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    const auto run = run_cli(c, "--analysis zero-shot --prompts '" + folder().dir() + "prompts.txt'");
    ASSERT_EQ(run->command.exit_code, 0) << run->command.err;
    const torch::Tensor tokens = read_npy((run->out() / "tokens.npy").string());
    EXPECT_EQ(tokens.scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(tokens, case_file(c, "ids"))) << "the tokenizer with the vocabulary beside the model";
    const torch::Tensor text = read_npy((run->out() / "text_embeddings.npy").string());
    const torch::Tensor image = read_npy((run->out() / "image_embedding.npy").string());
    const double bound = 2 * (vision_path(c) + text_path(c)) * kUnitRoundoff;
    EXPECT_LT(relative_error(text, case_file(c, "text_embeddings")), bound);
    EXPECT_LT(relative_error(image, case_file(c, "image_embedding")), bound) << "CLIP's preprocessing of the PNG";
    const std::vector<std::string> lines = csv_lines(run->out() / "zero_shot.csv");
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines[0], "index,prompt,logit,probability");
    const torch::Tensor logits = case_file(c, "logits"), probabilities = case_file(c, "probabilities");
    const auto prompts = c.at("prompts");
    for (int64_t i = 0; i < 5; ++i) {
      std::stringstream fields(lines[size_t(i + 1)]);
      std::string index, prompt, logit, probability;
      std::getline(fields, index, ',');
      std::getline(fields, prompt, ',');
      std::getline(fields, logit, ',');
      std::getline(fields, probability, ',');
      EXPECT_EQ(index, std::to_string(i));
      EXPECT_EQ(prompt, prompts[size_t(i)].get<std::string>());
      EXPECT_NEAR(std::stod(logit), logits[i].item<double>(), 1e-4 * std::abs(logits[i].item<double>()) + 1e-5);
      EXPECT_NEAR(std::stod(probability), probabilities[i].item<double>(), 1e-4);
    }
    const nlohmann::json summary = read_json_file(run->out() / "summary.json");
    EXPECT_EQ(summary.at("schema_kind"), "analyze-zero-shot");
    EXPECT_CONTAINS(summary.at("text").at("ftfy").get<std::string>(), "not reproduced");
    EXPECT_CONTAINS(summary.at("text").at("vocabulary").get<std::string>(), "vocab.json");
    EXPECT_EQ(summary.at("top").at("line"), c.at("prompt_lines")[summary.at("top").at("index").get<size_t>()]);
  }
}

TEST(ClipMapsCli, MapsMatchTheReferenceThroughTheCommandLine) {
  const nlohmann::json& c = folder().cases().at(0);  // the OpenAI state_dict
  const auto prompts = c.at("prompts");
  const double vision = vision_path(c) * kUnitRoundoff, text = text_path(c) * kUnitRoundoff;
  {
    const auto run =
        run_cli(c, "--analysis chefer-clip --start-layer 0 --prompt '" + prompts[0].get<std::string>() + "'");
    ASSERT_EQ(run->command.exit_code, 0) << run->command.err;
    const torch::Tensor raw = read_npy((run->out() / "chefer-clip_raw.npy").string());
    EXPECT_LT(relative_error(raw, case_file(c, "chefer_raw_all")), 3 * (3 * vision + 2 * text));
    const torch::Tensor normalised = read_npy((run->out() / "chefer-clip.npy").string());
    EXPECT_NEAR(normalised.max().item<double>(), 1.0, 1e-6);
    EXPECT_NEAR(normalised.min().item<double>(), 0.0, 1e-6);
    EXPECT_TRUE(fs::exists(run->out() / "chefer-clip_text.npy"));
    EXPECT_EQ(read_json_file(run->out() / "summary.json").at("image_start_block"), 0);
  }
  {
    const auto run = run_cli(c, "--analysis legrad --prompt '" + prompts[1].get<std::string>() + "'");
    ASSERT_EQ(run->command.exit_code, 0) << run->command.err;
    const torch::Tensor raw = read_npy((run->out() / "legrad_raw.npy").string());
    EXPECT_LT(relative_error(raw, case_file(c, "legrad_raw")), 2 * (2 * vision + text));
    EXPECT_EQ(read_npy((run->out() / "legrad_upsampled.npy").string()).sizes(), (std::vector<int64_t>{96, 96}));
  }
  {
    const auto run = run_cli(c, "--analysis textspan --prompts '" + folder().dir() + "prompts.txt'");
    ASSERT_EQ(run->command.exit_code, 0) << run->command.err;
    const torch::Tensor maps = read_npy((run->out() / "textspan.npy").string());
    const double magnitude = case_file(c, "textspan_heat").abs().max().item<double>();
    EXPECT_LT(max_abs_difference(maps, case_file(c, "textspan")) / magnitude,
              2 * (vision + text) + 2 * c.at("embed_dim").get<double>() * kUnitRoundoff);
    const nlohmann::json summary = read_json_file(run->out() / "summary.json");
    EXPECT_LT(summary.at("residual").at("relative").get<double>(), vision);
  }
}

// ---- Bad input: a clear message, a non-zero exit, nothing written.

void expect_refused(const CliRun& run, const std::string& needle) {
  EXPECT_NE(run.command.exit_code, 0);
  EXPECT_FALSE(run.command.crashed);
  EXPECT_CONTAINS(run.command.err, needle);
  EXPECT_FALSE(fs::exists(run.out())) << "nothing is written";
}

TEST(ClipMapsRefusals, BadPromptFilesNameTheLineAndWriteNothing) {
  const nlohmann::json& c = folder().cases().at(0);
  TestFolder temp("clip_prompts");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(temp.file(name), std::ios::binary) << bytes;
    return temp.file(name);
  };
  expect_refused(*run_cli(c, "--analysis zero-shot --prompts '" + write("empty.txt", "") + "'"), "holds no prompt");
  expect_refused(*run_cli(c, "--analysis zero-shot --prompts '" + write("blank.txt", "\n  \n\r\n") + "'"),
                 "holds no prompt");
  expect_refused(*run_cli(c, "--analysis textspan --prompts '" + write("latin1.txt", "a dog\n\nun caf\xe9\n") + "'"),
                 "line 3 is not UTF-8");
  expect_refused(*run_cli(c, "--analysis zero-shot --prompts '" +
                                 write("huge.txt", std::string(kMaxPromptFileBytes + 1, 'a')) + "'"),
                 "a prompt file is at most");
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += "dog ";
  expect_refused(*run_cli(c, "--analysis zero-shot --prompts '" + write("long.txt", "a cat\n\n" + long_prompt) + "'"),
                 "line 3 of the prompt file");
  expect_refused(*run_cli(c, "--analysis chefer-clip --prompt '" + long_prompt + "'"), "--prompt ('dog dog");
  expect_refused(*run_cli(c, "--analysis zero-shot --prompts '" + temp.file("absent.txt") + "'"), "does not exist");
  expect_refused(*run_cli(c, "--analysis zero-shot"), "needs --prompts FILE");
  expect_refused(*run_cli(c, "--analysis legrad"), "needs --prompt TEXT");
  expect_refused(*run_cli(c, "--analysis chefer-clip --prompt red --start-layer 3"), "--start-layer 3");
}

// A prompt file's escape sequences reach the terminal as visible escapes, in reports and in errors
// (issue 60: ESC ] 0 ; ... BEL in a prompt retitled the terminal).
TEST(ClipMapsRefusals, EscapeSequencesInPromptsNeverReachTheTerminal) {
  const nlohmann::json& c = folder().cases().at(0);
  TestFolder temp("clip_escapes");
  const std::string file = temp.file("escapes.txt");
  std::ofstream(file, std::ios::binary) << "\x1b]0;owned\x07red\n\x1b[2Jblue\n\xc2\x9b"
                                        << "31mgreen\n";
  const auto run = run_cli(c, "--analysis zero-shot --prompts '" + file + "'");
  ASSERT_EQ(run->command.exit_code, 0) << run->command.err;
  for (const std::string* stream : {&run->command.out, &run->command.err}) {
    EXPECT_EQ(stream->find('\x1b'), std::string::npos) << *stream;
    EXPECT_EQ(stream->find("\xc2\x9b"), std::string::npos) << *stream;
  }
  EXPECT_CONTAINS(run->command.out, "\\x1b");
  std::string long_prompt = "\x1b[2J";
  for (int i = 0; i < 80; ++i) long_prompt += "dog ";
  const auto refused = run_cli(c, "--analysis chefer-clip --prompt '" + long_prompt + "'");
  EXPECT_NE(refused->command.exit_code, 0);
  EXPECT_CONTAINS(refused->command.err, "\\x1b[2Jdog");
  EXPECT_EQ(refused->command.err.find('\x1b'), std::string::npos) << refused->command.err;
  EXPECT_EQ(excerpt("a\x1b[2Jb\x7f"), "a\\x1b[2Jb\\x7f");
  EXPECT_EQ(one_line("x\r\ny\x1b"), "x  y\\x1b");
}

// A finite logit_scale whose exponential overflows (100: e^100 > float32's largest) is refused naming
// it, where zero-shot wrote inf logits and NaN probabilities with exit 0 (issue 60).
TEST(ClipMapsRefusals, AnOverflowingLogitScaleIsRefused) {
  TestFolder temp("clip_logit_scale");
  Checkpoint clip = load_checkpoint(asset_path("models/clip.safetensors"));
  ASSERT_TRUE(clip.tensors.count("logit_scale"));
  clip.tensors["logit_scale"] = torch::full_like(clip.tensors["logit_scale"], 100.0);
  const std::string model = temp.file("clip_scale100.safetensors");
  save_safetensors(model, clip.tensors, clip.metadata);
  const std::string prompts = temp.file("prompts.txt");
  std::ofstream(prompts) << "the digit 4\nthe digit 1\n";
  const fs::path out = temp.path() / "out";
  const CommandRun run =
      run_attnscope("analyze --analysis zero-shot --model '" + model + "' --image '" + asset_path("images/sign_4.png") +
                        "' --prompts '" + prompts + "' --out '" + out.string() + "'",
                    temp.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_CONTAINS(run.err, "logit_scale 100");
  EXPECT_FALSE(fs::exists(out / "summary.json"));
}

TEST(ClipMapsRefusals, AModelWithoutATextTowerIsRefusedNamingWhatIsMissing) {
  const std::string visual = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/clip_visual.safetensors";
  for (const std::string& analysis :
       {"zero-shot --prompts '" + folder().dir() + "prompts.txt'", std::string("chefer-clip --prompt red"),
        std::string("legrad --prompt red"), "textspan --prompts '" + folder().dir() + "prompts.txt'"}) {
    SCOPED_TRACE(analysis);
    auto run = std::make_unique<CliRun>();
    run->command = run_attnscope("analyze --device cpu --model '" + visual + "' --image '" + folder().dir() +
                                     "image.png' --out '" + run->out().string() + "' --analysis " + analysis,
                                 run->temp.path());
    expect_refused(*run, "no text tower");
  }
}

TEST(ClipPromptFile, LinesBlankLinesLineEndingsAndByteOrderMark) {
  const std::vector<PromptLine> prompts = parse_prompt_text(
      "\xEF\xBB\xBF"
      "a dog\r\n\n  \nthe, \"cat\"\nlast",
      "test");
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].text, "a dog");
  EXPECT_EQ(prompts[0].line, 1u);
  EXPECT_EQ(prompts[1].text, "the, \"cat\"");
  EXPECT_EQ(prompts[1].line, 4u);
  EXPECT_EQ(prompts[2].line, 5u);
  EXPECT_THROW(parse_prompt_text("\n\n", "test"), std::invalid_argument);
  EXPECT_THROW(parse_prompt_text("ok\n\xff\n", "test"), std::invalid_argument);
  // Old Mac files end lines with a lone \r: three prompts, not one (issue 60).
  const std::vector<PromptLine> mac = parse_prompt_text("a dog\ra cat\r\ra bird\r", "test");
  ASSERT_EQ(mac.size(), 3u);
  EXPECT_EQ(mac[1].text, "a cat");
  EXPECT_EQ(mac[2].line, 4u);
  // A line of no-break and ideographic spaces is blank, as CLIP's cleaning sees it (it was scored as
  // an empty prompt).
  const std::vector<PromptLine> spaced = parse_prompt_text("\xc2\xa0\xe3\x80\x80\t\na fox\n", "test");
  ASSERT_EQ(spaced.size(), 1u);
  EXPECT_EQ(spaced[0].text, "a fox");
  EXPECT_THROW(parse_prompt_text("\xe2\x80\x83\n", "test"), std::invalid_argument);
}

// A file whose metadata names more classes than a prompt file may hold gives no prompt list, and says
// why, instead of tokenizing them all (issue 60: 2 M names, 50 s, then out of memory).
TEST(ClipPromptFile, ClassNamesAreHeldToThePromptLimits) {
  TestFolder temp("clip_many_names");
  Checkpoint clip = load_checkpoint(asset_path("models/clip.safetensors"));
  nlohmann::json names = nlohmann::json::array();
  for (size_t i = 0; i <= kMaxPrompts; ++i) names.push_back("c" + std::to_string(i));
  clip.metadata["class_names"] = names.dump();
  const std::string path = temp.file("clip_names.safetensors");
  save_safetensors(path, clip.tensors, clip.metadata);
  LoadedModel model = load_model(path, {}, torch::kCPU);
  const PromptList list = workbench_prompt_list(model, AnalysisSettings{});
  EXPECT_TRUE(list.prompts.empty());
  EXPECT_CONTAINS(list.missing, "more than a prompt list may hold");
  const CommandRun run = run_attnscope("analyze --analysis zero-shot --model '" + path + "' --image '" +
                                           asset_path("images/sign_4.png") + "' --out '" + temp.file("out") + "'",
                                       temp.path());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.crashed);
  EXPECT_CONTAINS(run.err, "more than a prompt list may hold");
}

// A template fills every {} with the class name (it filled the first alone).
TEST(ClipPromptFile, TemplatesFillEveryPlaceholder) {
  LoadedModel model = load_model(asset_path("models/clip.safetensors"), {}, torch::kCPU);
  AnalysisSettings settings;
  settings.options.set("prompt-template", std::string("a {}, the digit {}"), "a {}, the digit {}");
  const PromptList list = workbench_prompt_list(model, settings);
  ASSERT_FALSE(list.prompts.empty()) << list.missing;
  EXPECT_EQ(list.prompts[4].text, "a 4, the digit 4");
}

}  // namespace test_clip_maps
}  // namespace attnscope
