// The residual stream (issue 35) against the independent float64 reference written from ViT-Prisma's folded
// HookedViT and TransformerLens's patching (tests/python/reference_residual_stream.py): direct logit
// attribution, the patch logit lens, zero and mean head ablation, activation patching, on a plain ViT, a
// distilled DeiT, a DINOv2-like model with registers and LayerScale, a CLIP visual tower, FLatten's focused
// attention with its DWC, and a pooled model with fc_norm; the engine's resume and edits; the refusals.
//
// Tolerances. The forward runs in float32 (u = 2^-24). Float32 products are backward stable (inner size K:
// K u relative at worst, about sqrt(K) u in practice); these 2-3 block models (width <= 128, MLP <= 512) run
// about 15 products to their last block, so their activations carry a relative error (to each tensor's
// largest magnitude) of kActivationRelativeError, the bound test_attribution.cpp states for the same sizes.
// Every DLA value and lens entry is a float64 dot product of such activations (divided by the final scale)
// with a direction: its error is at most kActivationRelativeError times the reference's `scale` of it (max
// |component| / final scale x |direction|_1, summed over the read-out). The lens adds a float32 product of
// width C (C u relative). The decomposition's own residual (the output minus the sum of the components) is
// the forward's rounding: 2 additions per block and the final one, each by u of the stream's size, and the
// final norm and head (a sum of C terms: C u), all of at most the sum of the components' scales. Outputs of
// ablated and patched forwards are the same float32 computation as the unablated one, whose parity bound
// with these references is kOutputTolerance (tests/reference_cases.h); a patching metric
// (ld_p - ld_c) / (ld_clean - ld_c) moves by at most (1 + |m|) 2 dld / |ld_clean - ld_c|, dld the bound of
// one logit difference.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/residual_stream.h"
#include "models/model_loader.h"
#include "tests/case_folder.h"
#include "tests/numeric_bounds.h"
#include "tests/residual_stream_cases.h"

namespace attnscope {
namespace {

constexpr double kUnitRounding = 5.9604644775390625e-08;  // 2^-24
constexpr double kActivationRelativeError = 1e-5;
constexpr double kOutputTolerance = 1e-4;

const CaseFolder& folder() { return residual_stream_cases(); }

const nlohmann::json& find_case(const std::string& name) {
  for (const auto& c : folder().cases())
    if (c.at("name") == name) return c;
  throw std::runtime_error("no residual-stream case " + name);
}

LoadedModel load_case(const nlohmann::json& c) {
  return load_model(folder().dir() + c.at("model").get<std::string>(), {}, torch::kCPU);
}

ReadoutTarget target_of(const nlohmann::json& spec) {
  const std::string kind = spec.at("kind");
  if (kind == "class") return ReadoutTarget::of_class(spec.at("class").get<int>());
  if (kind == "direction")
    return ReadoutTarget::along(read_npy(folder().dir() + spec.at("direction").get<std::string>()));
  return ReadoutTarget::output_norm();
}

LogitDifference difference_of(const nlohmann::json& c) {
  LogitDifference difference{target_of(c.at("target")), std::nullopt};
  if (!c.at("baseline").is_null()) difference.baseline = target_of(c.at("baseline"));
  return difference;
}

// How far a read-out of outputs within kOutputTolerance each may be from the reference's.
double readout_tolerance(const ReadoutTarget& target, int64_t output_dim) {
  switch (target.kind) {
    case ReadoutTarget::Kind::Class:
      return kOutputTolerance;
    case ReadoutTarget::Kind::Direction:
      return kOutputTolerance * target.direction.abs().sum().item<double>();
    case ReadoutTarget::Kind::OutputNorm:
      return kOutputTolerance * std::sqrt(double(output_dim));
  }
  return 0.0;
}

double difference_tolerance(const LogitDifference& difference, int64_t output_dim) {
  return readout_tolerance(difference.target, output_dim) +
         (difference.baseline ? readout_tolerance(*difference.baseline, output_dim) : 0.0);
}

std::vector<int64_t> queries_of(const nlohmann::json& c) { return c.at("queries").get<std::vector<int64_t>>(); }

// Each layer's and head's attention rows at the case's queries against the reference's [L, h, Q, T].
void expect_rows(const ForwardOutput& output, const nlohmann::json& c, const torch::Tensor& reference) {
  ASSERT_EQ(int64_t(output.layers.size()), reference.size(0));
  for (int64_t layer = 0; layer < reference.size(0); ++layer)
    for (int64_t head = 0; head < reference.size(1); ++head)
      EXPECT_LT(max_abs_difference(output.layers[size_t(layer)].rows(0, head, queries_of(c)), reference[layer][head]),
                kOutputTolerance)
          << "rows of layer " << layer << " head " << head;
}

TEST(ResidualStream, DirectLogitAttributionMatchesPrismasDecomposition) {
  ASSERT_EQ(folder().cases().size(), 6u);
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel loaded = load_case(c);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    const torch::Tensor input = folder().array(c, "input");
    const TokenLayout layout = model.arch().layout_for(int(input.size(2)), int(input.size(3)));
    const ResidualRun run = record_residual_stream(model, input, case_settings(c), readout_recording(model, layout));
    EXPECT_LT(max_abs_difference(run.output.logits, folder().array(c, "output")), kOutputTolerance);
    // The output norm is read along the output's unit vector: the reference's, so that the values compare
    // along one direction (ours, from the float32 output, differs by its rounding); that reading the norm
    // is reading along the run's own unit vector is checked below.
    const nlohmann::json& spec = c.at("target");
    const bool norm = spec.at("kind") == "norm";
    const ReadoutTarget target =
        norm ? ReadoutTarget::along(read_npy(folder().dir() + spec.at("direction").get<std::string>()))
             : target_of(spec);
    const LogitAttribution attribution = direct_logit_attribution(model, run, target);
    if (norm) {
      const LogitAttribution along_norm = direct_logit_attribution(model, run, ReadoutTarget::output_norm());
      const torch::Tensor output = run.output.logits[0].to(torch::kDouble);
      const torch::Tensor own = output / output.norm().item<double>();
      const LogitAttribution along_own = direct_logit_attribution(model, run, ReadoutTarget::along(own));
      EXPECT_EQ(along_norm.values, along_own.values);
      EXPECT_DOUBLE_EQ(along_norm.output, output.norm().item<double>());
    }

    EXPECT_NEAR(attribution.output, c.at("readout").get<double>(),
                readout_tolerance(target, c.at("output_dim").get<int64_t>()));
    const auto labels = c.at("dla_labels").get<std::vector<std::string>>();
    const auto values = c.at("dla_values").get<std::vector<double>>();
    const auto scales = c.at("dla_scales").get<std::vector<double>>();
    ASSERT_EQ(attribution.labels, labels);
    double scale_sum = 0.0;
    for (size_t i = 0; i < labels.size(); ++i) {
      EXPECT_NEAR(attribution.values[i], values[i], kActivationRelativeError * scales[i] + 1e-12) << labels[i];
      scale_sum += scales[i];
    }
    const torch::Tensor heads = folder().array(c, "dla_heads").to(torch::kDouble);
    const torch::Tensor head_scales = folder().array(c, "dla_head_scales").to(torch::kDouble);
    ASSERT_EQ(attribution.heads.sizes(), heads.sizes());
    EXPECT_TRUE(
        ((attribution.heads - heads).abs() <= kActivationRelativeError * head_scales + 1e-12).all().item<bool>())
        << "per-head values off by " << (attribution.heads - heads).abs().max().item<double>() << "\n"
        << attribution.heads << "\n"
        << heads;
    // The bias share: the layer's value minus its heads', within the sum of their bounds.
    const torch::Tensor attn_bias = folder().array(c, "dla_attn_bias").to(torch::kDouble);
    for (int64_t layer = 0; layer < attn_bias.size(0); ++layer) {
      const double bound =
          kActivationRelativeError * (scales[size_t(1 + 2 * layer)] + head_scales[layer].sum().item<double>());
      EXPECT_NEAR(attribution.attn_bias[layer].item<double>(), attn_bias[layer].item<double>(), bound + 1e-12)
          << "layer " << layer << "'s bias share";
    }
    // The components sum to the output up to the forward's own rounding.
    const double width = double(model.arch().embed_dim), depth = double(model.arch().depth);
    EXPECT_LT(std::abs(attribution.residual), kUnitRounding * (2 * depth + 2 + width) * scale_sum)
        << "the components do not sum to the output";
  }
}

TEST(ResidualStream, EverySwappableKernelDecomposesExactly) {
  const auto& c = find_case("plain");
  LoadedModel loaded = load_case(c);
  VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
  c10::InferenceMode inference;
  const torch::Tensor input = folder().array(c, "input");
  const TokenLayout layout = model.arch().layout_for(int(input.size(2)), int(input.size(3)));
  for (const char* variant : {"softmax", "linear", "focused", "enhanced", "window", "anchor"}) {
    SCOPED_TRACE(variant);
    AttentionSettings settings;
    settings.variant = parse_variant(variant);
    settings.window = 2;  // the window variant on the 4 x 4 grid; ignored by the global kernels
    settings.anchors = 4;
    const ResidualRun run = record_residual_stream(model, input, settings, readout_recording(model, layout));
    const LogitAttribution attribution = direct_logit_attribution(model, run, ReadoutTarget::of_class(3));
    double magnitude = 0.0;
    for (double value : attribution.values) magnitude += std::abs(value);
    magnitude += attribution.heads.abs().sum().item<double>();
    EXPECT_LT(std::abs(attribution.residual),
              kUnitRounding * (2 * model.arch().depth + 2 + model.arch().embed_dim) * magnitude);
    // Each layer's value is its heads plus its bias share by construction; the heads must carry it.
    EXPECT_GT(attribution.heads.abs().sum().item<double>(), 0.0);
  }
}

TEST(ResidualStream, PatchLogitLensMatchesPrismasPatchLogitDirections) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel loaded = load_case(c);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    const torch::Tensor input = folder().array(c, "input");
    const TokenLayout layout = model.arch().layout_for(int(input.size(2)), int(input.size(3)));
    const ResidualRun run = record_residual_stream(model, input, case_settings(c), readout_recording(model, layout));
    const torch::Tensor lens = patch_logit_lens(model, run);
    const torch::Tensor reference = folder().array(c, "lens").to(torch::kDouble);
    ASSERT_EQ(lens.sizes(), reference.sizes());
    EXPECT_EQ(lens.size(1), c.at("tokens").get<int64_t>());
    const double relative = kActivationRelativeError + double(model.arch().embed_dim) * kUnitRounding;
    const torch::Tensor bound = relative * folder().array(c, "lens_scales").to(torch::kDouble);
    const torch::Tensor error = (lens.to(torch::kDouble) - reference).abs();
    EXPECT_TRUE((error <= bound + 1e-12).all().item<bool>())
        << (error - bound).max().item<double>() << " past the bound";
  }
}

TEST(ResidualStream, ZeroAndMeanAblationMatchPrismasHookedForward) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel loaded = load_case(c);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    const torch::Tensor input = folder().array(c, "input");
    const AttentionSettings settings = case_settings(c);
    StreamRecording inputs;
    inputs.resid_pre = true;
    const ResidualRun clean = record_residual_stream(model, input, settings, inputs);

    HeadAblation zero{case_ablated_heads(c), AblationKind::Zero, {}};
    const ResidualRun resumed = ablate_heads(model, input, settings, zero, {}, {}, &clean);
    EXPECT_LT(max_abs_difference(resumed.output.logits, folder().array(c, "zero_output")), kOutputTolerance);
    expect_rows(resumed.output, c, folder().array(c, "zero_rows"));
    // Resuming at the first ablated block computes what the whole forward computes, bit for bit.
    const ResidualRun full = ablate_heads(model, input, settings, zero);
    EXPECT_TRUE(torch::equal(full.output.logits, resumed.output.logits));

    std::vector<torch::Tensor> images;
    const torch::Tensor mean_images = folder().array(c, "mean_images");
    for (int64_t i = 0; i < mean_images.size(0); ++i) images.push_back(mean_images.narrow(0, i, 1));
    int64_t reported = 0;
    HeadAblation mean{
        case_ablated_heads(c), AblationKind::Mean,
        mean_head_outputs(model, images, settings, case_ablated_heads(c), [&](int64_t done, int64_t total) {
          EXPECT_EQ(total, mean_images.size(0));
          reported = done;
        })};
    EXPECT_EQ(reported, mean_images.size(0));
    const torch::Tensor reference_means = folder().array(c, "means");
    EXPECT_LT(max_abs_difference(mean.means.z, reference_means),
              kActivationRelativeError * reference_means.abs().max().item<double>());
    const ResidualRun mean_ablated = ablate_heads(model, input, settings, mean, {}, {}, &clean);
    EXPECT_LT(max_abs_difference(mean_ablated.output.logits, folder().array(c, "mean_output")), kOutputTolerance);
    expect_rows(mean_ablated.output, c, folder().array(c, "mean_rows"));
  }
}

TEST(ResidualStream, ActivationPatchingMatchesTransformerLens) {
  for (const auto& c : folder().cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel loaded = load_case(c);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    const LogitDifference difference = difference_of(c);
    int64_t last_done = 0, last_total = 0;
    const ActivationPatching patching =
        activation_patching(model, folder().array(c, "input"), folder().array(c, "corrupt"), case_settings(c),
                            difference, [&](int64_t done, int64_t total) {
                              EXPECT_EQ(done, last_done + 1);
                              last_done = done;
                              last_total = total;
                            });
    const int64_t depth = model.arch().depth, heads = model.arch().heads, tokens = c.at("tokens");
    EXPECT_EQ(last_total, depth * (heads + tokens));
    EXPECT_EQ(last_done, last_total);
    EXPECT_EQ(patching.forwards, last_total);
    // Each patch resumed at its block: blocks L.. only.
    EXPECT_EQ(patching.blocks_run, (heads + tokens) * depth * (depth + 1) / 2);

    const double dld = difference_tolerance(difference, c.at("output_dim").get<int64_t>());
    const double clean = c.at("ld_clean"), corrupt = c.at("ld_corrupt");
    EXPECT_NEAR(patching.clean, clean, dld);
    EXPECT_NEAR(patching.corrupt, corrupt, dld);
    const double denominator = std::abs(clean - corrupt) - 2 * dld;
    ASSERT_GT(denominator, 0.0);
    for (const auto& [ours, key] : {std::pair{patching.heads, "patch_heads"}, {patching.residual, "patch_resid"}}) {
      const torch::Tensor reference = folder().array(c, key).to(torch::kDouble);
      ASSERT_EQ(ours.sizes(), reference.sizes()) << key;
      const torch::Tensor bound = (1 + reference.abs()) * 2 * dld / denominator;
      EXPECT_TRUE(((ours - reference).abs() <= bound).all().item<bool>())
          << key << ": " << ((ours - reference).abs() - bound).max().item<double>() << " past the bound";
    }
    // Patching every token of block 0's input from the clean run gives the clean run: the metric is 1 where
    // one token carries everything, and the metric of the class token at the last block is the read-out's.
    EXPECT_TRUE(torch::isfinite(patching.residual).all().item<bool>());
  }
}

// ---- The engine: unhooked forwards, resume, edits -------------------------------------------------

TEST(ResidualStream, RecordingInputsOnlyAndResumingLeaveTheForwardBitIdentical) {
  const auto& c = find_case("plain");
  LoadedModel loaded = load_case(c);
  VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
  c10::InferenceMode inference;
  const torch::Tensor input = folder().array(c, "input");
  const ForwardOutput plain = model.forward(input, {});
  StreamRecording inputs;
  inputs.resid_pre = true;
  ResidualStreamRecord record;
  const ForwardOutput recorded = model.forward_with_streams(input, {}, {}, {}, inputs, &record);
  EXPECT_TRUE(torch::equal(plain.logits, recorded.logits));
  ASSERT_EQ(recorded.layers.size(), plain.layers.size());
  EXPECT_TRUE(torch::equal(plain.layers.back().q, recorded.layers.back().q));
  for (int first = 0; first <= model.arch().depth; ++first) {
    const torch::Tensor from = first < model.arch().depth ? record.resid_pre[size_t(first)] : record.resid_final;
    const ForwardOutput resumed = model.forward_from_block(first, from, plain.layout, {}, {}, {}, {}, nullptr);
    EXPECT_TRUE(torch::equal(plain.logits, resumed.logits)) << "resumed at block " << first;
    EXPECT_EQ(resumed.layers.size(), size_t(model.arch().depth - first));
  }
  // A replacement by the run's own z and the input's own value change nothing but rounding.
  StreamRecording everything = readout_recording(model, plain.layout);
  everything.tokens.clear();
  ResidualStreamRecord full;
  const ForwardOutput with_streams = model.forward_with_streams(input, {}, {}, {}, everything, &full);
  EXPECT_LT(max_abs_difference(with_streams.logits, plain.logits), kOutputTolerance);
  StreamEdits same;
  same.heads.push_back({1, 2, full.z[1][0][2]});
  same.residuals.push_back({2, 5, full.resid_pre[2][0][5]});
  const ForwardOutput edited = model.forward_with_streams(input, {}, {}, same, {}, nullptr);
  EXPECT_LT(max_abs_difference(edited.logits, plain.logits), kOutputTolerance);
}

// fold_value_biases' premise: with softmax the rows sum to one, so a layer's output minus its heads' results
// is the same at every token, proj.bias + W_O (b_V + W_V norm1.bias) (Prisma's folded b_O, before centring);
// FLatten's DWC on V (zero padding at the border) makes it vary by token, which the exact bias share absorbs.
TEST(ResidualStream, TheBiasShareIsFoldValueBiasesOutputBiasUnderSoftmax) {
  for (const char* name : {"plain", "focused"}) {
    SCOPED_TRACE(name);
    const auto& c = find_case(name);
    LoadedModel loaded = load_case(c);
    VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
    c10::InferenceMode inference;
    StreamRecording everything = readout_recording(model, {});
    everything.tokens.clear();
    const ResidualRun run = record_residual_stream(model, folder().array(c, "input"), case_settings(c), everything);
    for (int layer = 0; layer < model.arch().depth; ++layer) {
      torch::Tensor heads = torch::zeros_like(run.record.attn_out[size_t(layer)][0]);
      for (int head = 0; head < model.arch().heads; ++head)
        heads += head_result(model, layer, head, run.record.z[size_t(layer)][0][head]);
      const torch::Tensor share = run.record.attn_out[size_t(layer)][0] - heads;  // [T, C]
      auto* block = model.blocks[size_t(layer)]->as<BlockImpl>();
      const torch::Tensor folded = block->attn->proj->bias + torch::mv(block->attn->proj->weight, block->value_bias());
      const double scale =
          run.record.attn_out[size_t(layer)].abs().max().item<double>() + folded.abs().max().item<double>();
      const double spread = max_abs_difference(share, folded.expand_as(share));
      if (std::string(name) == "plain")
        EXPECT_LT(spread, kActivationRelativeError * scale) << "layer " << layer;
      else
        EXPECT_GT(spread, 100 * kActivationRelativeError * scale) << "layer " << layer;
    }
  }
}

TEST(ResidualStream, EditsOutsideTheModelOrTheResumedBlocksAreRefused) {
  const auto& c = find_case("plain");
  LoadedModel loaded = load_case(c);
  VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
  c10::InferenceMode inference;
  const torch::Tensor input = folder().array(c, "input");
  StreamRecording inputs;
  inputs.resid_pre = true;
  ResidualStreamRecord record;
  const ForwardOutput output = model.forward_with_streams(input, {}, {}, {}, inputs, &record);
  auto refused = [&](const StreamEdits& edits, int first, const std::string& expected) {
    try {
      model.forward_from_block(first, record.resid_pre[size_t(first)], output.layout, {}, {}, edits, {}, nullptr);
      ADD_FAILURE() << "not refused: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  StreamEdits edits;
  edits.heads = {{3, 0, {}}};
  refused(edits, 0, "layer 3 is outside 0..2");
  edits.heads = {{0, 4, {}}};
  refused(edits, 0, "head 4 is outside 0..3");
  edits.heads = {{1, 1, {}}, {1, 1, {}}};
  refused(edits, 0, "listed twice");
  edits.heads = {{0, 1, {}}};
  refused(edits, 1, "before block 1");
  edits.heads = {{1, 1, torch::zeros({5, 16})}};
  refused(edits, 0, "not [17, 16]");
  edits.heads.clear();
  edits.residuals = {{1, 17, torch::zeros({64})}};
  refused(edits, 0, "token is outside 0..16");
  edits.residuals = {{1, 3, torch::zeros({32})}};
  refused(edits, 0, "must be [64]");
}

TEST(ResidualStream, BadRequestsAreRefusedWithTheReason) {
  const auto& c = find_case("plain");
  LoadedModel loaded = load_case(c);
  VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
  c10::InferenceMode inference;
  const torch::Tensor input = folder().array(c, "input");
  const AttentionSettings settings;
  auto expect_refusal = [](const std::function<void()>& run, const std::string& expected) {
    try {
      run();
      ADD_FAILURE() << "not refused: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  // Heads as text: malformed, out of range, twice.
  EXPECT_EQ(parse_heads("0.1,2.3", 3, 4), (std::vector<HeadIndex>{{0, 1}, {2, 3}}));
  expect_refusal([] { parse_heads("1.x", 3, 4); }, "'1.x' is not a head");
  expect_refusal([] { parse_heads("3.0", 3, 4); }, "layer 3 is outside 0..2");
  expect_refusal([] { parse_heads("0.4", 3, 4); }, "head 4 is outside 0..3");
  expect_refusal([] { parse_heads("1.2,1.2", 3, 4); }, "listed twice");
  expect_refusal([] { parse_heads("", 3, 4); }, "is not a head");
  // Ablation: no heads, heads out of range, a mean without images or means.
  expect_refusal([&] { ablate_heads(model, input, settings, {{}, AblationKind::Zero, {}}); }, "no heads listed");
  expect_refusal(
      [&] {
        ablate_heads(model, input, settings, {{{0, 9}}, AblationKind::Zero, {}});
      },
      "head 9 is outside");
  expect_refusal(
      [&] {
        ablate_heads(model, input, settings, {{{0, 1}}, AblationKind::Mean, {}});
      },
      "its mean output was not computed");
  expect_refusal([&] { mean_head_outputs(model, {}, settings, {{0, 1}}); }, "needs images");
  const torch::Tensor wider = torch::zeros({1, 3, 64, 80});
  expect_refusal(
      [&] {
        mean_head_outputs(model, {input, wider}, settings, {{0, 1}});
      },
      "every image must have one size");
  const HeadMeans means = mean_head_outputs(model, {input}, settings, {{0, 1}});
  expect_refusal(
      [&] {
        ablate_heads(model, wider, settings, {{{0, 1}}, AblationKind::Mean, means});
      },
      "this image has 21");
  // Patching: images of different sizes, no difference between the runs, a class against itself.
  const LogitDifference classes{ReadoutTarget::of_class(1), ReadoutTarget::of_class(2)};
  expect_refusal([&] { activation_patching(model, input, wider, settings, classes); }, "both need one size");
  expect_refusal([&] { activation_patching(model, input, input.clone(), settings, classes); }, "undefined");
  expect_refusal(
      [&] {
        activation_patching(model, input, folder().array(c, "corrupt"), settings,
                            {ReadoutTarget::of_class(1), ReadoutTarget::of_class(1)});
      },
      "against itself");
  expect_refusal([&] { ReadoutTarget::of_class(10).check(10); }, "the output has 10 values");
  expect_refusal([&] { ReadoutTarget::along(torch::zeros({10})).check(10); }, "not zero");
}

TEST(ResidualStream, CancellingPatchingStopsBetweenBlocks) {
  const auto& c = find_case("plain");
  LoadedModel loaded = load_case(c);
  VisionTransformerImpl& model = residual_stream_model(*loaded.backbone);
  c10::InferenceMode inference;
  int64_t patches = 0;
  EXPECT_THROW(activation_patching(
                   model, folder().array(c, "input"), folder().array(c, "corrupt"), {}, difference_of(c),
                   [&](int64_t done, int64_t) { patches = done; }, [&] { return patches >= 5; }),
               Cancelled);
  EXPECT_EQ(patches, 5);
}

TEST(ResidualStream, HierarchicalModelsAndNonlinearReadoutsAreRefused) {
  LoadedModel swin =
      load_model(std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/models/flatten_swin.safetensors", {}, torch::kCPU);
  try {
    residual_stream_model(*swin.backbone);
    ADD_FAILURE() << "a hierarchical model was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("hierarchical"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("merge tokens"), std::string::npos) << e.what();
  }
  // Hugging Face's ViTModel with its pooler: DLA and the lens refuse its tanh; ablation runs.
  LoadedModel pooled = load_model(std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hub_cases/hf_vit_model", {}, torch::kCPU);
  VisionTransformerImpl& model = residual_stream_model(*pooled.backbone);
  ASSERT_TRUE(model.arch().pooler);
  c10::InferenceMode inference;
  const int side = model.arch().native_height();
  const torch::Tensor image = torch::randn({1, 3, side, model.arch().native_width()});
  const TokenLayout layout = model.arch().layout_for(side, model.arch().native_width());
  const ResidualRun run = record_residual_stream(model, image, {}, readout_recording(model, layout));
  try {
    direct_logit_attribution(model, run, ReadoutTarget::output_norm());
    ADD_FAILURE() << "the pooler's read-out was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pooler"), std::string::npos) << e.what();
  }
  EXPECT_THROW(patch_logit_lens(model, run), std::invalid_argument);
  const ResidualRun ablated = ablate_heads(model, image, {}, {{{0, 0}}, AblationKind::Zero, {}});
  EXPECT_EQ(ablated.output.logits.sizes(), run.output.logits.sizes());
}

}  // namespace
}  // namespace attnscope
