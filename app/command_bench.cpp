// `attnscope bench`: median forward latency per variant for plain ViT shapes (DeiT-T/S at 224,
// ViT-B/16 at 224 and 384, ViT-L/14 at 224 and 518), with and without capture, against the same
// weights in PyTorch eager (Debian's python3-torch), and against the machine's GEMM limit.
// `attnscope bench --analysis`: Grad-CAM, attention relevance and Score-CAM against PyTorch-eager
// versions on the same weights, and the spectrum's factor path against the full SVD at N = 784 and
// 3136 patch tokens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "analysis/cam_methods.h"
#include "analysis/clip_maps.h"
#include "analysis/gradcam.h"
#include "analysis/relevance.h"
#include "analysis/residual_stream.h"
#include "analysis/sae_features.h"
#include "analysis/spectrum.h"
#include "app/bench_family.h"
#include "app/bench_scale.h"
#include "app/bench_tools.h"
#include "app/cli.h"
#include "app/commands.h"
#include "core/assets.h"
#include "core/clip_tokenizer.h"
#include "core/excerpt.h"
#include "core/image.h"
#include "core/scratch_folder.h"
#include "models/demo_models.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "models/token_linear.h"
#include "views/clip_prompts.h"

namespace attnscope {

namespace {

// Every swap of the variant table, as --variants lists them.
std::string every_swap() {
  std::string list;
  for (const std::string& name : variant_names()) list += (list.empty() ? "" : ",") + name;
  return list;
}

// A plain ViT's shape and input side: DeiT-T/S, the ViT-B/16 and ViT-L/14 of CLIP and DINOv2, and
// DINOv2-S/14's at high resolution (without its registers and LayerScale, so that every variant has
// its eager row; `bench --scale` runs the model itself, softmax).
struct VitShape {
  std::string name;
  int dim, depth, heads;
  int patch = 16, side = 224;
  int tokens() const { return (side / patch) * (side / patch) + 1; }
};

const std::vector<VitShape>& known_shapes() {
  static const std::vector<VitShape> shapes = {{"tiny", 192, 12, 3},
                                               {"small", 384, 12, 6},
                                               {"vit-b16", 768, 12, 12},
                                               {"vit-b16-384", 768, 12, 12, 16, 384},
                                               {"vit-l14", 1024, 24, 16, 14},
                                               {"vit-l14-518", 1024, 24, 16, 14, 518},
                                               {"vit-s14-518", 384, 12, 6, 14, 518},
                                               {"vit-s14-1036", 384, 12, 6, 14, 1036}};
  return shapes;
}

const VitShape& find_shape(const std::string& name) {
  for (const VitShape& shape : known_shapes())
    if (shape.name == name) return shape;
  std::string names;
  for (const VitShape& shape : known_shapes()) names += (names.empty() ? "" : ", ") + shape.name;
  throw std::invalid_argument("unknown size '" + excerpt(name) + "' (expected one of " + names + ")");
}

// Random weights, saved so that PyTorch loads exactly the same ones.
std::string write_random_vit(const VitShape& shape, const std::filesystem::path& folder) {
  torch::manual_seed(0);
  const VitArch arch = plain_vit_arch(shape.dim, shape.depth, shape.heads, shape.patch, shape.side / shape.patch, 1000);
  VisionTransformer model(arch);
  initialise_weights(*model.get());
  const auto path = folder / ("vit_" + shape.name + ".safetensors");
  save_safetensors(path.string(), state_dict(*model), model_metadata(arch, {}));
  return path.string();
}

// Runs the PyTorch eager reference; returns its median in ms, or a negative value when unavailable.
double pytorch_median_ms(const std::string& python, const std::string& model_path, const VitShape& shape,
                         const AttentionSettings& settings, torch::Device device, int warmup, int runs,
                         EagerThreading threading, std::string& error) {
  std::ostringstream command;
  command << "'" << python << "' '" << source_path("bench/pytorch_forward.py") << "' --model '" << model_path
          << "' --heads " << shape.heads << " --size " << shape.side << " --threads " << torch::get_num_threads()
          << " --runs " << runs << " --warmup " << warmup << " --variant " << to_string(settings.variant) << " --p "
          << settings.p << " --window " << settings.window << " --anchors " << settings.anchors << " --agents "
          << settings.agents << " --pola-alpha " << settings.alpha << " --device " << device.str();
  const nlohmann::json json = run_eager_json(command.str(), threading, error);
  if (!json.is_object()) return -1;
  if (!json.contains("median_ms")) {
    error = "PyTorch reference failed: " + json.dump().substr(0, 300);
    return -1;
  }
  if (json.value("tokens", 0) != shape.tokens()) {
    error = "PyTorch ran " + std::to_string(json.value("tokens", 0)) + " tokens, not " + std::to_string(shape.tokens());
    return -1;
  }
  return json["median_ms"].get<double>();
}

// A random ViT written for PyTorch to load, loaded here, and a random input at its side.
struct BenchModel {
  std::string path;
  LoadedModel model;
  torch::Tensor input;
};

BenchModel random_vit_and_input(const VitShape& shape, const std::filesystem::path& folder, torch::Device device) {
  BenchModel bench;
  bench.path = write_random_vit(shape, folder);
  bench.model = load_model(bench.path, {}, device);
  torch::manual_seed(1);
  bench.input = torch::randn({1, 3, shape.side, shape.side}).to(device);
  return bench;
}

// Grad-CAM (default layer, top-1 class) on random DeiT weights at 224 against both eager baselines.
void bench_gradcam(const std::vector<VitShape>& shapes, const std::filesystem::path& folder, const std::string& python,
                   torch::Device device, int warmup, int runs, int rounds) {
  std::cout << "\nGrad-CAM (blocks.-1.norm1, top-1 class, one forward + one backward), input 1x3x224x224\n"
            << std::left << std::setw(7) << "model" << std::right << std::setw(12) << "attnscope"
            << eager_headers("lib:") << eager_headers("lean:") << "\n";
  for (const auto& shape : shapes) {
    auto [path, model, input] = random_vit_and_input(shape, folder, device);
    std::vector<double> ours;
    EagerTimes library, lean;
    std::string error;
    for (int round = 0; round < rounds; ++round) {
      ours.push_back(median_of_runs(warmup, runs, [&] {
        grad_cam(model.native("Grad-CAM"), input, {}, {});
        if (device.is_cuda()) torch::cuda::synchronize();
      }));
      if (python.empty()) continue;
      std::ostringstream command;
      command << "'" << python << "' '" << source_path("bench/pytorch_gradcam.py") << "' --model '" << path
              << "' --heads " << shape.heads << " --threads " << torch::get_num_threads() << " --runs " << runs
              << " --warmup " << warmup << " --device " << device.str();
      for (const EagerThreading threading : kEagerThreadings) {
        const auto json = run_eager_json(command.str(), threading, error);
        if (!json.contains("library_ms")) continue;
        library.add(threading, json["library_ms"].get<double>());
        lean.add(threading, json["lean_ms"].get<double>());
      }
    }
    const double ours_ms = median_ms(ours);
    std::cout << std::left << std::setw(7) << shape.name << std::right << std::setw(10) << ours_ms << "ms"
              << (library.empty() ? no_reference(error)
                                  : eager_columns(ours_ms, library) + eager_columns(ours_ms, lean))
              << "\n"
              << std::flush;
  }
  std::cout << "lib: as pytorch-grad-cam runs it (every weight requires grad); lean: attnscope's trick in eager "
               "(no weight gradients); "
            << eager_legend() << "\n";
}

// Attention relevance (Chefer et al.) and Score-CAM (blocks.-1.norm1) on random DeiT weights at 224 against
// PyTorch-eager versions of the same methods (bench/pytorch_attribution.py). Score-CAM runs C / 16
// forward passes of 16 images, so it gets a fifth of the runs.
void bench_attribution(const std::vector<VitShape>& shapes, const std::filesystem::path& folder,
                       const std::string& python, torch::Device device, int warmup, int runs, int rounds) {
  const int score_runs = std::max(1, runs / 5);
  std::cout << "\nAttention relevance (top-1 class, forward + backward to every layer's probabilities) and Score-CAM "
               "(blocks.-1.norm1, C/16 batched forward passes), input 1x3x224x224\n"
            << std::left << std::setw(7) << "model" << std::setw(11) << "method" << std::right << std::setw(12)
            << "attnscope" << eager_headers("lib:") << eager_headers("lean:") << "\n";
  for (const auto& shape : shapes) {
    auto [path, model, input] = random_vit_and_input(shape, folder, device);
    std::vector<double> relevance, scorecam;
    EagerTimes eager_relevance, eager_lean, eager_scorecam;
    std::string error;
    CamOptions score_options;
    score_options.method = CamMethod::ScoreCam;
    for (int round = 0; round < rounds; ++round) {
      relevance.push_back(median_of_runs(warmup, runs, [&] {
        attention_relevance(model.native("relevance"), input, {}, {});
        if (device.is_cuda()) torch::cuda::synchronize();
      }));
      scorecam.push_back(median_of_runs(std::min(warmup, 1), score_runs, [&] {
        class_activation_map(model.native("Score-CAM"), input, {}, score_options);
        if (device.is_cuda()) torch::cuda::synchronize();
      }));
      if (python.empty()) continue;
      std::ostringstream command;
      command << "'" << python << "' '" << source_path("bench/pytorch_attribution.py") << "' --model '" << path
              << "' --heads " << shape.heads << " --threads " << torch::get_num_threads() << " --runs " << runs
              << " --warmup " << warmup << " --score-runs " << score_runs << " --device " << device.str();
      for (const EagerThreading threading : kEagerThreadings) {
        const auto json = run_eager_json(command.str(), threading, error);
        if (!json.contains("relevance_ms")) continue;
        eager_relevance.add(threading, json["relevance_ms"].get<double>());
        eager_lean.add(threading, json["relevance_lean_ms"].get<double>());
        eager_scorecam.add(threading, json["scorecam_ms"].get<double>());
      }
    }
    const auto row = [&](const char* method, const std::vector<double>& ours, const EagerTimes& library,
                         const EagerTimes* lean) {
      const double ours_ms = median_ms(ours);
      std::cout << std::left << std::setw(7) << shape.name << std::setw(11) << method << std::right << std::setw(10)
                << ours_ms << "ms";
      if (!library.empty())
        std::cout << eager_columns(ours_ms, library) << (lean ? eager_columns(ours_ms, *lean) : "");
      else
        std::cout << no_reference(error);
      std::cout << "\n" << std::flush;
    };
    row("relevance", relevance, eager_relevance, &eager_lean);
    row("scorecam", scorecam, eager_scorecam, nullptr);
  }
  std::cout << "lib: as the authors' code runs it (every weight requires grad); lean: no weight gradients; "
            << eager_legend() << "\n";
}

// Rank and spectrum of one linear-attention head (DeiT-Tiny weights, d = 64) by the factors against
// the full SVD of the N x N matrix (building the matrix included), at grids 28 x 28 and 56 x 56.
void bench_spectrum(const std::filesystem::path& folder, torch::Device device, int warmup, int runs) {
  const std::string path = write_random_vit(find_shape("tiny"), folder);
  LoadedModel model = load_model(path, {}, device);
  AttentionSettings settings;
  settings.variant = Variant::Linear;
  std::cout << "\nSpectrum of one linear-attention head (DeiT-Tiny, d = 64, last block): factors vs full SVD\n"
            << std::left << std::setw(8) << "N" << std::right << std::setw(12) << "factors" << std::setw(14)
            << "full SVD" << std::setw(12) << "speed-up" << std::setw(10) << "rank" << std::setw(12) << "rank(full)"
            << "\n";
  for (int grid : {28, 56}) {
    torch::manual_seed(2);
    const auto input = torch::randn({1, 3, grid * 16, grid * 16}).to(device);
    ForwardOutput output;
    {
      c10::InferenceMode inference_mode;
      output = model.forward(input, settings);
    }
    const AttentionCapture& layer = output.layers.back();
    AttentionSpectrum fast;
    const double factor_ms = median_of_runs(warmup, runs, [&] { fast = attention_spectrum(layer, 0); });
    Spectrum full;
    // The full SVD of a 3137 x 3137 matrix takes seconds: one warm-up-free run is enough there.
    const double full_ms =
        median_of_runs(0, grid > 28 ? 1 : std::max(1, runs / 4), [&] { full = matrix_spectrum(layer.matrix(0, 0)); });
    std::cout << std::left << std::setw(8) << grid * grid << std::right << std::setw(10) << factor_ms << "ms"
              << std::setw(12) << full_ms << "ms" << std::setw(11) << full_ms / factor_ms << "x" << std::setw(10)
              << fast.spectrum.numerical_rank << std::setw(12) << full.numerical_rank << "\n"
              << std::flush;
  }
}

// A head ablation in the workbench: the forward with captures resumed at the first ablated block
// from the unablated run (views/request_runner.h), against the whole forward with captures.
void bench_ablation(const std::vector<VitShape>& shapes, const std::filesystem::path& folder, torch::Device device,
                    int warmup, int runs) {
  std::cout << "\nHead ablation (zero, one head), forward with captures resumed at the ablated block vs the whole "
               "forward, input 1x3x224x224\n"
            << std::left << std::setw(8) << "model" << std::setw(8) << "block" << std::right << std::setw(12)
            << "resumed" << std::setw(12) << "whole" << std::setw(10) << "ratio\n";
  for (const VitShape& shape : shapes) {
    BenchModel bench = random_vit_and_input(shape, folder, device);
    VisionTransformerImpl& model = bench.model.vit();
    c10::InferenceMode inference_mode;
    ForwardOptions capture;
    StreamRecording inputs;
    inputs.resid_pre = true;
    ResidualRun clean;
    const double whole = median_of_runs(warmup, runs, [&] {
      clean.output = model.forward_with_streams(bench.input, {}, capture, {}, inputs, &clean.record);
      if (device.is_cuda()) torch::cuda::synchronize();
    });
    for (int block : {0, shape.depth / 2, shape.depth - 1}) {
      const HeadAblation ablation{{{block, 0}}, AblationKind::Zero, {}};
      const double resumed = median_of_runs(warmup, runs, [&] {
        ablate_heads(model, bench.input, {}, ablation, capture, {}, &clean);
        if (device.is_cuda()) torch::cuda::synchronize();
      });
      std::cout << std::left << std::setw(8) << shape.name << std::setw(8) << block << std::right << std::setw(10)
                << resumed << "ms" << std::setw(10) << whole << "ms" << std::setw(9) << resumed / whole << "\n"
                << std::flush;
    }
  }
}

// Sparse-autoencoder features of one image (views/analysis_sae.cpp): the forward that reads the
// SAE's point (the middle block's output) with every token's features, top features and
// reconstruction (what the view computes once per image), and one feature's map alone (an SAE
// whose activation acts on each feature alone reads one encoder column), against the plain
// forward. Random SAEs of 8x the width and of 65,536 features (TopK, k 32; ReLU for the map).
void bench_sae(const std::vector<VitShape>& shapes, const std::filesystem::path& folder, torch::Device device,
               int warmup, int runs) {
  std::cout << "\nSAE features of one image: the forward at the SAE's point plus the SAE, against the plain forward\n"
            << std::left << std::setw(8) << "model" << std::right << std::setw(10) << "features" << std::setw(10)
            << "MB" << std::setw(12) << "forward" << std::setw(12) << "+features" << std::setw(10) << "over"
            << std::setw(12) << "+one map" << std::setw(10) << "over\n";
  for (const VitShape& shape : shapes) {
    BenchModel bench = random_vit_and_input(shape, folder, device);
    VisionTransformerImpl& model = bench.model.vit();
    c10::InferenceMode inference_mode;
    const double forward = median_of_runs(warmup, runs, [&] {
      model.forward(bench.input, {});
      if (device.is_cuda()) torch::cuda::synchronize();
    });
    const std::string hook = "blocks." + std::to_string(shape.depth / 2) + ".hook_resid_post";
    for (int64_t features : {int64_t(8) * shape.dim, int64_t(65536)}) {
      torch::manual_seed(2);
      SparseAutoencoder sae;
      sae.activation = SaeActivation::TopK;
      sae.k = 32;
      sae.d_in = shape.dim;
      sae.d_sae = features;
      sae.W_enc = (torch::randn({shape.dim, features}) * 0.02).to(device);
      sae.b_enc = torch::zeros({features}, device);
      sae.W_dec = sae.W_enc.t().contiguous() * 50.0;
      sae.b_dec = torch::zeros({shape.dim}, device);
      const double full = median_of_runs(warmup, runs, [&] {
        sae_image_report(model, sae, hook, bench.input, {});
        if (device.is_cuda()) torch::cuda::synchronize();
      });
      SparseAutoencoder relu = sae;
      relu.activation = SaeActivation::Relu;
      const StreamPoint point = parse_stream_point(hook);
      const double one = median_of_runs(warmup, runs, [&] {
        relu.encode_feature(read_stream_point(model, bench.input, point, {}).activation[0], 7);
        if (device.is_cuda()) torch::cuda::synchronize();
      });
      std::cout << std::left << std::setw(8) << shape.name << std::right << std::setw(10) << features << std::setw(10)
                << sae.bytes() / 1e6 << std::setw(10) << forward << "ms" << std::setw(10) << full << "ms"
                << std::setw(9) << 100.0 * (full - forward) / forward << "%" << std::setw(10) << one << "ms"
                << std::setw(9) << 100.0 * (one - forward) / forward << "%\n"
                << std::flush;
    }
  }
}

// The workbench's textspan view after a prompt change (views/clip_prompt_view.h): the panel's
// decomposition and the prompt list's embeddings are kept, so a new prompt costs its tokenization,
// one text encoding and one product. A random CLIP of ViT-B/16's shape (bench/random_clip.py) on the
// bundled chelsea.png at 224 px, 197 tokens; each run a prompt not seen before.
void bench_textspan_prompt(const std::filesystem::path& folder, const std::string& python, torch::Device device,
                           int warmup, int runs) {
  std::cout << "\nTextspan view, a new prompt with the decomposition kept (CLIP ViT-B/16 shape, 197 tokens, 10 "
               "listed prompts)\n";
  if (python.empty()) {
    std::cout << "  skipped: bench/random_clip.py writes the model (--python)\n";
    return;
  }
  const std::string path = (folder / "clip_b16.safetensors").string();
  std::string error;
  run_python_json("'" + python + "' '" + source_path("bench/random_clip.py") + "' --out '" + path + "'", error);
  if (!error.empty()) {
    std::cout << "  skipped: " << error << "\n";
    return;
  }
  LoadedModel model = load_model(path, {}, device);
  const RgbImage prepared =
      prepare_model_input(load_image_rgb(asset_path("images/chelsea.png"), kDefaultMaxPixels), InputSettings{}, model);
  const torch::Tensor image = image_to_tensor(prepared, model.normalization).to(model.device);
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point start) {
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  auto start = clock::now();
  const TextSpanComponents components = textspan_components(model, image);
  const double decomposition_ms = since(start);
  start = clock::now();
  const ClipTokenizer tokenizer = ClipTokenizer::for_model(path);
  const double vocabulary_ms = since(start);
  std::vector<PromptLine> listed;
  for (const char* name : {"cat", "dog", "car", "tree", "house", "bird", "boat", "plane", "horse", "sign"})
    listed.push_back({std::string("a photo of a ") + name, listed.size() + 1});
  ClipTextTowerImpl& tower = model.text("bench");
  c10::InferenceMode inference_mode;
  const torch::Tensor list_text =
      tower.encode_text(tokenize_prompts(model, tokenizer, listed, "bench", true).ids.to(device));
  int fresh = 0;
  const double prompt_ms = median_of_runs(warmup, runs, [&] {
    const std::vector<PromptLine> prompt = {{"a photo of a striped cat number " + std::to_string(fresh++), 1}};
    const torch::Tensor ids = tokenize_prompts(model, tokenizer, prompt, "bench", false).ids.to(device);
    const torch::Tensor map = min_max(textspan_maps(components, torch::cat({tower.encode_text(ids), list_text}))[0]);
    (void)map.max().item<float>();
  });
  std::cout << "  decomposition (once per image) " << decomposition_ms << " ms, vocabulary read (once) "
            << vocabulary_ms << " ms; a new prompt " << prompt_ms << " ms (target 100 ms)\n"
            << std::flush;
}

// A count of runs or rounds: at least 1 (0 was taken as 1 in silence).
int positive_flag(CommandLine& line, const std::string& name) {
  const int value = line.flag_int(name);
  if (value < 1) throw std::invalid_argument("--" + name + " must be at least 1, got " + std::to_string(value));
  return value;
}

}  // namespace

CommandSyntax bench_syntax() {
  const std::vector<std::string> options = {"device"};
  const std::vector<CommandFlag> flags = {
      {"sizes", "LIST",
       "ViT shapes: tiny, small (DeiT at 224), vit-b16, vit-b16-384, vit-l14, vit-l14-518, vit-s14-518, vit-s14-1036 "
       "(DINOv2-S/14's width and depth at 1,370 and 5,477 tokens)",
       "tiny,small"},
      {"variants", "LIST", "variants to time", every_swap()},
      {"runs", "N", "timed runs per measurement", "20"},
      {"warmup", "N", "untimed runs first", "3"},
      {"rounds", "N", "alternating rounds of C++ and PyTorch measurements", "3"},
      {"python", "EXE", "Python with torch for the eager reference ('none' to skip)", configured_python()},
      {"analysis", "",
       "bench the analyses instead: Grad-CAM, attention relevance and Score-CAM vs eager, spectrum factors vs full "
       "SVD, a head ablation's resumed forward vs the whole forward, an SAE's features of one image vs the forward, "
       "the textspan view's cost of a new prompt "
       "(ViT-B/16-shaped CLIP, 197 tokens)",
       ""},
      {"analyses", "LIST", "with --analysis: which (gradcam, attribution, spectrum, ablation, sae, textspan)",
       "gradcam,attribution,spectrum,ablation,sae,textspan"},
      {"family", "NAME",
       "bench a hierarchical family instead: swin or pvt (Swin-T or PVT-v2-b2 shapes at 224, native and --variants, "
       "each against the eager reference with the same kernel swapped in where it has one), or agent_swin_tiny, "
       "inline_swin_tiny, pola_swin_tiny, mlla_tiny (native, against the authors' own module: bench/pytorch_authors.py "
       "with ATTNSCOPE_AUTHORS naming their checkouts)",
       ""},
      {"scale", "",
       "bench high resolution instead: DINOv2-S/14-reg4 shapes at 518 and 1036 px, forward, whole run, peak "
       "memory and view latency against eager",
       ""},
      {"scale-model", "dinov2|dinov3|siglip2",
       "with --scale: dinov3 benches DINOv3-S/16 in timm's registered settings (rotary positions, storage tokens) "
       "at 512 and 1024 px (1,029 and 4,101 tokens) instead; siglip2 SigLIP 2 B/16 at 512 px (1,024 tokens, the "
       "attention-pool head)",
       "dinov2"},
  };
  return {"attnscope bench [--sizes tiny,small] [--runs N]", options, flags};
}

int bench_command(const Args& args) {
  auto parsed = parse_or_print_help(args, bench_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  // The eager reference's Python; empty: none (--python none).
  const std::string python = line.flags["python"] == "none" ? std::string() : line.flags["python"];
  // A mode's own flag set without its mode would be ignored in silence, an invalid value too.
  for (const auto& [flag, mode, fallback] :
       {std::tuple{"analyses", "analysis", "gradcam,attribution,spectrum,ablation,sae,textspan"},
        std::tuple{"scale-model", "scale", "dinov2"}})
    if (line.flags[flag] != fallback && line.flags[mode].empty())
      throw std::invalid_argument(std::string("--") + flag + " is read with --" + mode + " only: give bench --" + mode +
                                  " --" + flag + " " + excerpt(line.flags[flag], 60));
  configure_threads();
  const int runs = positive_flag(line, "runs");
  const int warmup = std::max(0, line.flag_int("warmup"));
  const int rounds = positive_flag(line, "rounds");
  const torch::Device device = resolve_device(line.state.device);
  auto split = [](const std::string& text) {
    std::vector<std::string> items;
    std::stringstream stream(text);
    for (std::string item; std::getline(stream, item, ',');)
      if (!item.empty()) items.push_back(item);
    return items;
  };
  const ScratchFolder scratch("attnscope-bench");
  const std::filesystem::path& folder = scratch.path();

  if (!line.flags["scale"].empty()) {
    bench_scale(python, folder, line.flags["scale-model"]);
    return 0;
  }
  if (!line.flags["family"].empty()) {
    std::vector<Variant> variants;
    for (const auto& name : split(line.flags["variants"])) variants.push_back(parse_variant(name));
    bench_family(line.flags["family"], variants, folder, python, device, warmup, runs, rounds);
    return 0;
  }
  if (!line.flags["analysis"].empty()) {
    std::vector<VitShape> shapes;
    for (const auto& size : split(line.flags["sizes"])) {
      shapes.push_back(find_shape(size));
      // The eager analysis baselines run the fixed 224 input.
      if (shapes.back().side != 224)
        throw std::invalid_argument("--analysis benches shapes at 224 px; '" + size + "' is " +
                                    std::to_string(shapes.back().side));
    }
    std::cout << "attnscope bench --analysis: " << torch::get_num_threads() << " threads, device " << device.str()
              << ", medians over " << rounds << " alternating rounds of the median of " << runs << " runs\n";
    std::cout << std::fixed << std::setprecision(2);
    const std::vector<std::string> parts = split(line.flags["analyses"]);
    const std::vector<std::string> known = {"gradcam", "attribution", "spectrum", "ablation", "sae", "textspan"};
    for (const std::string& part : parts)
      if (std::find(known.begin(), known.end(), part) == known.end())
        throw std::invalid_argument("--analyses: '" + excerpt(part) +
                                    "' is not one of gradcam, attribution, spectrum, ablation, sae, textspan");
    auto wanted = [&](const char* part) { return std::find(parts.begin(), parts.end(), part) != parts.end(); };
    if (wanted("gradcam")) bench_gradcam(shapes, folder, python, device, warmup, runs, rounds);
    if (wanted("attribution")) bench_attribution(shapes, folder, python, device, warmup, runs, rounds);
    if (wanted("spectrum")) bench_spectrum(folder, device, warmup, runs);
    if (wanted("ablation")) bench_ablation(shapes, folder, device, warmup, runs);
    if (wanted("sae")) bench_sae(shapes, folder, device, warmup, runs);
    if (wanted("textspan")) bench_textspan_prompt(folder, python, device, warmup, runs);
    return 0;
  }

  const double gflops = gemm_gflops(device);
  std::cout << "attnscope bench: " << torch::get_num_threads() << " threads (" << openmp_settings_text() << "), device "
            << device.str() << ", median over " << rounds << " alternating rounds of the median of up to " << runs
            << " runs\n"
            << machine_line() << "\n"
            << gemm_limit_text(gflops, device) << "\n"
            << linear_backend_line();
  std::cout << std::left << std::setw(13) << "model" << std::setw(10) << "variant" << std::right << std::setw(7)
            << "tokens" << std::setw(6) << "runs" << std::setw(12) << "no-capture" << std::setw(12) << "capture"
            << std::setw(10) << "overhead" << std::setw(10) << "GEMM lim" << eager_headers() << "\n";
  std::cout << std::fixed << std::setprecision(2);
  for (const auto& size : split(line.flags["sizes"])) {
    const VitShape& shape = find_shape(size);
    const std::string path = write_random_vit(shape, folder);
    LoadedModel model = load_model(path, {}, device);
    torch::manual_seed(1);
    const auto input = torch::randn({1, 3, shape.side, shape.side}).to(device);
    for (const auto& variant_name : split(line.flags["variants"])) {
      AttentionSettings settings;
      settings.variant = parse_variant(variant_name);
      const double limit_ms =
          vit_forward_gflop(shape.tokens(), shape.dim, shape.depth, shape.heads, settings) / gflops * 1000.0;
      // Large shapes take seconds a forward: fewer runs (about 3 s of forwards per measurement).
      const int shape_runs = std::clamp(int(3000.0 / (2.0 * limit_ms)), 1, runs);
      const int shape_warmup = std::min(warmup, shape_runs);
      // Rounds alternate the three measurements so that drift in machine load hits all alike.
      std::vector<double> plain, captured;
      EagerTimes eager;
      std::string error;
      for (int round = 0; round < rounds; ++round) {
        plain.push_back(time_forward(model, input, settings, false, shape_warmup, shape_runs));
        captured.push_back(time_forward(model, input, settings, true, shape_warmup, shape_runs));
        if (python.empty()) continue;
        for (const EagerThreading threading : kEagerThreadings) {
          const double ms =
              pytorch_median_ms(python, path, shape, settings, device, shape_warmup, shape_runs, threading, error);
          if (ms > 0) eager.add(threading, ms);
        }
      }
      const double plain_ms = median_ms(plain), captured_ms = median_ms(captured);
      std::cout << std::left << std::setw(13) << shape.name << std::setw(10) << variant_name << std::right
                << std::setw(7) << shape.tokens() << std::setw(6) << shape_runs << std::setw(10) << plain_ms << "ms"
                << std::setw(10) << captured_ms << "ms" << std::setw(9) << 100.0 * (captured_ms - plain_ms) / plain_ms
                << "%";
      std::cout << std::setw(9) << captured_ms / limit_ms << "x";
      std::cout << (eager.empty() ? no_reference(error) : eager_columns(captured_ms, eager)) << "\n" << std::flush;
    }
  }
  std::cout << "GEMM lim: the forward with capture over the time its matrix products take at the GEMM limit; "
            << eager_legend() << " (the forward with capture)\n";
  return 0;
}

}  // namespace attnscope
