#include "analysis/pool_attention.h"

#include <torch/torch.h>

namespace attnscope {

PoolMaps pool_maps(const PoolAttention& pool, const TokenLayout& layout) {
  const torch::Tensor heads = pool.probabilities[0].to(torch::kCPU, torch::kFloat);  // [h, N]
  const int64_t patches = int64_t(layout.grid_h) * layout.grid_w, prefix = heads.size(1) - patches;
  if (prefix < 0)
    throw std::invalid_argument(pool.name + " reads " + std::to_string(heads.size(1)) + " tokens, fewer than the " +
                                std::to_string(patches) + " patches of the grid");
  PoolMaps maps;
  maps.layer = pool.name;
  maps.prefix_tokens = int(prefix);
  maps.heads = heads.narrow(1, prefix, patches).reshape({heads.size(0), layout.grid_h, layout.grid_w}).contiguous();
  maps.mean = maps.heads.mean(0).contiguous();
  maps.prefix_share = prefix > 0 ? heads.narrow(1, 0, prefix).sum(1) : torch::zeros({heads.size(0)});
  return maps;
}

const PoolAttention& features_pool(const std::vector<PoolAttention>& pools, const std::string& family) {
  if (pools.empty())
    throw std::invalid_argument(family +
                                " reads its features by a token or a mean, not by attention: the pool view is "
                                "for SigLIP's and PE's attention-pool head and CaiT's class-attention blocks");
  return pools.back();
}

}  // namespace attnscope
