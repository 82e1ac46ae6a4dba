#include "models/head_ablation.h"

#include <torch/torch.h>

#include <memory>
#include <stdexcept>

#include "core/image.h"
#include "models/inference.h"

namespace attnscope {

torch::Tensor average_head_outputs(VisionTransformerImpl& model, size_t count,
                                   const std::function<torch::Tensor(size_t index)>& image,
                                   const AttentionSettings& settings,
                                   const std::function<void(int done, int total)>& progress,
                                   const std::function<bool()>& cancelled) {
  if (count == 0) throw std::invalid_argument("mean ablation needs images to average the heads' outputs over");
  const VitArch& arch = model.arch();
  AttentionSettings unablated = settings;
  unablated.ablation = {};
  StreamRecording recording;
  recording.z = true;
  ForwardOptions options;
  options.capture = false;
  options.cancelled = cancelled;
  torch::NoGradGuard no_grad;
  torch::Tensor sum;
  int64_t height = 0, width = 0;
  // One image at a time, decoded when its turn comes: memory is one image and the running sum,
  // however large the folder (before, every image was decoded first: 5,000 tiny ones took 738 MB).
  for (size_t i = 0; i < count; ++i) {
    const torch::Tensor input = image(i);
    if (!input.defined() || input.dim() != 4 || input.size(0) != 1)
      throw std::invalid_argument("image " + std::to_string(i) + " must be [1, 3, H, W]");
    if (i == 0) {
      height = input.size(2);
      width = input.size(3);
      const TokenLayout layout = arch.layout_for(int(height), int(width));
      // The sum in float64 and z of every block for one image.
      const double bytes = 12.0 * double(arch.depth) * double(layout.total_tokens()) * double(arch.embed_dim);
      if (bytes > kMaxRecordBytes)
        throw std::invalid_argument("averaging every head's output over " + std::to_string(layout.total_tokens()) +
                                    " tokens would take " + std::to_string(int64_t(bytes / (1 << 20))) +
                                    " MiB, more than the " + std::to_string(int64_t(kMaxRecordBytes / (1 << 20))) +
                                    " MiB allowed: use a smaller input");
    } else if (input.size(2) != height || input.size(3) != width) {
      throw std::invalid_argument("image " + std::to_string(i) + " is " + std::to_string(input.size(3)) + "x" +
                                  std::to_string(input.size(2)) + ", image 0 " + std::to_string(width) + "x" +
                                  std::to_string(height) +
                                  ": the mean is taken per token position, so every image must have one size");
    }
    ResidualStreamRecord record;
    model.forward_with_streams(input, unablated, options, {}, recording, &record);
    // [layers, heads, T, d] from the blocks' [1, heads, T, d].
    const torch::Tensor z = torch::stack(record.z).select(1, 0).to(torch::kCPU, torch::kDouble);
    sum = sum.defined() ? sum.add_(z) : z;
    if (progress) progress(int(i + 1), int(count));
  }
  return (sum / double(count)).to(torch::kFloat);
}

torch::Tensor average_head_outputs(VisionTransformerImpl& model, const std::vector<torch::Tensor>& images,
                                   const AttentionSettings& settings,
                                   const std::function<void(int done, int total)>& progress,
                                   const std::function<bool()>& cancelled) {
  return average_head_outputs(
      model, images.size(), [&](size_t index) { return images[index]; }, settings, progress, cancelled);
}

void prepare_head_ablation(LoadedModel& model, const AttentionSettings& settings, int height, int width,
                           const std::function<void(int done, int total)>& progress,
                           const std::function<bool()>& cancelled) {
  const HeadAblationSetting& ablation = settings.ablation;
  if (ablation.empty() || ablation.kind != AblationKind::Mean || model.is_scripted()) return;
  auto* vit = dynamic_cast<VisionTransformerImpl*>(model.backbone.get());
  if (!vit) return;
  if (ablation.images.empty())
    throw std::invalid_argument(
        "--ablation mean needs --ablation-images DIR: the images each head's output is "
        "averaged over");
  const TokenLayout layout = vit->arch().layout_for(height, width);
  // The folder's images are prepared as the input was: the means follow the preprocessing too.
  const std::string preparation = to_string(model.input) + "|" + channel_values_text(model.normalization.mean) + "|" +
                                  channel_values_text(model.normalization.std);
  const std::string key = head_means_key(settings, layout.total_tokens());
  if (vit->head_means() && vit->head_means()->key == key && vit->head_means()->preparation == preparation) return;
  std::vector<std::string> files = list_images(ablation.images);
  if (files.empty())
    throw std::invalid_argument("--ablation-images " + ablation.images + " holds no images to average the heads over");
  // Tensors a later forward with autograd can use (Grad-CAM on the ablated model), even when called
  // from inside an inference-mode run.
  c10::InferenceMode normal_tensors(false);
  const auto prepared_image = [&](size_t index) {
    const std::string& file = files[index];
    const RgbImage prepared = prepare_model_input(load_image_rgb(file, model.input.max_pixels), model.input, model);
    if (prepared.rows != height || prepared.cols != width)
      throw std::invalid_argument("--ablation-images: " + file + " is " + std::to_string(prepared.cols) + "x" +
                                  std::to_string(prepared.rows) + " once prepared, the input " + std::to_string(width) +
                                  "x" + std::to_string(height) +
                                  ": the means are per token position (give --size, or images of one size)");
    return image_to_tensor(prepared, model.normalization).to(model.device);
  };
  auto means = std::make_shared<HeadMeanOutputs>();
  means->key = key;
  means->preparation = preparation;
  means->z = average_head_outputs(*vit, files.size(), prepared_image, settings, progress, cancelled).to(model.device);
  means->images = files;
  vit->set_head_means(means);
}

}  // namespace attnscope
