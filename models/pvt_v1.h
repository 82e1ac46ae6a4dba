// The successors' PVT: PVT v1's skeleton as Agent Attention (agent_pvt.py), InLine (inline_pvt.py)
// and PolaFormer (pola_pvt.py) build it, in their authors' keys: per stage a patch embedding
// (a conv with kernel = stride, then LayerNorm), a learned position embedding resized bilinearly
// to other grids, blocks of spatial-reduction softmax attention or the stage's successor kernel
// (models/pvt.h's blocks with a plain MLP), and the mean of the last grid into the head, with no
// final norm (pola_pvt stores one its forward does not use).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/pvt.h"

namespace attnscope {

struct PvtV1Arch {
  int in_chans = 3;
  int patch_size = 4;  // stage 0's kernel and stride; later stages 2
  std::vector<PvtStageArch> stages;
  std::vector<int> position_sides;  // each stage's trained grid side (pos_embed{i})
  int num_classes = 0;
  int native_height = 224, native_width = 224;
  double block_eps = 1e-6;   // the factories' partial(LayerNorm, eps=1e-6)
  double embed_eps = 1e-5;   // patch embeddings and attn.norm
  bool unused_norm = false;  // pola_pvt's `norm`, stored and not applied
  std::string attn_type;     // the authors' per-stage letters (A/B, I/S, L/S)
};

class PvtV1Impl : public StagedBackbone {
 public:
  explicit PvtV1Impl(const PvtV1Arch& arch);
  std::string family() const override;
  std::vector<std::string> summary_lines() const override;

  std::vector<OverlapPatchEmbed> patch_embeds;
  std::vector<torch::Tensor> pos_embeds;
  std::vector<torch::nn::ModuleList> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  PvtV1Arch arch_;
};
TORCH_MODULE(PvtV1);

}  // namespace attnscope
