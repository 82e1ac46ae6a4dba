#include "analysis/ablated_inference.h"

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <chrono>

#include "models/finite_checks.h"
#include "models/head_ablation.h"
#include "models/model_loader.h"

namespace attnscope {

AblatedInference ablated_inference(LoadedModel& model, const RgbImage& prepared, const AttentionSettings& settings,
                                   const ForwardOptions& options, const std::string& input_key, AnalysisCache& cache) {
  AblatedInference inference;
  auto* vit = model.is_scripted() ? nullptr : dynamic_cast<VisionTransformerImpl*>(model.backbone.get());
  if (!vit) {
    inference.result = std::make_shared<InferenceResult>(run_inference(model, prepared, settings, options));
    return inference;
  }
  prepare_head_ablation(model, settings, prepared.rows, prepared.cols, {}, options.cancelled);
  AttentionSettings unablated = settings;
  unablated.ablation = {};
  c10::InferenceMode inference_mode;
  const torch::Tensor input = image_to_tensor(prepared, model.normalization).to(model.device);
  const std::string key = "unablated-run|" + input_key + "|" + settings_key(unablated);
  std::shared_ptr<const ResidualRun> clean = cache.get<ResidualRun>(key);
  if (!clean) {
    StreamRecording inputs;
    inputs.resid_pre = true;
    auto run = std::make_shared<ResidualRun>();
    const auto start = std::chrono::steady_clock::now();
    run->output = vit->forward_with_streams(input, unablated, options, {}, inputs, &run->record);
    if (model.device.is_cuda()) torch::cuda::synchronize();
    inference.unablated_milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    cache.put(key, run);
    clean = run;
  }
  HeadAblation ablation{settings.ablation.heads, settings.ablation.kind, {}};
  if (ablation.kind == AblationKind::Mean) {
    const HeadMeanOutputs* means = vit->head_means();
    std::vector<torch::Tensor> listed;
    for (const HeadIndex& head : ablation.heads) listed.push_back(means->z[head.layer][head.head]);
    ablation.means.heads = ablation.heads;
    ablation.means.z = torch::stack(listed);
    ablation.means.tokens = means->z.size(2);
    ablation.means.images = int(means->images.size());
  }
  auto result = std::make_shared<InferenceResult>();
  result->input_rgb = prepared;
  result->device = model.device.str();
  const auto start = std::chrono::steady_clock::now();
  result->forward = ablate_heads(*vit, input, unablated, ablation, options, {}, clean.get()).output;
  if (model.device.is_cuda()) torch::cuda::synchronize();
  result->milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  require_finite_output(model.backbone.get(), input, settings, result->forward.logits);
  if (model.output_kind() == OutputKind::Logits)
    result->top = top_predictions(result->forward.logits[0], 5, model.class_names);
  inference.result = result;
  inference.unablated = clean;
  return inference;
}

}  // namespace attnscope
