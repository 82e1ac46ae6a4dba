// `attnscope bench --scale`: DINOv2-S/14-with-registers-shaped models at 518 and 1036 pixels
// (1,374 and 5,481 tokens) against PyTorch eager on the same weights and threads.
#pragma once

#include <filesystem>
#include <string>

namespace attnscope {

// `python` runs the checkout's bench/pytorch_scale.py (it writes the weights: required); `folder`
// holds the model, images and run outputs.
void bench_scale(const std::string& python, const std::filesystem::path& folder);

}  // namespace attnscope
