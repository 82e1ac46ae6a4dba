// `attnscope bench --scale`: DINOv2-S/14-with-registers-shaped models at 518 and 1036 pixels
// (1,374 and 5,481 tokens), or (`model` dinov3) DINOv3-S/16 in timm's registered settings at 512
// and 1024 pixels (1,029 and 4,101 tokens), against PyTorch eager on the same weights and threads.
#pragma once

#include <filesystem>
#include <string>

namespace attnscope {

// `python` runs the checkout's bench/pytorch_scale.py (it writes the weights: required); `folder`
// holds the model, images and run outputs.
void bench_scale(const std::string& python, const std::filesystem::path& folder, const std::string& model = "dinov2");
// "dinov2|dinov3|siglip2": the models --scale-model names.
std::string scale_model_names();

}  // namespace attnscope
