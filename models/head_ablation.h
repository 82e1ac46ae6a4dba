// Head ablation as every forward sees it: the session's ablated heads (AttentionSettings::ablation)
// knock each head's value-weighted sum z (ViT-Prisma's hook_z, without the value bias) out of every
// forward of a ViT-shaped model (VisionTransformerImpl::forward), replaced by zero or by its mean
// per token position over a folder's images through the unablated model. Those means are taken
// here, once per folder, attention settings and input size, and kept by the model.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "models/attention_settings.h"
#include "models/model_loader.h"
#include "models/residual_hooks.h"
#include "models/vit.h"

namespace attnscope {

// Every head's z averaged over `images` (each [1, 3, H, W] on the model's device, all one size)
// through the model without any ablation: [layers, heads, T, d] float32. `progress` after each
// image; `cancelled` is checked between blocks. Refuses an empty list, images of different sizes
// and means that would not fit kMaxRecordBytes.
torch::Tensor average_head_outputs(VisionTransformerImpl& model, const std::vector<torch::Tensor>& images,
                                   const AttentionSettings& settings,
                                   const std::function<void(int done, int total)>& progress = {},
                                   const std::function<bool()>& cancelled = {});
// The same over `count` images that `image(i)` makes when their turn comes (decoded from a folder):
// one image in memory at a time beside the running sum.
torch::Tensor average_head_outputs(VisionTransformerImpl& model, size_t count,
                                   const std::function<torch::Tensor(size_t index)>& image,
                                   const AttentionSettings& settings,
                                   const std::function<void(int done, int total)>& progress = {},
                                   const std::function<bool()>& cancelled = {});

// Before a forward with `settings` on an input of `height` x `width`: with mean ablation, makes sure
// the model holds the heads' means over settings.ablation.images for these settings and this size,
// preparing each image there as the input was prepared (model.input, the model's normalisation).
// Nothing to do for zero ablation, no ablation, or a model that is not a ViT (its forward refuses
// the ablation with the reason). Throws std::invalid_argument naming the folder or the image that
// does not fit.
void prepare_head_ablation(LoadedModel& model, const AttentionSettings& settings, int height, int width,
                           const std::function<void(int done, int total)>& progress = {},
                           const std::function<bool()>& cancelled = {});

}  // namespace attnscope
