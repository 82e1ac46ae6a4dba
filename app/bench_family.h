// `attnscope bench --family NAME`: Swin-T or PVT-v2-b2 shapes at 224, native and swapped kernels, each
// against eager PyTorch with the same kernel swapped in; or a successor's released tiny shape against
// its authors' own module.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "models/attention_settings.h"

namespace attnscope {

// Swin-T or PVT-v2-b2 shapes at 224 (random weights written by the Python side, so that both
// run the same file) with capture, native and each of `variants`, against the eager references of
// tests/python/reference_hier.py with the same kernel swapped in, on the same weights and threads,
// in alternating rounds (one Python process a round times every kernel). agent_swin_tiny,
// inline_swin_tiny, pola_swin_tiny and mlla_tiny: the authors' own modules write the weights and are
// timed eagerly on them (bench/pytorch_authors.py), against attnscope's native reading, with capture.
void bench_family(const std::string& family, const std::vector<Variant>& variants, const std::filesystem::path& folder,
                  const std::string& python, torch::Device device, int warmup, int runs, int rounds);

}  // namespace attnscope
