// CLIP's text tower and zero-shot scores against an independent float64 reference written from
// openai/CLIP's clip/model.py and transformers' modeling_clip.py (tests/python/reference_clip.py), on
// random-weight CLIP models in the three layouts researchers have (tests/python/make_clip_text_cases.py):
// a full OpenAI state_dict with float16 weights, OpenAI's TorchScript archive, and Hugging Face CLIPModel
// folders in both pooling conventions. Also the refusals: no text tower, missing or contradicting keys,
// and hostile shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "core/checkpoint.h"
#include "models/arch_limits.h"
#include "models/clip_text.h"
#include "models/clip_text_checkpoint.h"
#include "models/clip_zero_shot.h"
#include "models/cpu_threads.h"
#include "models/model_loader.h"
#include "tests/case_folder.h"
#include "tests/numeric_bounds.h"
#include "tests/test_folder.h"
#include "views/clip_prompts.h"

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace attnscope {
namespace test_clip_text {

namespace fs = std::filesystem;

const CaseFolder& folder() {
  static const CaseFolder cases("clip_text_cases");
  return cases;
}

torch::Tensor case_file(const nlohmann::json& c, const char* key) { return folder().array(c.at("files"), key); }

LoadedModel load_case(const nlohmann::json& c) {
  return load_model(folder().dir() + c.at("model").get<std::string>(), {}, torch::kCPU);
}

const nlohmann::json& case_named(const std::string& name) {
  for (const auto& c : folder().cases())
    if (c.at("name") == name) return c;
  throw std::runtime_error("no case " + name);
}

// ---- Tolerances. Float32 products are backward stable: a sum of K terms is the exact sum of terms
// off by at most K u relative (u = 2^-24), about sqrt(K) u in practice. Along the residual stream one
// text block runs in sequence the LayerNorm's sums (K = W) and in_proj (W), the scores (the head
// width d), the probabilities times v (L), out_proj (W), the second LayerNorm (W), c_fc (W) and c_proj
// (the MLP's hidden); then ln_final (W) and text_projection (W). Their total, times u, bounds the
// error relative to the output's largest magnitude at first order when the blocks neither amplify
// nor damp it (unit-gain random weights: they do neither much). Every wrong reading the fixture
// checks (no causal mask, the other pooling, the other activation, ...) moves the embeddings by more
// than 6e-3 relative, thirty times the largest of these bounds.
constexpr double kUnitRoundoff = 1.0 / (1 << 24);

double text_path_sum(const ClipTextArch& arch) {
  const double width = arch.width, head = double(arch.width) / arch.heads;
  return arch.layers * (5 * width + head + arch.context_length + arch.mlp_hidden) + 2 * width;
}

// The visual tower (a ViT of the same blocks without the mask): per block 5 W + d + T + hidden,
// then ln_pre, ln_post and the projection, and the patch embedding (3 p^2 terms).
double vision_path_sum(const VitArch& arch, int64_t tokens) {
  const double width = arch.embed_dim, head = double(arch.embed_dim) / arch.heads;
  double sum = 3.0 * arch.patch_size * arch.patch_size + 3 * width;
  for (const auto& block : arch.blocks) sum += 5 * width + head + double(tokens) + block.mlp_hidden;
  return sum;
}

double relative_error(const torch::Tensor& ours, const torch::Tensor& reference) {
  return max_abs_difference(ours, reference) / reference.abs().max().item<double>();
}

// Where each input of a formula may lie: the measured distance plus both sides' float32 rounding of
// the formula's own sums (K terms: 2 K u relative), as the attribution tests bound their maps.
torch::Tensor input_radius(const torch::Tensor& ours, const torch::Tensor& reference, int64_t sum_length) {
  return (ours.to(torch::kDouble) - reference.to(torch::kDouble)).abs() +
         2.0 * double(sum_length) * kUnitRoundoff * reference.to(torch::kDouble).abs();
}

// ---- Parity on every layout.

TEST(ClipTextParity, EveryLayoutMatchesTheAuthorsEncodeTextImageAndLogits) {
  configure_threads(2);
  ASSERT_EQ(folder().cases().size(), 4u);
  std::set<std::string> layouts, formats;
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_case(c);
    ASSERT_FALSE(model.text_tower.is_empty()) << model.text_tower_absent;
    EXPECT_TRUE(model.text_tower_absent.empty());
    EXPECT_TRUE(model.report.warnings.empty());
    EXPECT_EQ(model.format, c.at("format").get<std::string>());
    layouts.insert(to_string(model.vit_arch().source_layout));
    formats.insert(model.format);
    ClipTextTowerImpl& tower = model.text("the test");
    const ClipTextArch& arch = tower.arch();
    EXPECT_EQ(to_string(arch.source_layout), c.at("layout").get<std::string>());
    EXPECT_EQ(to_string(model.vit_arch().source_layout), c.at("layout").get<std::string>());
    EXPECT_EQ(arch.vocab_size, c.at("vocab_size").get<int>());
    EXPECT_EQ(arch.context_length, c.at("context_length").get<int>());
    EXPECT_EQ(arch.width, c.at("width").get<int>());
    EXPECT_EQ(arch.layers, c.at("layers").get<int>());
    EXPECT_EQ(arch.heads, c.at("heads").get<int>());
    EXPECT_EQ(arch.mlp_hidden, c.at("mlp_hidden").get<int>());
    EXPECT_EQ(arch.embed_dim, c.at("embed_dim").get<int>());
    EXPECT_EQ(arch.end_of_text_id, c.at("end_of_text_id").get<int64_t>());
    EXPECT_EQ(arch.pooling, c.at("pooling") == "argmax" ? TextPooling::ArgmaxOfIds : TextPooling::FirstEndOfText);
    EXPECT_FLOAT_EQ(tower.logit_scale.item<float>(), c.at("logit_scale").get<float>());
    for (const auto& parameter : tower.parameters()) EXPECT_EQ(parameter.scalar_type(), torch::kFloat);
    bool float16_noted = false;
    for (const auto& note : model.report.notes)
      float16_noted = float16_noted || note.find("float16") != std::string::npos;
    EXPECT_EQ(float16_noted, c.at("float16").get<bool>());

    const torch::Tensor ids = case_file(c, "ids");
    EXPECT_TRUE(torch::equal(tower.pooled_positions(ids), case_file(c, "pooled")));
    const ClipZeroShot scores = clip_zero_shot(model, case_file(c, "image"), ids);
    const torch::Tensor text = scores.text_embeddings, image = scores.image_embedding.unsqueeze(0);
    const torch::Tensor reference_text = case_file(c, "text_embeddings");
    ASSERT_EQ(text.sizes(), reference_text.sizes());
    const double text_bound = text_path_sum(arch) * kUnitRoundoff;
    EXPECT_LT(relative_error(text, reference_text), text_bound) << "text embeddings";
    const torch::Tensor reference_image = case_file(c, "image_embedding");
    ASSERT_EQ(image.sizes(), torch::IntArrayRef({1, reference_image.size(0)}));
    const int64_t tokens = 1 + (c["image_size"][0].get<int64_t>() / model.vit_arch().patch_size) *
                                   (c["image_size"][1].get<int64_t>() / model.vit_arch().patch_size);
    EXPECT_LT(relative_error(image[0], reference_image), vision_path_sum(model.vit_arch(), tokens) * kUnitRoundoff)
        << "image embedding";
    if (c.at("files").contains("image_other")) {  // Hugging Face's interpolate_pos_encoding at another size
      torch::Tensor other;
      {
        c10::InferenceMode inference_mode;
        other = model.forward(case_file(c, "image_other"), AttentionSettings{}).logits[0];
      }
      const int64_t other_tokens = 1 + (c["image_other_size"][0].get<int64_t>() / model.vit_arch().patch_size) *
                                           (c["image_other_size"][1].get<int64_t>() / model.vit_arch().patch_size);
      EXPECT_LT(relative_error(other, case_file(c, "image_embedding_other")),
                vision_path_sum(model.vit_arch(), other_tokens) * kUnitRoundoff)
          << "image embedding at another size";
    }

    // The logits and probabilities carry the embeddings' error through CLIP's formula (first order
    // at the reference's point) plus the formula's own rounding (norms and dot products of E terms).
    const double scale = c.at("logit_scale").get<double>();
    const int64_t width = reference_image.size(0);
    const std::vector<torch::Tensor> point{reference_image, reference_text};
    const std::vector<torch::Tensor> radius{input_radius(image[0], reference_image, width),
                                            input_radius(text, reference_text, width)};
    auto logits_of = [scale](const std::vector<torch::Tensor>& x) {
      return clip_logits_per_image(x[0].unsqueeze(0), x[1], torch::tensor(scale, torch::kDouble))[0];
    };
    const torch::Tensor logit_bound = first_order_error(logits_of, point, radius);
    const torch::Tensor reference_logits = case_file(c, "logits");
    EXPECT_TRUE((scores.logits.to(torch::kDouble) - reference_logits).abs().le(logit_bound).all().item<bool>())
        << "logits " << scores.logits << " vs " << reference_logits << " within " << logit_bound;
    const torch::Tensor probability_bound = first_order_error(
        [&](const std::vector<torch::Tensor>& x) { return torch::softmax(logits_of(x), 0); }, point, radius);
    const torch::Tensor reference_probabilities = case_file(c, "probabilities");
    EXPECT_TRUE((scores.probabilities.to(torch::kDouble) - reference_probabilities)
                    .abs()
                    .le(probability_bound + 4 * kUnitRoundoff)
                    .all()
                    .item<bool>())
        << "probabilities " << scores.probabilities << " vs " << reference_probabilities;
    EXPECT_NEAR(scores.probabilities.sum().item<double>(), 1.0, 1e-6);
  }
  EXPECT_EQ(layouts, (std::set<std::string>{"openai-clip", "hf-clip"}));
  EXPECT_EQ(formats, (std::set<std::string>{"pytorch-zip", "torchscript-weights", "safetensors"}));
}

// OpenAI's released archive and the state_dict of the same weights give the same tower.
TEST(ClipTextParity, TheArchiveAndTheStateDictHoldTheSameTower) {
  LoadedModel archive = load_case(case_named("openai_jit"));
  LoadedModel state_dict = load_case(case_named("openai_pt"));
  const auto a = archive.text("test").named_parameters(), b = state_dict.text("test").named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
}

// The attention each block hands out is the one its output is made from, inside the graph: its
// gradient is d logit / d A, what Chefer et al.'s text-side relevance reads.
TEST(ClipTextParity, KeptAttentionAndItsGradientMatchTheReference) {
  const nlohmann::json& c = case_named("openai_pt");
  LoadedModel model = load_case(c);
  ClipTextTowerImpl& tower = model.text("test");
  const int64_t prompt = c.at("grad_prompt").get<int64_t>();
  const torch::Tensor image = case_file(c, "image_embedding").to(torch::kFloat);
  TextForwardOptions options;
  options.keep_attention = true;
  torch::AutoGradMode grad(true);
  const TextForwardOutput output = tower.forward(case_file(c, "ids"), options);
  ASSERT_EQ(int(output.attention.size()), tower.arch().layers);
  const torch::Tensor logit =
      clip_logits_per_image(image.unsqueeze(0), output.embedding, tower.logit_scale.detach())[0][prompt];
  const auto gradients = torch::autograd::grad({logit}, output.attention);
  const torch::Tensor reference_attention = case_file(c, "attention"),
                      reference_gradient = case_file(c, "attention_grad");
  const double path = text_path_sum(tower.arch()) * kUnitRoundoff;
  for (int layer = 0; layer < tower.arch().layers; ++layer) {
    SCOPED_TRACE("block " + std::to_string(layer));
    const torch::Tensor attention = output.attention[size_t(layer)][prompt].detach();
    const torch::Tensor reference = reference_attention[layer];
    // A probability moves by at most 2 p max|d score|; the scores' error is the path's rounding
    // relative to their spread, which the reference's log-probabilities show (the largest log-ratio
    // of two allowed keys in a row).
    const torch::Tensor allowed = reference.gt(0);
    const torch::Tensor logs = reference.clamp_min(1e-300).log();
    const double spread = (logs.masked_fill(allowed.logical_not(), -1e300).amax(-1) -
                           logs.masked_fill(allowed.logical_not(), 1e300).amin(-1))
                              .max()
                              .item<double>();
    EXPECT_LT(max_abs_difference(attention, reference), 2 * path * std::max(spread, 1.0)) << "attention";
    EXPECT_TRUE(attention.masked_select(allowed.logical_not()).eq(0).all().item<bool>()) << "causal";
    // The gradient goes back through the same products transposed: twice the path, relative to its
    // largest magnitude.
    const torch::Tensor gradient = gradients[size_t(layer)][prompt];
    EXPECT_LT(relative_error(gradient, reference_gradient[layer]), 2 * path) << "gradient";
    for (int64_t other = 0; other < gradients[size_t(layer)].size(0); ++other) {
      if (other == prompt) continue;
      EXPECT_EQ(gradients[size_t(layer)][other].abs().max().item<double>(), 0.0) << "prompt " << other;
    }
  }

  // A hook that swaps in leaves sees the same probabilities and gets the same gradients.
  std::vector<torch::Tensor> leaves;
  TextForwardOptions swapping;
  swapping.attention_hook = [&leaves](int block, torch::Tensor& probabilities) {
    EXPECT_EQ(block, int(leaves.size()));
    probabilities = probabilities.detach().requires_grad_(true);
    leaves.push_back(probabilities);
  };
  const TextForwardOutput swapped = tower.forward(case_file(c, "ids"), swapping);
  EXPECT_LT(max_abs_difference(swapped.embedding, output.embedding), 1e-6);
  const torch::Tensor last =
      clip_logits_per_image(image.unsqueeze(0), swapped.embedding, tower.logit_scale.detach())[0][prompt];
  const auto leaf_gradient = torch::autograd::grad({last}, {leaves.back()});
  EXPECT_LT(max_abs_difference(leaf_gradient[0], gradients.back()), 1e-6) << "the last block has no later softmax";
}

// A prompt of L < context positions gives the same embedding (the mask is causal), as transformers
// runs shorter ids.
TEST(ClipTextParity, ShorterIdsGiveTheSameEmbedding) {
  const nlohmann::json& c = case_named("hf_clip");
  LoadedModel model = load_case(c);
  ClipTextTowerImpl& tower = model.text("test");
  const torch::Tensor ids = case_file(c, "ids");
  const int64_t longest = tower.pooled_positions(ids).index({torch::indexing::Slice(0, 3)}).max().item<int64_t>();
  c10::InferenceMode inference_mode;
  const torch::Tensor full = tower.encode_text(ids.slice(0, 0, 3));
  const torch::Tensor shorter = tower.encode_text(ids.slice(0, 0, 3).slice(1, 0, longest + 1));
  EXPECT_LT(relative_error(shorter, full), text_path_sum(tower.arch()) * kUnitRoundoff);
}

// With autograd on (as a gradient method's process runs), encoding prompts keeps no graph: memory does
// not grow with the prompts (issue 60: 20,000 prompts took 4.8 GB and ended in the allocator).
TEST(ClipTextParity, EncodingKeepsNoGraphWhateverTheGradMode) {
  const nlohmann::json& c = case_named("hf_clip");
  LoadedModel model = load_case(c);
  ClipTextTowerImpl& tower = model.text("test");
  torch::AutoGradMode with_gradients(true);
  const torch::Tensor embedding = tower.encode_text(case_file(c, "ids").slice(0, 0, 3));
  EXPECT_FALSE(embedding.requires_grad());
  EXPECT_FALSE(embedding.grad_fn());
}

// ---- CLIP's scores.

// logits = logit_scale.exp() * cos; the gradient of one with respect to the image embedding is
// exp(s) (t^ - cos i^) / |i| (the text embedding as a gradient target).
TEST(ClipScores, LogitsAreScaledCosinesAndDifferentiateAsOne) {
  torch::manual_seed(3);
  const torch::Tensor image = torch::randn({1, 16}, torch::kDouble), text = torch::randn({4, 16}, torch::kDouble);
  const torch::Tensor scale = torch::tensor(2.5, torch::kDouble);
  const torch::Tensor logits = clip_logits_per_image(image, text, scale);
  const torch::Tensor cosines = torch::nn::functional::cosine_similarity(
      image.expand({4, 16}), text, torch::nn::functional::CosineSimilarityFuncOptions().dim(1));
  EXPECT_LT(max_abs_difference(logits[0], std::exp(2.5) * cosines), 1e-12);
  EXPECT_LT(max_abs_difference(clip_logits_per_image(3 * image, 0.5 * text, scale), logits), 1e-12) << "scale-free";
  ClipTextArch arch;
  arch.vocab_size = 8, arch.context_length = 4, arch.width = 8, arch.layers = 1, arch.heads = 2;
  arch.mlp_hidden = 8, arch.embed_dim = 16;
  ClipTextTower clip(arch);
  torch::NoGradGuard no_grad_fill;
  clip->logit_scale.fill_(2.5);
  const ZeroShotScores scores = zero_shot(image[0], text, *clip);
  EXPECT_LT(max_abs_difference(scores.probabilities, torch::softmax(logits[0], 0)), 1e-6);
  // SigLIP: logit_bias added, each prompt's own sigmoid (SiglipModel: torch.sigmoid(logits_per_image)).
  arch.scores = TextScores::Sigmoid;
  ClipTextTower siglip(arch);
  siglip->logit_scale.fill_(2.5);
  siglip->logit_bias.fill_(-1.5);
  const ZeroShotScores sigmoid_scores = zero_shot(image[0], text, *siglip);
  EXPECT_LT(max_abs_difference(sigmoid_scores.logits, logits[0] - 1.5), 1e-6);
  EXPECT_LT(max_abs_difference(sigmoid_scores.probabilities, torch::sigmoid(logits[0] - 1.5)), 1e-6);
  torch::AutoGradMode grad(true);
  const torch::Tensor leaf = image.clone().requires_grad_(true);
  const torch::Tensor gradient = torch::autograd::grad({clip_logits_per_image(leaf, text, scale)[0][2]}, {leaf})[0];
  const torch::Tensor i_hat = image / image.norm(), t_hat = text[2] / text[2].norm();
  const torch::Tensor expected = std::exp(2.5) * (t_hat - cosines[2] * i_hat) / image.norm();
  EXPECT_LT(max_abs_difference(gradient, expected), 1e-12);
  EXPECT_THROW(clip_logits_per_image(image, torch::randn({4, 15}, torch::kDouble), scale), std::invalid_argument);
  EXPECT_THROW(zero_shot(torch::randn({2, 16}), text, *clip), std::invalid_argument);
}

TEST(ClipScores, TokenIdsAreCheckedNamingTheRow) {
  LoadedModel model = load_case(case_named("hf_clip"));
  ClipTextTowerImpl& tower = model.text("test");
  const torch::Tensor ids = case_file(case_named("hf_clip"), "ids");
  auto refused = [&](const torch::Tensor& bad, const std::string& words) {
    try {
      tower.encode_text(bad);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_CONTAINS(e.what(), words);
    }
  };
  torch::Tensor outside = ids.clone();
  outside[3][5] = 1000;
  refused(outside, "prompt 3 holds a token id outside 0..999");
  torch::Tensor negative = ids.clone();
  negative[1][2] = -1;
  refused(negative, "prompt 1 holds a token id outside");
  torch::Tensor no_end = ids.clone();
  no_end[4] = no_end[4].masked_fill(no_end[4].eq(998), 5);
  refused(no_end, "prompt 4 has no end-of-text token (id 998)");
  refused(torch::cat({ids, ids.slice(1, 0, 1)}, 1), "65 positions; this text tower takes 1 to 64");
  refused(ids.to(torch::kFloat), "integer tensor");
  refused(ids.slice(0, 0, 0), "no prompts");
  refused(ids[0], "integer tensor [prompts, tokens]");
  EXPECT_NO_THROW(tower.check_token_ids(ids.to(torch::kInt)));
}

// ---- What has no text tower, and what is refused.

TEST(ClipTextRefusals, VisualOnlyFilesHaveNoTextTowerAndLoadAsBefore) {
  const std::string hub = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/";
  LoadedModel visual = load_model(hub + "clip_visual.safetensors", {}, torch::kCPU);
  EXPECT_TRUE(visual.text_tower.is_empty());
  EXPECT_CONTAINS(visual.text_tower_absent, "this file has no text tower: 'token_embedding.weight' missing");
  EXPECT_TRUE(visual.report.warnings.empty());
  try {
    visual.text("--target text:");
    ADD_FAILURE() << "a visual-only file gave a text tower";
  } catch (const std::invalid_argument& e) {
    EXPECT_CONTAINS(e.what(), "--target text: needs CLIP's text tower; this file has no text tower");
  }
  try {
    clip_zero_shot(visual, torch::zeros({1, 3, 80, 80}), torch::zeros({1, 77}, torch::kLong));
    ADD_FAILURE() << "zero-shot ran without a text tower";
  } catch (const std::invalid_argument& e) {
    EXPECT_CONTAINS(e.what(), "zero-shot needs CLIP's text tower; this file has no text tower");
  }
  LoadedModel vit = load_model(hub + "dinov2.pth", {}, torch::kCPU);
  EXPECT_CONTAINS(vit.text_tower_absent, "it is not a CLIP checkpoint");
  // The full state_dict of make_hub_cases.py (context 16, vocabulary 100, one 64-wide head) now
  // brings its text tower; its visual tower is the visual-only file's.
  LoadedModel full = load_model(hub + "clip_full.pth", {}, torch::kCPU);
  ASSERT_FALSE(full.text_tower.is_empty()) << full.text_tower_absent;
  EXPECT_EQ(full.text("test").arch().context_length, 16);
  EXPECT_EQ(full.text("test").arch().vocab_size, 100);
  EXPECT_EQ(full.text("test").arch().heads, 1);
  // The bundled vocabulary ends prompts with 49407, this tower's end of text is 99: refused before
  // any prompt is tokenized, naming both ends (it read "prompt 0 holds a token id outside 0..99").
  try {
    tokenize_prompts(full, std::vector<PromptLine>{{"a photo of a sign", 1}}, "zero-shot", false);
    ADD_FAILURE() << "a vocabulary of another model was used";
  } catch (const std::invalid_argument& e) {
    EXPECT_CONTAINS(e.what(), "ends each prompt with id 49407, but this text tower's end of text is id 99");
  }
  EXPECT_EQ(full.vit_arch().output_kind, visual.vit_arch().output_kind);
  for (const auto& item : visual.backbone->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), full.backbone->named_parameters()[item.key()])) << item.key();
}

// The OpenAI fixture's tensors with the text tower taken out, ready to be damaged.
ClipTextSource openai_source(const std::function<void(Checkpoint&)>& damage = {}) {
  Checkpoint checkpoint = load_checkpoint(folder().dir() + "openai_clip.pt");
  if (damage) damage(checkpoint);
  return take_clip_text_tensors(checkpoint);
}

std::string refusal(ClipTextSource source, int64_t image_embed_dim = 0, const std::string& path = "") {
  try {
    load_clip_text_tower(std::move(source), path, image_embed_dim);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ClipTextRefusals, MissingAndContradictingKeysAreNamed) {
  EXPECT_NO_THROW(load_clip_text_tower(openai_source(), "", 64));
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) { c.tensors.erase("ln_final.weight"); })),
                  "1 missing: ln_final.weight");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) { c.tensors.erase("transformer.resblocks.1.ln_1.weight"); })),
                  "missing tensor 'transformer.resblocks.1.ln_1.weight'");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) { c.tensors.erase("positional_embedding"); })),
                  "missing tensor 'positional_embedding'");
  EXPECT_CONTAINS(
      refusal(openai_source([](Checkpoint& c) { c.tensors["context_length"] = torch::tensor(int64_t(50)); })),
      "the file's 'context_length' is 50 but 'positional_embedding' has 77 positions");
  EXPECT_CONTAINS(
      refusal(openai_source([](Checkpoint& c) { c.tensors["vocab_size"] = torch::tensor(int64_t(49408)); })),
      "the file's 'vocab_size' is 49408 but 'token_embedding.weight' has 512 token ids");
  EXPECT_CONTAINS(refusal(openai_source(), 63),
                  "'text_projection' gives text embeddings of 64 values, the visual "
                  "tower's 'visual.proj' image embeddings of 63");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) {
                    c.tensors["transformer.resblocks.0.mlp.c_fc.weight"] =
                        c.tensors["transformer.resblocks.0.mlp.c_fc.weight"].slice(0, 0, 100);
                  })),
                  "transformer.resblocks.0.mlp.c_proj.weight: file [128,512] vs model [128,100]");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) {
                    c.tensors["token_embedding.weight"] = c.tensors["token_embedding.weight"].slice(1, 0, 96);
                  })),
                  "gives the width 96, not a multiple of 64");

  // Through the loader: the image analyses still open, the text is refused with the reason.
  TestFolder temp("clip-text");
  Checkpoint damaged = load_checkpoint(folder().dir() + "openai_clip.pt");
  damaged.tensors["context_length"] = torch::tensor(int64_t(50));
  save_safetensors(temp.file("damaged.safetensors"), damaged.tensors);
  LoadedModel model = load_model(temp.file("damaged.safetensors"), {}, torch::kCPU);
  EXPECT_TRUE(model.text_tower.is_empty());
  EXPECT_CONTAINS(model.text_tower_absent, "this file's text tower cannot be used: the file's 'context_length' is 50");
  ASSERT_EQ(model.report.warnings.size(), 1u);
  EXPECT_CONTAINS(model.report.warnings[0], "(the image analyses are unaffected)");
  EXPECT_EQ(model.vit_arch().output_kind, OutputKind::Embedding);
}

TEST(ClipTextRefusals, HuggingFaceConfigsThatContradictTheWeightsAreNamed) {
  TestFolder temp("clip-text");
  auto copy_with = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                       const std::function<void(Checkpoint&)>& damage = {}) {
    const fs::path target = temp.path() / name;
    fs::create_directories(target);
    for (const char* file : {"model.safetensors", "config.json", "preprocessor_config.json"})
      fs::copy_file(fs::path(folder().dir()) / "hf_clip" / file, target / file);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(target / "config.json"));
    edit(config);
    std::ofstream(target / "config.json") << config.dump();
    if (damage) {
      Checkpoint checkpoint = load_checkpoint((target / "model.safetensors").string());
      damage(checkpoint);
      save_safetensors((target / "model.safetensors").string(), checkpoint.tensors);
    }
    return load_model(target.string(), {}, torch::kCPU);
  };
  LoadedModel wide = copy_with("wide", [](nlohmann::json& c) { c["text_config"]["hidden_size"] = 512; });
  EXPECT_TRUE(wide.text_tower.is_empty());
  EXPECT_CONTAINS(wide.text_tower_absent,
                  "config.json text_config.hidden_size is 512 but "
                  "'text_model.embeddings.token_embedding.weight' has 96 channels");
  LoadedModel context =
      copy_with("context", [](nlohmann::json& c) { c["text_config"]["max_position_embeddings"] = 77; });
  EXPECT_CONTAINS(context.text_tower_absent, "'text_model.embeddings.position_embedding.weight' has 64 positions");
  LoadedModel heads = copy_with("heads", [](nlohmann::json& c) { c["text_config"]["num_attention_heads"] = 5; });
  EXPECT_CONTAINS(heads.text_tower_absent, "num_attention_heads 5 does not divide the width 96");
  LoadedModel eos = copy_with("eos", [](nlohmann::json& c) { c["text_config"]["eos_token_id"] = 1000; });
  EXPECT_CONTAINS(eos.text_tower_absent, "eos_token_id 1000 is outside the 1000 token ids");
  LoadedModel act = copy_with("act", [](nlohmann::json& c) { c["text_config"]["hidden_act"] = "relu"; });
  EXPECT_CONTAINS(act.text_tower_absent, "hidden_act 'relu' is not supported");
  LoadedModel no_k = copy_with(
      "no_k", [](nlohmann::json&) {},
      [](Checkpoint& c) { c.tensors.erase("text_model.encoder.layers.1.self_attn.k_proj.weight"); });
  EXPECT_CONTAINS(no_k.text_tower_absent, "missing tensor 'text_model.encoder.layers.1.self_attn.k_proj.weight'");
  // The visual tower of each opened as before.
  for (const LoadedModel* model : {&wide, &context, &heads, &eos, &act, &no_k})
    EXPECT_EQ(model->vit_arch().source_layout, CheckpointLayout::HfClip);
  // A text tower alone is no image model.
  try {
    copy_with(
        "text_only", [](nlohmann::json&) {},
        [](Checkpoint& c) {
          for (auto it = c.tensors.begin(); it != c.tensors.end();)
            it = it->first.rfind("vision_model.", 0) == 0 || it->first == "visual_projection.weight"
                     ? c.tensors.erase(it)
                     : std::next(it);
        });
    ADD_FAILURE() << "a text tower alone opened";
  } catch (const CheckpointError& e) {
    EXPECT_CONTAINS(e.what(), "a CLIP text tower alone, without the visual tower");
  }
}

// A shape costs nothing in a file ([5e7, 0] is 0 bytes): the bounds refuse it from the shape alone,
// before the tower is built.
TEST(ClipTextRefusals, HostileShapesAreRefusedByTheBoundsBeforeAllocation) {
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) {
                    c.tensors["token_embedding.weight"] = torch::empty({50000000, 0});
                  })),
                  "the CLIP text tower's vocabulary size read from 'token_embedding.weight' is 50000000, outside");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) {
                    c.tensors["positional_embedding"] = torch::empty({50000000, 0});
                  })),
                  "context length read from 'positional_embedding' is 50000000, outside");
  EXPECT_CONTAINS(refusal(openai_source([](Checkpoint& c) {
                    c.tensors["text_projection"] = torch::empty({0, 50000000});
                  })),
                  "embedding size read from 'text_projection' is 50000000");
  // Sizes each within its bound whose forward pass would not fit: refused on the estimate.
  ClipTextArch huge;
  huge.vocab_size = 49408;
  huge.context_length = 4096;
  huge.width = 16384;
  huge.layers = 48;
  huge.heads = 256;
  huge.mlp_hidden = 65536;
  huge.embed_dim = 1024;
  try {
    check_arch_limits(clip_text_arch_estimate(huge));
    ADD_FAILURE() << "a tower of " << clip_text_arch_estimate(huge).total_bytes() << " bytes passed";
  } catch (const CheckpointError& e) {
    EXPECT_CONTAINS(e.what(), "the CLIP text tower these shapes describe would need about");
  }
  // Through the loader, from a file whose shape is all there is.
  TestFolder temp("clip-text");
  Checkpoint hostile = load_checkpoint(folder().dir() + "openai_clip.pt");
  hostile.tensors["token_embedding.weight"] = torch::empty({50000000, 0});
  save_safetensors(temp.file("hostile.safetensors"), hostile.tensors);
  LoadedModel model = load_model(temp.file("hostile.safetensors"), {}, torch::kCPU);
  EXPECT_TRUE(model.text_tower.is_empty());
  EXPECT_CONTAINS(model.text_tower_absent, "vocabulary size read from 'token_embedding.weight' is 50000000");
}

TEST(ClipTextRefusals, AMemoryBoundKeepsLongPromptListsInPasses) {
  LoadedModel model = load_case(case_named("openai_pt"));
  const ClipTextArch& arch = model.text("test").arch();
  const double per_prompt = clip_text_arch_estimate(arch).forward_bytes;
  const int64_t step = clip_text_prompts_per_pass(arch);
  EXPECT_GE(step, 1);
  EXPECT_LE(double(step) * per_prompt, double(int64_t(1) << 30));
  ClipTextArch large = arch;
  large.context_length = 4096;
  large.heads = 16;
  EXPECT_EQ(clip_text_prompts_per_pass(large), 1) << "one prompt per pass when one is all 1 GiB holds";
}

}  // namespace test_clip_text
}  // namespace attnscope
