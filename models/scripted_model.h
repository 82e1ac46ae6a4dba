// Any other model, as a TorchScript file written by scripts/export_torchscript.py: its forward
// returns (output, per-layer attention probabilities) and its "attnscope.json" extra file says
// how tokens map to the image. attnscope reads the attention it reports; it cannot recompute it
// from q and k, so variant swaps, f_p and Grad-CAM are not available for such files.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/vit.h"

namespace torch::jit {
struct Module;
}

namespace attnscope {

struct ScriptedLayer {
  std::string name;  // the attention module's name in the exported model
  std::string kind;  // timm-attention, multihead-attention
  int heads = 0;
};

class ScriptedModel : public Backbone {
 public:
  // Loads `path` on `device`; throws CheckpointError when it has no valid attnscope.json.
  ScriptedModel(const std::string& path, torch::Device device);

  // images: [B, 3, H, W] at the size the file was traced for; `settings` and `options.hook` do not
  // apply (the model reports its own attention).
  ForwardOutput forward(const torch::Tensor& images, const AttentionSettings& settings,
                        const ForwardOptions& options = {}) override;

  std::string family() const override { return "torchscript"; }
  nlohmann::json describe() const override;
  std::vector<std::string> summary_lines() const override;
  InputGeometry input_geometry() const override;
  OutputKind output_kind() const override { return arch_.output_kind; }
  int num_classes() const override { return arch_.num_classes; }
  int attention_layers() const override { return int(layers_.size()); }
  std::string resolve_hook_point(const std::string& spec) const override;
  std::string default_hook_point() const override { return ""; }
  bool computes_attention() const override { return false; }
  WindowSupport window_support() const override {
    return {WindowSupport::Kind::None, "a TorchScript file reports its own attention; nothing is re-run"};
  }
  int64_t parameter_count() const override;

  // A VitArch that describes the token layout, heads and depth for the views.
  const VitArch& arch() const { return arch_; }
  const std::vector<ScriptedLayer>& layers() const { return layers_; }
  const std::string& name() const { return name_; }
  const std::array<float, 3>& mean() const { return mean_; }
  const std::array<float, 3>& std() const { return std_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  std::shared_ptr<torch::jit::Module> module_;  // only scripted_model.cpp includes torch/script.h
  VitArch arch_;
  std::vector<ScriptedLayer> layers_;
  std::string name_;
  std::array<float, 3> mean_{}, std_{};
  std::vector<std::string> class_names_;
};

// The parameters and buffers of a TorchScript archive as a state_dict, without running its forward
// (loading may run a module's TorchScript __setstate__, never Python): OpenAI's released CLIP files
// are TorchScript archives of a model whose weights attnscope runs natively.
std::map<std::string, torch::Tensor> scripted_state_dict(const std::string& path);

// True when the archive carries attnscope.json (written by scripts/export_torchscript.py).
bool has_attnscope_metadata(const std::string& path);

}  // namespace attnscope
