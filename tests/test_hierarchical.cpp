// Parity of the hierarchical families (Swin, FLatten-Swin, PVT v2, PVT v2-li, FLatten-PVT v2) with
// the independent Python references (tests/python/reference_hier.py): logits and every layer's
// rows over its key grid, from every checkpoint layout each family has, within 1e-4.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/gradcam.h"
#include "core/assets.h"
#include "core/npy.h"
#include "models/model_loader.h"
#include "reference_cases.h"

namespace attnscope {
namespace test_hierarchical {

using namespace testing_cases;

const std::string kCaseDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/hier_cases/";

const std::vector<nlohmann::json>& cases() { return cached_cases(kCaseDir); }

TEST(Hierarchical, EveryCaseMatchesThePythonReference) {
  configure_threads(2);
  ASSERT_GE(cases().size(), 30u);
  std::set<std::string> families, layouts;
  double worst_logits = 0;
  for (const auto& c : cases()) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    LoadedModel model = load_model(kCaseDir + c.at("model").get<std::string>(), {}, torch::kCPU);
    families.insert(c.at("family").get<std::string>());
    layouts.insert(c.at("layout").get<std::string>());
    EXPECT_TRUE(model.backbone->hierarchical());
    c10::InferenceMode inference_mode;
    const ForwardOutput output = forward_and_check_logits(model, kCaseDir, c, kParityTolerance, worst_logits);

    for_each_reference_layer(output, c, [&](const AttentionCapture& capture, const nlohmann::json& reference) {
      EXPECT_EQ(capture.placement.shift_h, reference["shift"][0].get<int>());
      EXPECT_EQ(capture.placement.shift_w, reference["shift"][1].get<int>());
      ASSERT_EQ(capture.heads, reference.at("heads").get<int>());
      const torch::Tensor expected = read_npy(kCaseDir + reference.at("rows").get<std::string>());  // [h, Q, kh, kw]
      auto rows_of = [&](int head, const std::vector<int64_t>& at) { return capture.rows(0, head, at); };
      expect_rows_match(capture, reference, reference_queries(capture, reference), expected, rows_of, kParityTolerance);
    });
  }
  EXPECT_EQ(families, (std::set<std::string>{"swin", "flatten_swin", "pvt_v2", "flatten_pvt_v2"}));
  EXPECT_EQ(layouts, (std::set<std::string>{"timm", "microsoft", "original"}));
}

// Inference on the CPU runs blocks by row and window chunks (BLAS, channels-last convolutions);
// autograd runs the plain graph. Both give the same logits, rows and normed inputs, on every case
// and on grids that Swin's windows do not tile (padded, shifted and padded).
TEST(Hierarchical, ChunkedInferenceEqualsThePlainGraph) {
  configure_threads(2);
  auto compare = [](LoadedModel& model, const torch::Tensor& input, const AttentionSettings& settings) {
    ForwardOutput plain, chunked;
    {
      torch::AutoGradMode with_autograd(true);
      plain = model.forward(input, settings);
    }
    {
      c10::InferenceMode inference_mode;
      chunked = model.forward(input, settings);
    }
    EXPECT_LT(max_abs_difference(plain.logits.detach(), chunked.logits), 1e-5) << "logits";
    ASSERT_EQ(plain.layers.size(), chunked.layers.size());
    for (size_t l = 0; l < plain.layers.size(); ++l) {
      const AttentionCapture& a = plain.layers[l];
      const AttentionCapture& b = chunked.layers[l];
      SCOPED_TRACE("layer " + std::to_string(l) + " (" + a.placement.name + ")");
      EXPECT_LT(max_abs_difference(a.normed_input.detach(), b.normed_input), 1e-5) << "normed input";
      const std::vector<int64_t> queries{0, a.layout.patch_token(a.layout.grid_h - 1, a.layout.grid_w / 2)};
      for (const int64_t image : {int64_t(0), input.size(0) - 1})
        for (int head = 0; head < a.heads; ++head)
          EXPECT_LT(max_abs_difference(a.rows(image, head, queries).detach(), b.rows(image, head, queries)), 1e-5)
              << "image " << image << " head " << head;
    }
  };
  for (const auto& c : cases()) {
    SCOPED_TRACE("case " + c.at("name").get<std::string>());
    LoadedModel model = load_model(kCaseDir + c.at("model").get<std::string>(), {}, torch::kCPU);
    compare(model, read_npy(kCaseDir + c.at("input").get<std::string>()), settings_from(c.at("variant")));
  }
  LoadedModel swin = load_model(kCaseDir + "swin_a.safetensors", {}, torch::kCPU);
  {
    SCOPED_TRACE("swin_a at 60x44 (a 15x11 grid in windows of 4)");
    compare(swin, torch::randn({1, 3, 60, 44}), AttentionSettings{});
  }
  // Three images of 3 x 3 windows each: the two cores' chunks of windows split an image.
  SCOPED_TRACE("swin_a, a batch of 3 at 44x44");
  compare(swin, torch::randn({3, 3, 44, 44}), AttentionSettings{});
}

// Without captures (integrated gradients, Score-CAM's probes) a forward still reports the first
// attention layer's grid and patch size, not the last stage's grid: IG sums its pixel map over it.
TEST(Hierarchical, OutputLayoutWithoutCapturesIsTheFirstLayers) {
  const std::string part2 = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/part2_cases/";
  std::set<std::string> families;
  for (const std::string& dir : {kCaseDir, part2}) {
    for (const auto& c : read_cases(dir)) {
      LoadedModel model = load_model(dir + c.at("model").get<std::string>(), {}, torch::kCPU);
      if (!families.insert(model.family()).second) continue;
      SCOPED_TRACE(model.family());
      const torch::Tensor input = read_npy(dir + c.at("input").get<std::string>());
      c10::InferenceMode inference_mode;
      ForwardOptions without_capture;
      without_capture.capture = false;
      const TokenLayout plain = model.forward(input, AttentionSettings{}, without_capture).layout;
      const TokenLayout first = model.forward(input, AttentionSettings{}).layers.front().layout;
      EXPECT_EQ(plain.grid_h, first.grid_h);
      EXPECT_EQ(plain.grid_w, first.grid_w);
      EXPECT_EQ(plain.patch_size, first.patch_size);
    }
  }
  EXPECT_GE(families.size(), 7u);
}

// A Swin row of a shifted block is zero (or the -100 mask's ~1e-44) outside the query's window.
TEST(Hierarchical, ShiftedWindowRowsStayInTheirWindow) {
  LoadedModel model = load_model(kCaseDir + "swin_a.safetensors", {}, torch::kCPU);
  c10::InferenceMode inference_mode;
  const ForwardOutput output = model.forward(torch::randn({1, 3, 64, 64}), AttentionSettings{});
  const AttentionCapture& shifted = output.layers[1];
  ASSERT_EQ(shifted.placement.access, "shifted-window");
  ASSERT_EQ(shifted.placement.window_h, 4);
  ASSERT_EQ(shifted.placement.shift_h, 2);
  // Query (3, 3): in the shifted frame it sits in the window of rows 1..4, columns 1..4 of the image.
  const torch::Tensor row = shifted.key_grid(shifted.row(0, 0, shifted.layout.patch_token(3, 3)));
  EXPECT_NEAR(row.sum().item<double>(), 1.0, 1e-5);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      const bool inside = r >= 2 && r < 6 && col >= 2 && col < 6;
      if (!inside) {
        EXPECT_LT(row[r][col].item<double>(), 1e-30) << r << "," << col;
      }
    }
}

// Grad-CAM reads any stage's hook point at that stage's grid, with timm's names and the
// across-stages alias.
TEST(Hierarchical, GradCamAtStageHookPoints) {
  for (const char* file : {"swin_a.safetensors", "pvt_a.safetensors"}) {
    SCOPED_TRACE(file);
    LoadedModel model = load_model(kCaseDir + file, {}, torch::kCPU);
    const torch::Tensor image = torch::randn({1, 3, 64, 64});
    const GradCamResult last = grad_cam_at(model.native("Grad-CAM"), image);
    EXPECT_EQ(last.layer, model.backbone->default_hook_point());
    const GradCamResult early = grad_cam_at(model.native("Grad-CAM"), image, "blocks.0.norm1");
    EXPECT_GT(early.layout.grid_h, last.layout.grid_h);
    EXPECT_EQ(early.cam.size(0), early.layout.grid_h);
    EXPECT_GT(early.max_abs_gradient, 0.0);
  }
}

// Every hook point a forward pass offers is a module of the checkpoint (loading is a name walk),
// names itself when given back, and "blocks.N" names the N-th captured layer, in every family and
// layout: Grad-CAM's hook points are the names users already know from the authors' code.
TEST(Hierarchical, HookPointsAreTheCheckpointsModuleNames) {
  const std::string part2 = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/part2_cases/";
  std::set<std::string> families;
  for (const std::string& dir : {kCaseDir, part2}) {
    for (const auto& c : read_cases(dir)) {
      LoadedModel model = load_model(dir + c.at("model").get<std::string>(), {}, torch::kCPU);
      if (!families.insert(model.family()).second) continue;
      SCOPED_TRACE(model.family());
      Backbone& backbone = model.native("hook points");
      std::vector<std::string> points;
      ForwardOptions options;
      options.hook = [&](const HookPoint& point, torch::Tensor&) { points.push_back(point.name); };
      const ForwardOutput output = backbone.forward(read_npy(dir + c.at("input").get<std::string>()), {}, options);
      ASSERT_EQ(int(output.layers.size()), backbone.attention_layers());
      std::set<std::string> modules;
      for (const auto& parameter : backbone.named_parameters()) modules.insert(parameter.key());
      auto is_module = [&](const std::string& name) {
        auto it = modules.lower_bound(name + ".");
        return it != modules.end() && it->rfind(name + ".", 0) == 0;
      };
      for (const std::string& point : points) {
        EXPECT_TRUE(is_module(point)) << point;
        EXPECT_EQ(backbone.resolve_hook_point(point), point);
      }
      for (size_t layer = 0; layer < output.layers.size(); ++layer) {
        const std::string& block = output.layers[layer].placement.name;
        EXPECT_TRUE(is_module(block)) << block;
        EXPECT_EQ(backbone.resolve_hook_point("blocks." + std::to_string(layer)), block);
        EXPECT_NE(std::find(points.begin(), points.end(), block), points.end()) << block << " has no hook";
      }
      EXPECT_NE(std::find(points.begin(), points.end(), backbone.default_hook_point()), points.end());
      try {
        backbone.resolve_hook_point("blocks.999");
        ADD_FAILURE() << "blocks.999 must not resolve";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("blocks.N with N counting the " +
                                             std::to_string(backbone.attention_layers()) + " blocks"),
                  std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_GE(families.size(), 7u);
}

// What Grad-CAM's --gradcam-layer accepted and named before the families shared one resolver.
TEST(Hierarchical, HookPointSpecsResolveAsEachFamilyNamesThem) {
  const std::string part2 = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/part2_cases/";
  const std::string vit = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/bad_inputs/good.safetensors";
  struct Case {
    std::string file;
    std::vector<std::pair<std::string, std::string>> resolved;  // spec -> module
    std::vector<std::string> refused;
  };
  const std::vector<Case> cases = {
      {kCaseDir + "swin_a.safetensors",  // depths 2, 2, 2, 1
       {{"", "layers.3.blocks.0.norm1"},
        {"norm", "norm"},
        {"blocks.2", "layers.1.blocks.0"},
        {"blocks.-1.norm1", "layers.3.blocks.0.norm1"},
        {"layers.-2.blocks.1", "layers.2.blocks.1"}},
       {"layers.1", "blocks.2.norm2", "stages.0.norm", "layers.4.blocks.0", "blocks.7"}},
      {kCaseDir + "swin_a.ms.pth", {{"layers.1.blocks.1.norm1", "layers.1.blocks.1.norm1"}}, {}},
      {kCaseDir + "pvt_a.safetensors",  // depths 2, 2, 2, 1
       {{"", "stages.3.blocks.0.norm1"},
        {"norm", "stages.3.norm"},
        {"stages.1.norm", "stages.1.norm"},
        {"stages.-1.norm", "stages.3.norm"},
        {"blocks.3.norm1", "stages.1.blocks.1.norm1"}},
       {"stages.4.norm", "stages.1.blocks.0.norm", "stages.1", "merge1"}},
      {part2 + "cswin_a.safetensors",  // depths 1, 1, 2, 1
       {{"", "stage4.0.norm1"},
        {"merge-1", "merge3"},
        {"merge1", "merge1"},
        {"stage1_conv_embed", "stage1_conv_embed"},
        {"blocks.3", "stage3.1"},
        {"stage3.-1.norm1", "stage3.1.norm1"}},
       {"merge0", "merge4", "stage0.0", "stage-1.0", "stage5.0", "stages.0.0"}},
      {part2 + "l2vit_a.safetensors",  // depths 2, 2, 2, 2
       {{"", "stages.3.1.norm1"}, {"stages.1.-1", "stages.1.1"}, {"blocks.5", "stages.2.1"}, {"norm", "norm"}},
       {"stages.1", "stages.1.blocks.0", "stages.0.2"}},
      {part2 + "care_a.safetensors",  // depths 1, 2, 2, 2
       {{"", "stages.3.blocks.1"},
        {"stages.1", "stages.1.blocks.1"},
        {"stages.-1", "stages.3.blocks.1"},
        {"stem", "stem"},
        {"blocks.3", "stages.2.blocks.0"}},
       {"blocks.3.norm1", "stages.1.norm", "norm", "stages.1.blocks.0.norm1"}},
      {vit,  // depth 3
       {{"", "blocks.2.norm1"}, {"blocks.-1.norm2", "blocks.2.norm2"}, {"blocks.0", "blocks.0"}, {"norm", "norm"}},
       {"blocks.3", "blocks.0.norm3", "layers.0.blocks.0", "stages.0.norm"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const LoadedModel model = load_model(c.file, {}, torch::kCPU);
    for (const auto& [spec, module] : c.resolved) EXPECT_EQ(model.backbone->resolve_hook_point(spec), module) << spec;
    for (const std::string& spec : c.refused)
      EXPECT_THROW(model.backbone->resolve_hook_point(spec), std::invalid_argument) << spec;
  }
}

// An input too small for a family's stem and merges is refused before anything runs, in the words
// each family used before they shared one forward pass.
TEST(Hierarchical, TooSmallInputsAreRefusedInTheFamilysWords) {
  const std::string part2 = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/part2_cases/";
  struct Case {
    std::string file;
    std::vector<int64_t> shape;
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {kCaseDir + "pvt_a.safetensors", {1, 3, 4, 16}, "input must be at least 8x8 pixels"},
      {part2 + "cswin_a.safetensors", {1, 3, 2, 16}, "input 16x2 is smaller than the 7x7 stem can read"},
      {part2 + "care_a.safetensors",  // 4 stages
       {1, 3, 16, 64},
       "input must be at least 32x32 pixels (a 4-pixel stem and 3 halvings)"},
      {kCaseDir + "swin_a.safetensors", {1, 3, 0, 32}, "input 32x0 is not a multiple of the patch size "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    LoadedModel model = load_model(c.file, {}, torch::kCPU);
    try {
      model.backbone->forward(torch::zeros(c.shape), {});
      ADD_FAILURE() << "a too small input must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.refusal, 0), 0u) << e.what();
    }
  }
}

TEST(Hierarchical, MissingOrMisshapenKeysAreNamed) {
  Checkpoint checkpoint = load_checkpoint(kCaseDir + "swin_a.safetensors");
  auto without = checkpoint;
  without.tensors.erase("layers.1.blocks.0.attn.qkv.weight");
  expect_refusal_naming(without, "layers.1.blocks.0.attn.qkv.weight");
  auto misshapen = checkpoint;
  misshapen.tensors["layers.0.blocks.1.mlp.fc2.weight"] = torch::zeros({3, 3});
  expect_refusal_naming(misshapen, "layers.0.blocks.1.mlp.fc2.weight");
}

// The window option's meaning is a typed value per family, which the GUI's control reads (what 0
// means on the slider) instead of matching the text it shows.
TEST(Hierarchical, WindowSupportSaysWhatTheWindowDoes) {
  const auto support = [](const std::string& model) {
    return load_model(asset_path("models/" + model + ".safetensors"), {}, torch::kCPU).backbone->window_support();
  };
  EXPECT_EQ(support("flatten").kind, WindowSupport::Kind::SwappedIn);
  EXPECT_EQ(support("flatten_swin").kind, WindowSupport::Kind::Trained);
  const WindowSupport l2vit = support("l2vit_hierarchical");
  EXPECT_EQ(l2vit.kind, WindowSupport::Kind::Trained);
  EXPECT_NE(l2vit.text.find("LWA"), std::string::npos) << l2vit.text;
}

}  // namespace test_hierarchical
}  // namespace attnscope
