#include "analysis/clip_maps.h"

#include <torch/torch.h>

#include "analysis/frozen_parameters.h"
#include "analysis/residual_stream.h"
#include "models/text_tokenizer.h"

namespace attnscope {

namespace {

// The model's visual tower as the maps need it: a ViT whose attention is computed here (its
// probabilities in the autograd graph) with a class token read out through its final norm and a
// projection (CLIP's ln_post and proj).
VisionTransformerImpl& clip_visual(LoadedModel& model, const std::string& what) {
  model.text(what);  // a text prompt needs the text tower: refused naming what the file lacks
  VisionTransformerImpl& vit = residual_stream_model(model.native(what));
  const VitArch& arch = vit.arch();
  if (!arch.class_token || arch.dist_token || arch.register_tokens || !arch.final_norm || arch.fc_norm ||
      arch.num_classes == 0 || arch.head_bias || arch.output_kind != OutputKind::Embedding)
    throw std::invalid_argument(what + " reads CLIP's visual tower (class token, ln_post, proj); this model is a " +
                                arch.family());
  return vit;
}

void check_one_image(const torch::Tensor& image, const std::string& what) {
  if (image.dim() != 4 || image.size(0) != 1 || image.size(1) != 3)
    throw std::invalid_argument(what + " reads one image [1, 3, H, W]");
}

void check_one_prompt(ClipTextTowerImpl& tower, const torch::Tensor& token_ids, const std::string& what) {
  if (token_ids.dim() != 2 || token_ids.size(0) != 1) throw std::invalid_argument(what + " reads one prompt [1, L]");
  tower.check_token_ids(token_ids);
}

// The attention hook that keeps every block's probabilities from `first` on inside the graph: the
// first one that does not require a gradient (nothing before it does) becomes a leaf.
AttentionHook keep_probabilities(std::vector<torch::Tensor>& kept, int first) {
  return [&kept, first](const AttentionHookPoint& point, torch::Tensor& value) {
    if (!value.requires_grad()) value = value.detach().requires_grad_(true);
    if (point.layer >= first) {
      if (kept.size() <= size_t(point.layer)) kept.resize(size_t(point.layer) + 1);
      kept[size_t(point.layer)] = value;
    }
  };
}

// R <- R + mean_h clamp(grad * A, 0) R over the blocks in order (batch item 0), from the identity.
torch::Tensor propagate_relevance(const std::vector<torch::Tensor>& attention,
                                  const std::vector<torch::Tensor>& gradients) {
  const int64_t tokens = attention.front().size(-1);
  torch::Tensor relevance = torch::eye(tokens, torch::kFloat);
  for (size_t i = 0; i < attention.size(); ++i) {
    const torch::Tensor cam = (gradients[i][0] * attention[i][0].detach()).clamp_min(0).mean(0);
    relevance = relevance + cam.to(torch::kFloat).cpu().mm(relevance);
  }
  return relevance;
}

}  // namespace

int resolve_start_block(int start, int blocks, const std::string& option) {
  const int resolved = start < 0 ? blocks + start : start;
  if (resolved < 0 || resolved >= blocks)
    throw std::invalid_argument(option + " " + std::to_string(start) + ": the tower has " + std::to_string(blocks) +
                                " blocks (0.." + std::to_string(blocks - 1) + ", or -1..-" + std::to_string(blocks) +
                                " from the end)");
  return resolved;
}

torch::Tensor min_max(const torch::Tensor& values) {
  const torch::Tensor low = values.min(), high = values.max();
  const double range = (high - low).item<double>();
  if (!(range > 0)) return torch::zeros_like(values);
  return (values - low) / (high - low);
}

CheferClipRelevance chefer_clip_relevance(LoadedModel& model, const torch::Tensor& image,
                                          const torch::Tensor& token_ids, int start_block) {
  const std::string what = "chefer-clip";
  VisionTransformerImpl& vit = clip_visual(model, what);
  ClipTextTowerImpl& tower = model.text(what);
  check_one_image(image, what);
  check_one_prompt(tower, token_ids, what);
  CheferClipRelevance result;
  result.image_start = resolve_start_block(start_block, vit.arch().depth, "--start-layer");
  result.text_start = tower.arch().layers - 1;

  FrozenParameters frozen_visual(vit), frozen_text(tower);
  torch::AutoGradMode grad_mode(true);
  std::vector<torch::Tensor> image_attention;
  ForwardOptions options;
  options.capture = false;
  options.attention_hook = keep_probabilities(image_attention, result.image_start);
  const torch::Tensor input = (image.is_inference() ? image.clone() : image).to(model.device);
  const ForwardOutput output = vit.forward(input, AttentionSettings{}, options);

  std::vector<torch::Tensor> text_attention;
  TextForwardOptions text_options;
  text_options.attention_hook = [&text_attention, first = result.text_start](int block, torch::Tensor& value) {
    if (!value.requires_grad()) value = value.detach().requires_grad_(true);
    if (block >= first) text_attention.push_back(value);
  };
  const TextForwardOutput text = tower.forward(token_ids.to(model.device), text_options);
  const torch::Tensor logit = tower.logits_per_image(output.logits, text.embedding)[0][0];
  result.logit = logit.item<double>();

  std::vector<torch::Tensor> chosen(image_attention.begin() + result.image_start, image_attention.end());
  const size_t image_count = chosen.size();
  chosen.insert(chosen.end(), text_attention.begin(), text_attention.end());
  const auto gradients = torch::autograd::grad({logit}, chosen);
  const std::vector<torch::Tensor> image_part(chosen.begin(), chosen.begin() + long(image_count)),
      image_grads(gradients.begin(), gradients.begin() + long(image_count)),
      text_part(chosen.begin() + long(image_count), chosen.end()),
      text_grads(gradients.begin() + long(image_count), gradients.end());

  torch::NoGradGuard no_grad;
  const TokenLayout layout = output.layout;
  const torch::Tensor relevance = propagate_relevance(image_part, image_grads);
  result.raw =
      relevance[0].narrow(0, layout.prefix_tokens(), layout.patch_tokens()).reshape({layout.grid_h, layout.grid_w});
  result.normalised = min_max(result.raw);
  const torch::Tensor text_relevance = propagate_relevance(text_part, text_grads);
  result.end_of_text = text.end_of_text[0].item<int64_t>();
  const torch::Tensor tokens =
      text_relevance[result.end_of_text].narrow(0, 1, std::max<int64_t>(result.end_of_text - 1, 0));
  result.text = tokens.numel() ? tokens / tokens.sum() : tokens;
  return result;
}

namespace {

// Each block's output from `first` on ("blocks.N": its norm1 and norm2 points carry a suffix),
// inside the autograd graph.
ForwardHook keep_block_outputs(std::vector<torch::Tensor>& outputs, int first) {
  return [&outputs, first](const HookPoint& point, torch::Tensor& value) {
    const std::string prefix = "blocks.";
    if (point.name.compare(0, prefix.size(), prefix) != 0) return;
    const std::string rest = point.name.substr(prefix.size());
    if (rest.empty() || rest.find('.') != std::string::npos) return;
    const int block = std::stoi(rest);
    if (block >= first) outputs[size_t(block)] = value;
  };
}

torch::Tensor upsample_by_patch(const torch::Tensor& grid, int64_t patch) {
  return torch::nn::functional::interpolate(grid.unsqueeze(0).unsqueeze(0),
                                            torch::nn::functional::InterpolateFuncOptions()
                                                .size(std::vector<int64_t>{grid.size(0) * patch, grid.size(1) * patch})
                                                .mode(torch::kBilinear)
                                                .align_corners(false))[0][0];
}

// LeGrad's compute_legrad_siglip (open_clip's timm SigLIP towers): per block from the start, its
// output tokens (before the trunk's final norm, as the authors feed them) through the attention-pool
// head, normalised, dotted with the normalised text embedding, differentiated with respect to the
// pool's attention; ReLU, the mean over heads; summed over the blocks. The authors' correction:
// the same map for the prompt 'a photo of a', min-max normalised, zeroes the patches where it
// exceeds 0.8. Then min-max, then the bilinear upsampling.
LegradMap legrad_siglip(LoadedModel& model, VisionTransformerImpl& vit, const torch::Tensor& image,
                        const torch::Tensor& token_ids, int layer_index) {
  const std::string what = "legrad";
  ClipTextTowerImpl& tower = model.text(what);
  LegradMap result;
  const int depth = vit.arch().depth;
  result.start_block = resolve_start_block(layer_index, depth, "legrad's layer index");
  torch::Tensor directions;
  {
    const auto tokenizer = text_tokenizer_for(model.path, tower.arch());
    const torch::Tensor empty = tokenizer->tokenize_tensor({kLegradEmptyPrompt}, text_context_length(tower.arch()));
    c10::InferenceMode inference;
    directions = tower.encode_text(torch::cat({token_ids.to(torch::kCPU, torch::kLong), empty}).to(model.device));
  }
  directions =
      torch::nn::functional::normalize(directions.clone(), torch::nn::functional::NormalizeFuncOptions().dim(-1));

  FrozenParameters frozen(vit);
  torch::AutoGradMode grad_mode(true);
  std::vector<torch::Tensor> block_outputs(static_cast<size_t>(depth));
  ForwardOptions options;
  options.capture = false;
  options.hook = keep_block_outputs(block_outputs, result.start_block);
  const torch::Tensor input = (image.is_inference() ? image.clone() : image).to(model.device);
  TokenLayout layout;
  {
    torch::NoGradGuard no_graph;  // only the pool is differentiated, from the block outputs on
    layout = vit.forward(input, AttentionSettings{}, options).layout;
  }

  torch::Tensor sum = torch::zeros({int64_t(layout.patch_tokens())}, torch::kDouble);
  torch::Tensor empty_sum = sum.clone();
  for (int block = result.start_block; block < depth; ++block) {
    // A leaf: only the pool's attention is differentiated, so nothing before it needs a graph.
    const torch::Tensor tokens = block_outputs[size_t(block)].detach().requires_grad_(true);
    torch::Tensor probabilities;
    const torch::Tensor pooled = torch::nn::functional::normalize(
        vit.attn_pool->forward(tokens, &probabilities), torch::nn::functional::NormalizeFuncOptions().dim(-1))[0];
    for (const bool empty : {false, true}) {
      const torch::Tensor similarity = (pooled * directions[empty ? 1 : 0]).sum();
      if (!empty) result.similarities.push_back(similarity.item<double>());
      const torch::Tensor gradient = torch::autograd::grad({similarity}, {probabilities}, {}, /*retain_graph=*/true)[0];
      (empty ? empty_sum : sum) += gradient.detach()[0].clamp_min(0).mean(0).to(torch::kCPU, torch::kDouble);
    }
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor corrected = min_max(empty_sum) > kLegradCorrectionThreshold;
  result.corrected_patches = corrected.sum().item<int64_t>();
  result.raw = sum.masked_fill(corrected, 0).to(torch::kFloat).reshape({layout.grid_h, layout.grid_w});
  result.upsampled = upsample_by_patch(min_max(result.raw), vit.arch().patch_size);
  return result;
}

}  // namespace

LegradMap legrad_clip(LoadedModel& model, const torch::Tensor& image, const torch::Tensor& token_ids, int layer_index) {
  const std::string what = "legrad";
  if (auto* vit = dynamic_cast<VisionTransformerImpl*>(model.backbone.get()); vit && !vit->attn_pool.is_empty()) {
    const VitArch& arch = vit->arch();
    if (arch.class_token || arch.register_tokens || !vit->head.is_empty() || arch.output_kind != OutputKind::Embedding)
      throw std::invalid_argument(what +
                                  " reads SigLIP's towers (no class token, the attention-pool head's output as "
                                  "the embedding: the authors' compute_legrad_siglip); this model is a " +
                                  arch.family());
    check_one_image(image, what);
    check_one_prompt(model.text(what), token_ids, what);
    return legrad_siglip(model, *vit, image, token_ids, layer_index);
  }
  VisionTransformerImpl& vit = clip_visual(model, what);
  ClipTextTowerImpl& tower = model.text(what);
  check_one_image(image, what);
  check_one_prompt(tower, token_ids, what);
  LegradMap result;
  const int depth = vit.arch().depth;
  result.start_block = resolve_start_block(layer_index, depth, "legrad's layer index");

  torch::Tensor text_direction;
  {
    c10::InferenceMode inference;
    text_direction = tower.encode_text(token_ids.to(model.device));
  }
  text_direction = torch::nn::functional::normalize(text_direction.clone(),
                                                    torch::nn::functional::NormalizeFuncOptions().dim(-1))[0];

  FrozenParameters frozen(vit);
  torch::AutoGradMode grad_mode(true);
  std::vector<torch::Tensor> attention;
  std::vector<torch::Tensor> block_outputs = std::vector<torch::Tensor>(size_t(depth));
  ForwardOptions options;
  options.capture = false;
  options.attention_hook = keep_probabilities(attention, result.start_block);
  options.hook = keep_block_outputs(block_outputs, result.start_block);
  const torch::Tensor input = (image.is_inference() ? image.clone() : image).to(model.device);
  const ForwardOutput output = vit.forward(input, AttentionSettings{}, options);
  const TokenLayout layout = output.layout;

  torch::Tensor sum = torch::zeros({int64_t(layout.patch_tokens())}, torch::kFloat);
  for (int block = result.start_block; block < depth; ++block) {
    const torch::Tensor pooled = block_outputs[size_t(block)].mean(1);  // every token, the class token included
    const torch::Tensor feature = torch::nn::functional::normalize(
        vit.head->forward(vit.norm->forward(pooled)), torch::nn::functional::NormalizeFuncOptions().dim(-1));
    const torch::Tensor similarity = (feature[0] * text_direction).sum();
    result.similarities.push_back(similarity.item<double>());
    const torch::Tensor gradient =
        torch::autograd::grad({similarity}, {attention[size_t(block)]}, {}, /*retain_graph=*/true)[0];
    // ReLU, the mean over heads, then over the query rows; the patch keys.
    const torch::Tensor relevance = gradient.detach()[0].clamp_min(0).mean(0).mean(0);
    sum += relevance.narrow(0, layout.prefix_tokens(), layout.patch_tokens()).to(torch::kFloat).cpu();
  }
  torch::NoGradGuard no_grad;
  result.raw = sum.reshape({layout.grid_h, layout.grid_w});
  result.upsampled = min_max(upsample_by_patch(result.raw, vit.arch().patch_size));
  return result;
}

TextSpanComponents textspan_components(LoadedModel& model, const torch::Tensor& image,
                                       const std::function<bool()>& cancelled) {
  const std::string what = "textspan";
  VisionTransformerImpl& vit = clip_visual(model, what);
  check_one_image(image, what);
  const VitArch& arch = vit.arch();
  for (const BlockArch& block : arch.blocks)
    if (block.layer_scale || block.local_concentration)
      throw std::invalid_argument(what + " decomposes CLIP's blocks; this one has LayerScale or an LCM");

  // Every block's attention (the class row and v from the captures) and what the class token
  // receives from each MLP, the input of block 0 and the final residual (the residual stream's
  // record at the class token).
  StreamRecording recording;
  recording.resid_pre = true;
  recording.components = true;
  recording.tokens = {0};
  ForwardOptions options;
  options.capture = true;
  options.cancelled = cancelled;
  torch::NoGradGuard no_grad;
  const torch::Tensor input = image.to(model.device);
  const ResidualRun run = record_residual_stream(vit, input, AttentionSettings{}, recording, options);
  const TokenLayout& layout = run.output.layout;
  const int layers = arch.depth, heads = arch.heads;
  const int64_t tokens = layout.total_tokens(), width = arch.embed_dim, head_dim = width / heads;

  TextSpanComponents result;
  result.grid_h = layout.grid_h;
  result.grid_w = layout.grid_w;
  result.layers = layers;
  result.heads = heads;
  result.image_embedding = run.output.logits[0].to(torch::kFloat).cpu();

  // ln_post linearised at the class token's actual mean and std, its mean and bias spread evenly
  // over the 2 L + 1 intermediates (the input of block 0, each attention, each MLP) and each
  // attention's share again over its tokens x heads (PRSLogger._normalize_*).
  const auto f64 = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kDouble); };
  const torch::Tensor final_class = f64(run.record.resid_final[0][0]);
  const torch::Tensor mean = final_class.mean();
  const torch::Tensor scale = f64(run.record.final_scale[0][0]);
  const torch::Tensor ln_weight = f64(vit.norm->weight), ln_bias = f64(vit.norm->bias);
  const torch::Tensor projection = f64(vit.head->weight).t();  // [C, E]: x @ proj
  const double intermediates = 2.0 * layers + 1;
  const auto project = [&](const torch::Tensor& component, double share) {
    return ((ln_weight * (component - mean / share) / scale) + ln_bias / share).matmul(projection);
  };
  const double norm = result.image_embedding.to(torch::kDouble).norm().item<double>();

  torch::Tensor total = project(f64(run.record.resid_pre[0][0][0]), intermediates);  // ln_pre's output
  torch::Tensor patches = torch::zeros({tokens, int64_t(projection.size(1))}, torch::kDouble);
  for (int layer = 0; layer < layers; ++layer) {
    if (cancelled && cancelled()) throw Cancelled();
    total += project(f64(run.record.mlp_out[size_t(layer)][0][0]), intermediates);
    const AttentionCapture& capture = run.output.layers[size_t(layer)];
    auto* block = vit.blocks[size_t(layer)]->as<BlockImpl>();
    const torch::Tensor output_weight = f64(block->attn->output_weight());  // [C, C], heads side by side
    const torch::Tensor output_bias =
        block->attn->proj ? f64(block->attn->proj->bias) : torch::zeros({width}, torch::kDouble);
    const double share = intermediates * double(tokens * heads);
    for (int head = 0; head < heads; ++head) {
      // [T, C]: what head `head` moves from each token into the class token, out_proj's bias spread
      // over tokens x heads.
      const torch::Tensor row = f64(capture.row(0, head, 0));  // [T]
      const torch::Tensor values = f64(capture.v[0][head]);    // [T, d], the value bias included
      const torch::Tensor component =
          (row.unsqueeze(1) * values).matmul(output_weight.narrow(1, head * head_dim, head_dim).t()) +
          output_bias / double(tokens * heads);
      const torch::Tensor projected = project(component, share);  // [T, E]
      patches += projected;
      result.transient_bytes =
          std::max<int64_t>(result.transient_bytes, (component.numel() + projected.numel()) * int64_t(sizeof(double)));
    }
  }
  total += patches.sum(0);
  const torch::Tensor embedding = result.image_embedding.to(torch::kDouble);
  result.residual_max_abs = (total - embedding).abs().max().item<double>();
  result.residual_relative = result.residual_max_abs / std::max(embedding.abs().max().item<double>(), 1e-300);
  result.patch_directions = patches.narrow(0, layout.prefix_tokens(), layout.patch_tokens()) / norm;
  return result;
}

torch::Tensor textspan_maps(const TextSpanComponents& components, const torch::Tensor& text_embeddings) {
  if (text_embeddings.dim() != 2 || text_embeddings.size(1) != components.patch_directions.size(1))
    throw std::invalid_argument("textspan: text embeddings must be [P, " +
                                std::to_string(components.patch_directions.size(1)) + "]");
  const torch::Tensor text = text_embeddings.detach().to(torch::kCPU, torch::kDouble);
  const torch::Tensor directions = text / text.pow(2).sum(1, true).sqrt();
  const torch::Tensor heat = components.patch_directions.matmul(directions.t());  // [N, P]
  const torch::Tensor centred = heat - heat.mean(1, true);
  return centred.t().reshape({text.size(0), components.grid_h, components.grid_w}).to(torch::kFloat);
}

}  // namespace attnscope
