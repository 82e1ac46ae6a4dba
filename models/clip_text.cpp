#include "models/clip_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/backbone.h"

namespace attnscope {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

std::string to_string(TextPooling pooling) {
  switch (pooling) {
    case TextPooling::ArgmaxOfIds:
      return "argmax of the ids";
    case TextPooling::FirstEndOfText:
      return "first end-of-text token";
    case TextPooling::LastToken:
      break;
  }
  return "last position";
}

std::string to_string(TextScores scores) {
  return scores == TextScores::Softmax ? "softmax over the prompts" : "sigmoid per prompt (with logit_bias)";
}

void to_json(nlohmann::json& j, const ClipTextArch& arch) {
  j = nlohmann::json{{"vocab_size", arch.vocab_size},
                     {"context_length", arch.context_length},
                     {"width", arch.width},
                     {"layers", arch.layers},
                     {"heads", arch.heads},
                     {"head_dim", arch.heads ? arch.width / arch.heads : 0},
                     {"mlp_hidden", arch.mlp_hidden},
                     {"embed_dim", arch.embed_dim},
                     {"layer_norm_eps", arch.layer_norm_eps},
                     {"activation", to_string(arch.activation)},
                     {"pooling", to_string(arch.pooling)},
                     {"end_of_text_id", arch.end_of_text_id},
                     {"source_layout", to_string(arch.source_layout)},
                     {"causal", arch.causal},
                     {"scores", to_string(arch.scores)},
                     {"tokenizer", arch.tokenizer == TextTokenizerKind::ClipBpe ? "clip-bpe" : "sentencepiece"}};
}

namespace {

// Floats one prompt holds through the tower with every block's activations kept: per block about
// ten [L, W] tensors (norms, q, k, v, attention output, residuals), the MLP's two [L, hidden] and
// the scores and probabilities [h, L, L].
double forward_floats_per_prompt(const ClipTextArch& arch) {
  const double length = arch.context_length, width = arch.width;
  const double per_block =
      (10 * width + 2 * double(arch.mlp_hidden)) * length + 2 * double(arch.heads) * length * length;
  return length * width + std::max(arch.layers, 1) * per_block;
}

}  // namespace

ArchEstimate clip_text_arch_estimate(const ClipTextArch& arch) {
  ArchEstimate estimate;
  estimate.family = "CLIP text tower";
  auto add = [&](const std::string& name, const std::string& source, int64_t value, SizeRange range) {
    estimate.dimensions.push_back({name, source, value, range});
  };
  add("vocabulary size", "token_embedding.weight", arch.vocab_size, kVocabRange);
  add("width", "token_embedding.weight", arch.width, kWidthRange);
  add("context length", "positional_embedding", arch.context_length, kContextRange);
  add("depth", "transformer.resblocks.N", arch.layers, kDepthRange);
  add("head count", "the width / 64 or config.json", arch.heads, kHeadRange);
  add("MLP hidden size", "transformer.resblocks.0.mlp.c_fc.weight", arch.mlp_hidden, kHiddenRange);
  add("embedding size", "text_projection", arch.embed_dim, kWidthRange);
  // Counted in doubles: no product of these can overflow, and a rough figure is all a bound needs.
  const double width = arch.width, hidden = arch.mlp_hidden;
  const double per_block = 4 * width * width + 4 * width + 2 * width * hidden + hidden + width + 4 * width;
  const double parameters = double(arch.vocab_size) * width + double(arch.context_length) * width +
                            arch.layers * per_block + 2 * width + width * arch.embed_dim + 1;
  estimate.parameter_bytes = 4 * parameters;
  estimate.forward_bytes = 4 * forward_floats_per_prompt(arch);
  return estimate;
}

int64_t clip_text_prompts_per_pass(const ClipTextArch& arch) {
  const double budget = double(int64_t(1) << 30);
  const double per_prompt = 4 * forward_floats_per_prompt(arch);
  return std::max<int64_t>(1, int64_t(std::min(budget / std::max(per_prompt, 1.0), 1e6)));
}

ClipTextAttentionImpl::ClipTextAttentionImpl(int width, int heads) : heads(heads) {
  in_proj_weight = register_parameter("in_proj_weight", torch::zeros({3 * int64_t(width), int64_t(width)}));
  in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * int64_t(width)}));
  out_proj = register_module("out_proj", torch::nn::Linear(width, width));
}

torch::Tensor ClipTextAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                             const std::function<void(torch::Tensor&)>& probabilities_hook) {
  const int64_t prompts = x.size(0), length = x.size(1), width = x.size(2), head_dim = width / heads;
  // [P, L, 3, h, d] -> three [P, h, L, d], as nn.MultiheadAttention splits in_proj's rows.
  auto qkv = F::linear(x, in_proj_weight, in_proj_bias).view({prompts, length, 3, heads, head_dim});
  auto q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2), v = qkv.select(2, 2).transpose(1, 2);
  auto scores = torch::matmul(q * (1.0 / std::sqrt(double(head_dim))), k.transpose(-2, -1)) + mask;
  auto probabilities = torch::softmax(scores, -1);
  if (probabilities_hook) probabilities_hook(probabilities);
  auto mixed = torch::matmul(probabilities, v).transpose(1, 2).reshape({prompts, length, width});
  return out_proj(mixed);
}

ClipTextMlpImpl::ClipTextMlpImpl(int width, int hidden, MlpActivation activation) : activation(activation) {
  c_fc = register_module("c_fc", torch::nn::Linear(width, hidden));
  c_proj = register_module("c_proj", torch::nn::Linear(hidden, width));
}

torch::Tensor ClipTextMlpImpl::forward(const torch::Tensor& x) {
  auto hidden = c_fc(x);
  return c_proj(activate(hidden, activation));
}

ClipTextBlockImpl::ClipTextBlockImpl(const ClipTextArch& arch) {
  auto norm = torch::nn::LayerNormOptions({int64_t(arch.width)}).eps(arch.layer_norm_eps);
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(norm));
  attn = register_module("attn", ClipTextAttention(arch.width, arch.heads));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(norm));
  mlp = register_module("mlp", ClipTextMlp(arch.width, arch.mlp_hidden, arch.activation));
}

torch::Tensor ClipTextBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                         const std::function<void(torch::Tensor&)>& probabilities_hook) {
  auto out = x + attn(ln_1(x), mask, probabilities_hook);
  return out + mlp(ln_2(out));
}

ClipTextTransformerImpl::ClipTextTransformerImpl(const ClipTextArch& arch) {
  resblocks = register_module("resblocks", torch::nn::ModuleList());
  for (int i = 0; i < arch.layers; ++i) resblocks->push_back(ClipTextBlock(arch));
}

ClipTextTowerImpl::ClipTextTowerImpl(const ClipTextArch& arch) : arch_(arch) {
  token_embedding = register_module("token_embedding", torch::nn::Embedding(arch.vocab_size, arch.width));
  positional_embedding = register_parameter("positional_embedding", torch::zeros({arch.context_length, arch.width}));
  transformer = register_module("transformer", ClipTextTransformer(arch));
  ln_final = register_module(
      "ln_final", torch::nn::LayerNorm(torch::nn::LayerNormOptions({int64_t(arch.width)}).eps(arch.layer_norm_eps)));
  text_projection = register_parameter("text_projection", torch::zeros({arch.width, arch.embed_dim}));
  if (arch.projection_bias)
    text_projection_bias = register_parameter("text_projection_bias", torch::zeros({arch.embed_dim}));
  logit_scale = register_parameter("logit_scale", torch::zeros({}));
  if (arch.scores == TextScores::Sigmoid) logit_bias = register_parameter("logit_bias", torch::zeros({}));
}

void ClipTextTowerImpl::check_token_ids(const torch::Tensor& token_ids) const {
  if (!token_ids.defined() || token_ids.dim() != 2 || !at::isIntegralType(token_ids.scalar_type(), false))
    throw std::invalid_argument("token ids must be an integer tensor [prompts, tokens] (clip.tokenize's output)");
  if (token_ids.size(0) < 1) throw std::invalid_argument("no prompts: token ids have 0 rows");
  if (token_ids.size(1) < 1 || token_ids.size(1) > arch_.context_length)
    throw std::invalid_argument("token ids have " + std::to_string(token_ids.size(1)) +
                                " positions; this text tower takes 1 to " + std::to_string(arch_.context_length));
  // Without the causal mask every position changes the pooled row: rows are padded to the context.
  if (!arch_.causal && token_ids.size(1) != arch_.context_length)
    throw std::invalid_argument("token ids have " + std::to_string(token_ids.size(1)) +
                                " positions; this text tower (no causal mask) reads rows padded to its context of " +
                                std::to_string(arch_.context_length));
  const torch::Tensor ids = token_ids.to(torch::kCPU, torch::kLong);
  const torch::Tensor outside = (ids < 0).logical_or(ids >= arch_.vocab_size).any(1);
  if (outside.any().item<bool>()) {
    const int64_t row = outside.nonzero()[0][0].item<int64_t>();
    throw std::invalid_argument("prompt " + std::to_string(row) + " holds a token id outside 0.." +
                                std::to_string(arch_.vocab_size - 1) + ", the vocabulary of this text tower");
  }
  const torch::Tensor without_end = (ids == arch_.end_of_text_id).any(1).logical_not();
  if (arch_.pooling != TextPooling::LastToken && without_end.any().item<bool>()) {
    const int64_t row = without_end.nonzero()[0][0].item<int64_t>();
    throw std::invalid_argument("prompt " + std::to_string(row) + " has no end-of-text token (id " +
                                std::to_string(arch_.end_of_text_id) +
                                "): its embedding is read there; tokenize it as clip.tokenize does");
  }
}

torch::Tensor ClipTextTowerImpl::pooled_positions(const torch::Tensor& token_ids) const {
  // torch.argmax returns the first of equal maxima, as both rules need.
  if (arch_.pooling == TextPooling::ArgmaxOfIds) return token_ids.argmax(-1);
  if (arch_.pooling == TextPooling::LastToken)
    return torch::full({token_ids.size(0)}, token_ids.size(1) - 1, token_ids.options().dtype(torch::kLong));
  return (token_ids == arch_.end_of_text_id).to(torch::kInt).argmax(-1);
}

TextForwardOutput ClipTextTowerImpl::forward(const torch::Tensor& token_ids, const TextForwardOptions& options) {
  check_token_ids(token_ids);
  const torch::Tensor ids = token_ids.to(positional_embedding.device(), torch::kLong);
  const int64_t prompts = ids.size(0), length = ids.size(1);
  auto x = token_embedding(ids) + positional_embedding.index({Slice(0, length)});
  // build_attention_mask: -inf above the diagonal, each token sees itself and the ones before
  // (SigLIP: none, every token sees every other).
  const torch::Tensor mask =
      arch_.causal ? torch::full({length, length}, -std::numeric_limits<float>::infinity(), x.options()).triu(1)
                   : torch::zeros({length, length}, x.options());
  TextForwardOutput output;
  for (size_t block = 0; block < transformer->resblocks->size(); ++block) {
    if (options.cancelled && options.cancelled()) throw Cancelled();
    std::function<void(torch::Tensor&)> hook;
    if (options.attention_hook || options.keep_attention)
      hook = [&options, &output, block](torch::Tensor& probabilities) {
        if (options.attention_hook) options.attention_hook(int(block), probabilities);
        if (options.keep_attention) output.attention.push_back(probabilities);
      };
    x = transformer->resblocks[block]->as<ClipTextBlockImpl>()->forward(x, mask, hook);
  }
  x = ln_final(x);
  output.end_of_text = pooled_positions(ids);
  const torch::Tensor rows = torch::arange(prompts, ids.options());
  output.embedding = x.index({rows, output.end_of_text}).matmul(text_projection);
  if (text_projection_bias.defined()) output.embedding = output.embedding + text_projection_bias;
  return output;
}

torch::Tensor ClipTextTowerImpl::encode_text(const torch::Tensor& token_ids, const std::function<bool()>& cancelled) {
  check_token_ids(token_ids);
  // Text embeddings are targets and directions, never differentiated: without a graph, memory
  // stays that of one pass however many prompts stream through (with autograd on, every prompt
  // kept its graph: 20,000 prompts took 4.8 GB).
  torch::NoGradGuard no_graph;
  const int64_t step = clip_text_prompts_per_pass(arch_);
  std::vector<torch::Tensor> parts;
  TextForwardOptions options;
  options.cancelled = cancelled;
  for (int64_t begin = 0; begin < token_ids.size(0); begin += step) {
    const torch::Tensor ids = token_ids.narrow(0, begin, std::min(step, token_ids.size(0) - begin));
    // Under the causal mask the pooled row never sees the rows after it: they are cut, so a short
    // prompt costs its own length, not the context's (77).
    const int64_t used = ids.numel() && arch_.causal ? pooled_positions(ids).max().item<int64_t>() + 1 : ids.size(1);
    parts.push_back(forward(ids.narrow(1, 0, std::min(used, ids.size(1))), options).embedding);
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 0);
}

nlohmann::json ClipTextTowerImpl::describe() const {
  nlohmann::json j = arch_;
  j["parameters"] = parameter_count();
  return j;
}

int64_t ClipTextTowerImpl::parameter_count() const {
  int64_t count = 0;
  for (const auto& parameter : parameters()) count += parameter.numel();
  return count;
}

torch::Tensor clip_logits_per_image(const torch::Tensor& image_embeddings, const torch::Tensor& text_embeddings,
                                    const torch::Tensor& logit_scale) {
  if (image_embeddings.dim() != 2 || text_embeddings.dim() != 2 || image_embeddings.size(1) != text_embeddings.size(1))
    throw std::invalid_argument("CLIP logits need image embeddings [B, E] and text embeddings [P, E] of one width E");
  const auto image = image_embeddings / image_embeddings.norm(2, -1, true);
  const auto text = text_embeddings / text_embeddings.norm(2, -1, true);
  // A finite logit_scale can still overflow its exponential (CLIP clamps it at ln 100 in training).
  const auto scale = logit_scale.exp();
  if (!torch::isfinite(scale).all().item<bool>())
    throw std::invalid_argument("the model's logit_scale " + std::to_string(logit_scale.item<double>()) +
                                " gives exp(logit_scale) = inf in float32: its logits and probabilities would be "
                                "inf and NaN (CLIP keeps logit_scale at most ln 100 = 4.6)");
  return scale * image.matmul(text.t());
}

torch::Tensor ClipTextTowerImpl::logits_per_image(const torch::Tensor& image_embeddings,
                                                  const torch::Tensor& text_embeddings) const {
  const torch::Tensor logits = clip_logits_per_image(image_embeddings, text_embeddings, logit_scale.detach());
  return logit_bias.defined() ? logits + logit_bias.detach() : logits;
}

torch::Tensor ClipTextTowerImpl::probabilities(const torch::Tensor& logits) const {
  return arch_.scores == TextScores::Sigmoid ? torch::sigmoid(logits) : torch::softmax(logits, -1);
}

ZeroShotScores zero_shot(const torch::Tensor& image_embedding, const torch::Tensor& text_embeddings,
                         const ClipTextTowerImpl& tower) {
  const torch::Tensor image = image_embedding.dim() == 1 ? image_embedding.unsqueeze(0) : image_embedding;
  if (image.dim() != 2 || image.size(0) != 1)
    throw std::invalid_argument("zero-shot scores one image embedding, [E] or [1, E]");
  ZeroShotScores scores;
  scores.logits = tower.logits_per_image(image, text_embeddings)[0];
  scores.probabilities = tower.probabilities(scores.logits);
  return scores;
}

}  // namespace attnscope
