// CARE (zhouyuan888888/CARETrans models/CARETrans.py, CARENets) in the authors' own key names: a
// conv stem, stages of blocks whose channels split into an untouched memory part, a linear
// attention part (ELU + 1 kernel, q and k from a 1x1 conv, v the part itself; strip convolutions in
// the first two stages), a 3x3 and a 7x7 depthwise part, mixed again by the dual interaction
// module; two heads averaged in eval. Every block counts as a layer; strip-conv blocks have no heads.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/backbone.h"

namespace attnscope {

// Why the window option does nothing on CARE (the UI and the CLI say it instead of ignoring it).
extern const char* const kCareWindowNote;

struct CareBlockArch {
  bool attention = false;   // token_mixer.qk: ELU + 1 linear attention; else strip convolutions
  int heads = 0;            // attention: part channels / att_head_dim
  bool last = false;        // no inter2_fc2, no residual, no gamma: outputs inter2_hidden channels
  bool layer_scale = true;  // gamma (the authors' ls_init_value > 0)
  int inter1_hidden = 0;    // ratio1 * 3 part channels
  int inter2_hidden = 0;    // ratio2 * dim
};

struct CareStageArch {
  int dim = 0;            // feat + mem channels of the stage
  int part_channels = 0;  // the authors' gc (mem_dim): channels of each of attention, dwconv3, dwconv7
  int att_head_dim = 1;
  bool downsample = false;  // stage > 0: BatchNorm, then a 2x2 stride-2 conv
  std::vector<CareBlockArch> blocks;
  int memory_channels() const { return dim - 3 * part_channels; }
};

struct CareArch {
  int in_chans = 3;
  std::vector<CareStageArch> stages;
  int cls_dim = 0;  // the heads' width: the last block's output channels
  int num_classes = 0;
  int native_height = 224, native_width = 224;
};

struct CareTokenMixerImpl : torch::nn::Module {
  CareTokenMixerImpl(int part_channels, bool attention);
  torch::nn::Conv2d dwconv1{nullptr}, dwconv2{nullptr}, qk{nullptr}, dwconvatt_1{nullptr}, dwconvatt_2{nullptr};
};
TORCH_MODULE(CareTokenMixer);

struct CareInterModuleImpl : torch::nn::Module {
  CareInterModuleImpl(int dim, int part_channels, const CareBlockArch& arch);
  torch::nn::BatchNorm2d inter1_norm{nullptr}, inter2_norm{nullptr};
  torch::nn::Conv2d inter1_fc1{nullptr}, inter1_conv{nullptr}, inter1_fc2{nullptr};
  torch::nn::Conv2d inter2_fc1{nullptr}, inter2_conv{nullptr}, inter2_fc2{nullptr};
};
TORCH_MODULE(CareInterModule);

struct CareBlockImpl : torch::nn::Module {
  CareBlockImpl(int dim, int part_channels, const CareBlockArch& arch);
  CareTokenMixer token_mixer{nullptr};
  CareInterModule inter_layer{nullptr};
  torch::Tensor gamma;
};
TORCH_MODULE(CareBlock);

struct CareStageImpl : torch::nn::Module {
  CareStageImpl(int in_dim, const CareStageArch& arch);
  torch::nn::Sequential downsample{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};
TORCH_MODULE(CareStage);

struct CareHeadImpl : torch::nn::Module {
  CareHeadImpl(int cls_dim, int classes);
  torch::Tensor forward(const torch::Tensor& features);  // [B, C, H, W] -> [B, classes]
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(CareHead);

// Every block counts as a layer.
class CareNetImpl : public StagedBackbone {
 public:
  explicit CareNetImpl(const CareArch& arch);
  // Hook points ([B, C, H, W]): "stem", "stages.S.blocks.B" (a block's output), "stages.S" (its
  // last block's), and "blocks.N" counting blocks across stages.
  std::string family() const override { return "care"; }
  OutputKind output_kind() const override { return OutputKind::Logits; }  // its two heads are always there
  std::vector<std::string> summary_lines() const override;
  const CareArch& arch() const { return arch_; }

  torch::nn::Sequential stem{nullptr};
  torch::nn::ModuleList stages{nullptr};
  CareHead head{nullptr}, dist_head{nullptr};

 protected:
  nlohmann::json describe_architecture() const override;
  StageTokens enter_stage(int stage, const StageTokens& previous, const StagedPass& pass) override;
  torch::Tensor run_block(const BlockSite& site, const torch::Tensor& x, const StagedPass& pass) override;
  torch::Tensor classify(const StageTokens& tokens, const StagedPass& pass) override;

 private:
  // The block's computation: [B, C, H, W] -> [B, C', H, W].
  torch::Tensor mix_block(CareBlockImpl& block, const CareStageArch& stage, const CareBlockArch& block_arch,
                          const torch::Tensor& x, const AttentionSettings& settings, AttentionCapture* capture);
  CareArch arch_;
};
TORCH_MODULE(CareNet);

}  // namespace attnscope
