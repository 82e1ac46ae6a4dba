// CLIP's text tower, computed as openai/CLIP's clip/model.py `encode_text` does (token embedding plus
// positions, causal pre-LN residual blocks, ln_final, the end-of-text row times text_projection), with
// its registered names equal to OpenAI's keys so that loading is a name walk; Hugging Face CLIPModel
// files are renamed to them (models/clip_text_checkpoint.h). SigLIP's text tower is the same tower with
// three switches (transformers' SiglipTextTransformer, open_clip's TextTransformer with
// no_causal_mask and pool_type 'last'): no causal mask, the last position pooled, a projection with a
// bias; its scores add logit_bias and are read through a sigmoid per prompt. Every block can hand out
// its attention probabilities as the forward uses them, inside the autograd graph, for text-side
// relevance.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "models/arch_limits.h"
#include "models/vit.h"

namespace attnscope {

// Which row of a prompt's tokens its embedding is read from.
enum class TextPooling {
  // The argmax of the ids (OpenAI's rule: end-of-text is the largest id of the vocabulary; also
  // transformers' for configs whose eos_token_id is the legacy 2).
  ArgmaxOfIds,
  // The first position of end_of_text_id (transformers' rule for every other eos_token_id).
  FirstEndOfText,
  // The last position of the row (SigLIP: prompts are padded to the full context, the mask is not
  // causal, and the last row has seen every token).
  LastToken,
};
std::string to_string(TextPooling pooling);

// How logits become a prompt's probability.
enum class TextScores {
  Softmax,  // CLIP: logit_scale.exp() * cos, a softmax over the prompts
  Sigmoid,  // SigLIP: logit_scale.exp() * cos + logit_bias, each prompt's own sigmoid
};
std::string to_string(TextScores scores);

// Which tokenizer writes the ids this tower reads.
enum class TextTokenizerKind {
  ClipBpe,        // core/clip_tokenizer.h: OpenAI's byte-level BPE
  SentencePiece,  // core/sentencepiece_tokenizer.h: SigLIP's spiece.model, SigLIP 2's Gemma tokenizer.model
};

struct ClipTextArch {
  int vocab_size = 0;
  int context_length = 0;  // positions the tower was trained with (77 for OpenAI's models)
  int width = 0;
  int layers = 0;
  int heads = 0;
  int mlp_hidden = 0;
  int embed_dim = 0;  // text_projection's output: the joint embedding space
  double layer_norm_eps = 1e-5;
  MlpActivation activation = MlpActivation::QuickGelu;
  TextPooling pooling = TextPooling::ArgmaxOfIds;
  int64_t end_of_text_id = 0;  // every prompt row must hold it (OpenAI: vocab_size - 1, i.e. 49407)
  CheckpointLayout source_layout = CheckpointLayout::OpenAiClip;  // OpenAiClip, HfClip, HfSiglip or OpenClip
  bool causal = true;                                             // SigLIP: every token sees every other
  bool projection_bias = false;                                   // SigLIP: text_projection_bias
  TextScores scores = TextScores::Softmax;                        // Sigmoid: logit_bias is a parameter
  TextTokenizerKind tokenizer = TextTokenizerKind::ClipBpe;
};
void to_json(nlohmann::json& j, const ClipTextArch& arch);

// The tower's sizes as models/arch_limits judges them (key names as OpenAI's files spell them), and
// its memory: float32 parameters and the forward pass of one prompt with every block's activations
// and attention kept (what a gradient through the tower holds).
ArchEstimate clip_text_arch_estimate(const ClipTextArch& arch);

// The prompts one pass of encode_text runs at once: as many as fit in about 1 GiB by the estimate's
// count for one prompt (at least one), so a long prompt list never allocates beyond that.
int64_t clip_text_prompts_per_pass(const ClipTextArch& arch);

// nn.MultiheadAttention's parameters as OpenAI's keys hold them: in_proj_weight [3W, W] (q, k, v
// stacked), in_proj_bias [3W], out_proj.
struct ClipTextAttentionImpl : torch::nn::Module {
  ClipTextAttentionImpl(int width, int heads);
  // x [P, L, W], additive mask [L, L]; `probabilities_hook` (may be empty) receives the probabilities
  // [P, h, L, L] before they weigh the values, and may replace them.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask,
                        const std::function<void(torch::Tensor&)>& probabilities_hook);
  torch::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};
  int heads = 1;
};
TORCH_MODULE(ClipTextAttention);

struct ClipTextMlpImpl : torch::nn::Module {
  ClipTextMlpImpl(int width, int hidden, MlpActivation activation);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  MlpActivation activation;
};
TORCH_MODULE(ClipTextMlp);

// OpenAI's ResidualAttentionBlock: x + attn(ln_1(x)), then + mlp(ln_2(x)).
struct ClipTextBlockImpl : torch::nn::Module {
  explicit ClipTextBlockImpl(const ClipTextArch& arch);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask,
                        const std::function<void(torch::Tensor&)>& probabilities_hook);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  ClipTextAttention attn{nullptr};
  ClipTextMlp mlp{nullptr};
};
TORCH_MODULE(ClipTextBlock);

// "transformer.resblocks.N", as the keys nest it.
struct ClipTextTransformerImpl : torch::nn::Module {
  explicit ClipTextTransformerImpl(const ClipTextArch& arch);
  torch::nn::ModuleList resblocks{nullptr};
};
TORCH_MODULE(ClipTextTransformer);

struct TextForwardOptions {
  // Keep each block's attention probabilities [P, h, L, L] in the output. With autograd on they
  // are part of the graph: torch::autograd::grad(score, output.attention) gives dScore/dA, what
  // Chefer et al.'s text-side relevance reads.
  bool keep_attention = false;
  // Called with block `block`'s probabilities as the forward uses them (the block's output is then
  // probabilities @ v); it may keep them or replace them (a leaf that requires grad). Empty: no cost.
  std::function<void(int block, torch::Tensor& probabilities)> attention_hook;
  std::function<bool()> cancelled;  // checked between blocks (throws Cancelled)
};

struct TextForwardOutput {
  torch::Tensor embedding;               // [P, E], before normalisation (encode_text's output)
  torch::Tensor end_of_text;             // [P] int64: the position each prompt's embedding was read at
  std::vector<torch::Tensor> attention;  // per block [P, h, L, L] when keep_attention
};

class ClipTextTowerImpl : public torch::nn::Module {
 public:
  explicit ClipTextTowerImpl(const ClipTextArch& arch);
  const ClipTextArch& arch() const { return arch_; }

  // token_ids: [P, L] integers, 1 <= L <= context_length (clip.tokenize's rows: start, tokens, end of
  // text, zeros; a shorter L gives the same embedding, the mask being causal; without the causal mask
  // L must be the context), every id in [0, vocab_size) and every row holding end_of_text_id. Throws
  // std::invalid_argument naming the first row at fault. Runs all prompts at once (what gradients need).
  TextForwardOutput forward(const torch::Tensor& token_ids, const TextForwardOptions& options = {});
  // The embeddings [P, E] (before normalisation), clip_text_prompts_per_pass() prompts at a time.
  torch::Tensor encode_text(const torch::Tensor& token_ids, const std::function<bool()>& cancelled = {});

  // Throws std::invalid_argument when `token_ids` are not ids this tower reads (see forward).
  void check_token_ids(const torch::Tensor& token_ids) const;
  // The position of each row's embedding by the layout's pooling rule: [P] int64.
  torch::Tensor pooled_positions(const torch::Tensor& token_ids) const;

  nlohmann::json describe() const;
  int64_t parameter_count() const;

  torch::nn::Embedding token_embedding{nullptr};
  torch::Tensor positional_embedding;  // [context_length, W]
  ClipTextTransformer transformer{nullptr};
  torch::nn::LayerNorm ln_final{nullptr};
  torch::Tensor text_projection;       // [W, E]: x @ text_projection
  torch::Tensor text_projection_bias;  // [E] when arch.projection_bias (SigLIP's head.bias), else undefined
  torch::Tensor logit_scale;           // 0-d; logits are logit_scale.exp() times the cosine
  torch::Tensor logit_bias;            // 0-d, TextScores::Sigmoid only: added to the logits

  // logits_per_image [B, P] of image embeddings [B, E] and text embeddings [P, E] by this tower's
  // rule (clip_logits_per_image, plus logit_bias for SigLIP). Differentiable in both embeddings.
  torch::Tensor logits_per_image(const torch::Tensor& image_embeddings, const torch::Tensor& text_embeddings) const;
  // Each prompt's probability from its logits [..., P]: softmax over the prompts, or SigLIP's sigmoid.
  torch::Tensor probabilities(const torch::Tensor& logits) const;

 private:
  ClipTextArch arch_;
};
TORCH_MODULE(ClipTextTower);

// CLIP's logits_per_image [B, P]: logit_scale.exp() times the cosine of each image embedding [B, E]
// with each text embedding [P, E] (both normalised here), as clip/model.py's CLIP.forward computes
// them. Differentiable in both embeddings (the text one as a gradient target). Throws
// std::invalid_argument when the widths differ.
torch::Tensor clip_logits_per_image(const torch::Tensor& image_embeddings, const torch::Tensor& text_embeddings,
                                    const torch::Tensor& logit_scale);

// Zero-shot scores of one image over P prompts.
struct ZeroShotScores {
  torch::Tensor logits;         // [P]: logits_per_image
  torch::Tensor probabilities;  // [P]: their softmax over the prompts (SigLIP: each one's sigmoid)
};
// image_embedding [E] or [1, E], text_embeddings [P, E] (before normalisation), by `tower`'s rule.
ZeroShotScores zero_shot(const torch::Tensor& image_embedding, const torch::Tensor& text_embeddings,
                         const ClipTextTowerImpl& tower);

}  // namespace attnscope
