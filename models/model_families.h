// The backbone families attnscope runs natively, in one table the loader walks (timm's
// @register_model): each entry recognises its checkpoints by their keys, reads the architecture from
// their names and shapes (every size bounded before anything is allocated) and builds the model. A
// family lives in models/<family>.{h,cpp} and models/<family>_checkpoint.cpp, which defines its
// entry, plus its line in model_families.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/arch_config.h"
#include "models/arch_limits.h"
#include "models/backbone.h"
#include "models/checkpoint_keys.h"

namespace attnscope {

struct LayoutFacts;

// What a family reads a checkpoint with.
struct FamilyInput {
  Checkpoint& checkpoint;      // a family may rename it in place to its own layout
  const nlohmann::json& meta;  // gather_arch_config()'s values: what the keys cannot show (an object)
  const std::map<std::string, std::string>& sources;  // where each of them came from
  const LayoutFacts& layout;  // the ViT layout the keys came in (Hugging Face, CLIP, DINOv2, timm)
  std::vector<std::string>& notes;
  std::vector<ArchAssumption>& assumed;  // what the family took without a source saying it
};

// An architecture read from a checkpoint's shapes, not built yet: its sizes and memory estimate,
// and the model it makes.
class InferredBackbone {
 public:
  InferredBackbone(ArchEstimate estimate, std::function<std::shared_ptr<Backbone>()> make)
      : estimate_(std::move(estimate)), make_(std::move(make)) {}
  // Judges the estimate (check_arch_limits: throws CheckpointError naming the size at fault), then
  // builds the model: nothing is allocated for an architecture beyond the bounds.
  std::shared_ptr<Backbone> build() const;
  const ArchEstimate& estimate() const { return estimate_; }

 private:
  ArchEstimate estimate_;
  std::function<std::shared_ptr<Backbone>()> make_;
};

// The InferredBackbone of a family's model type `Model`, constructed from its architecture.
template <typename Model, typename Arch>
InferredBackbone inferred_backbone(const Arch& arch, ArchEstimate estimate) {
  return InferredBackbone(std::move(estimate), [arch] { return std::make_shared<Model>(arch); });
}
// ... with the sizes `shapes` read and the memory `memory` counts for the architecture.
template <typename Model, typename Arch>
InferredBackbone inferred_backbone(const ShapeReader& shapes, const Arch& arch, StagedMemory (*memory)(const Arch&)) {
  return inferred_backbone<Model>(arch, shapes.estimate(memory(arch)));
}

struct BackboneFamily {
  std::string name;  // "swin"
  std::string runs;  // what it covers, for refusals: "Swin, FLatten-Swin"
  std::function<bool(const Checkpoint&)> recognises;
  // Renames the checkpoint to the family's keys where it came in another layout and reads the
  // architecture; throws CheckpointError naming the key that is missing or does not fit.
  std::function<InferredBackbone(FamilyInput&)> infer;
  // The weight sets of a training checkpoint, in the order the family's paper reports them
  // (L2ViT: model_ema first); empty: the checkpoint reader's order.
  std::vector<std::string> containers;
  // The released configurations by registered name (timm's @register_model, the authors' tables).
  std::vector<ReleasedArch> released;
  // What the weights cannot show that this family reads besides heads and img_size (every family's):
  // its keys in attnscope's and its authors' names (--arch, config.json model_args).
  std::vector<ArchKey> config_keys;
  // Where its authors' training yaml keeps them: the yaml path, and the authors' keyword it is.
  std::vector<YamlArchKey> yaml_keys;
};

// Every family, in the order their keys are tried (ViT, the loosest, last).
const std::vector<BackboneFamily>& backbone_families();

// The first family that recognises the keys; throws CheckpointError for a file of a family
// attnscope recognises but does not run, naming it and what to do.
const BackboneFamily& family_for(const Checkpoint& checkpoint);

// What the file says about its architecture beyond its keys: safetensors metadata
// "attnscope_arch" (JSON), else a sidecar FILE.arch.json beside the weights; null when neither.
nlohmann::json architecture_metadata(const Checkpoint& checkpoint, const std::string& weights_file);

}  // namespace attnscope
