#include "models/clip_zero_shot.h"

namespace attnscope {

ClipZeroShot clip_zero_shot(LoadedModel& model, const torch::Tensor& image, const torch::Tensor& token_ids,
                            const std::function<bool()>& cancelled) {
  ClipTextTowerImpl& tower = model.text("zero-shot");
  if (image.dim() != 4 || image.size(0) != 1) throw std::invalid_argument("zero-shot scores one image: [1, 3, H, W]");
  tower.check_token_ids(token_ids);
  c10::InferenceMode inference_mode;
  ForwardOptions options;
  options.capture = false;
  options.cancelled = cancelled;
  ClipZeroShot result;
  result.image_embedding = model.forward(image.to(model.device), AttentionSettings{}, options).logits[0];
  result.text_embeddings = tower.encode_text(token_ids, cancelled);
  const ZeroShotScores scores = zero_shot(result.image_embedding, result.text_embeddings, tower);
  result.logits = scores.logits;
  result.probabilities = scores.probabilities;
  return result;
}

}  // namespace attnscope
