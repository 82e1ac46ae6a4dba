// Reading a family's architecture out of a checkpoint's key names and shapes. Every size is bounded
// (models/arch_limits.h) as it is read, before anything is allocated for it, and every refusal names
// the tensor as the file calls it, also where the family renamed a layout to its own keys.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/checkpoint.h"
#include "models/arch_limits.h"
#include "models/attention_kernels.h"
#include "models/checkpoint_layout.h"

namespace attnscope {

// "[3,224,224]": a shape as refusals print it.
std::string shape_text(const torch::IntArrayRef& shape);

class ShapeReader {
 public:
  // `family` names the model in refusals ("Swin").
  ShapeReader(const Checkpoint& checkpoint, std::string family);
  // Where a family renamed a layout to its own keys (Microsoft's Swin, the original PVT v2): the
  // file's name for `key`, for refusals.
  void renamed(const std::string& key, const std::string& file_key) { file_keys_[key] = file_key; }

  bool has(const std::string& key) const { return checkpoint_.tensors.count(key) > 0; }
  // The tensor `key` with `dims` dimensions; throws CheckpointError naming it when it is missing or
  // has another number of dimensions.
  const torch::Tensor& tensor(const std::string& key, int64_t dims) const;
  // Size `index` of the `dims`-dimensional tensor `key` as the architecture's `what`, bounded by `range`.
  int size(const std::string& key, int64_t dims, int64_t index, const std::string& what, SizeRange range);
  // A size the architecture derives from `source` (a key, or where the metadata says it), bounded.
  int bounded(const std::string& what, const std::string& source, int64_t value, SizeRange range);
  // The file's name for `key`.
  std::string file_key(const std::string& key) const;
  // Refusal that names `key` as the file calls it: "tensor 'KEY' <problem>".
  CheckpointError error(const std::string& key, const std::string& problem) const;

  // The sizes read so far and the memory the family counts for them: what the loader judges
  // (check_arch_limits) before it builds the model.
  ArchEstimate estimate(const StagedMemory& memory) const;

 private:
  const Checkpoint& checkpoint_;
  std::string family_;
  std::map<std::string, std::string> file_keys_;
  std::vector<ArchDimension> dimensions_;
};

// FLatten's focused linear attention as its Swin, PVT v2 and CSwin blocks store it: `dwc.weight`
// [d, 1, k, k] (one kernel set shared by the heads, so d is the head width) and
// `positional_encoding` [1, N, C].
struct FocusedShapes {
  int dwc_kernel = 0, heads = 0;
  int encoding_tokens = 0;
};
// Reads them under `prefix` ("layers.0.blocks.1.attn.") for a block of width `dim`.
FocusedShapes read_focused_attention(ShapeReader& shapes, const std::string& prefix, int dim);

// The focusing factor a FLatten model's config says it was trained with (`focusing_factor`): in
// (0, 32] as --p, else refused naming it; a value other than the default 3 is noted with the --p
// that reproduces the model's outputs (focused blocks run the p setting). Returns it (3 if unsaid).
double read_trained_focusing_factor(const nlohmann::json& meta, std::vector<std::string>& notes);

// Agent Attention as agent_swin and agent_pvt store it: `an_bias`, `na_bias` [h, A, 7, 7], `ah_bias`
// [1, h, A, s, 1], `aw_bias` [1, h, A, 1, s], `ha_bias` [1, h, s, 1, A], `wa_bias` [1, h, 1, s, A] for
// the s x s grid it was trained on, and its depthwise conv on V `dwc` [C, 1, 3, 3]; every one there.
struct AgentShapes {
  int heads = 0, agents = 0, side = 0;
};
// agent_cswin's branches have no `dwc` (their LePE is CSwin's own): `depthwise_conv` false.
AgentShapes read_agent_attention(ShapeReader& shapes, const std::string& prefix, int dim, bool depthwise_conv = true);
// The authors' attn_type letters of a model whose successor blocks run `successor`: its own letter,
// then its softmax blocks' (Agent's "AB", InLine's "IS", FLatten's and PolaFormer's "LS").
const char* attn_type_letters(Kernel successor);
// Refuses a config whose per-stage agent count (`agents`, the authors' agent_num) differs from the
// weights' (`weights_agents`: per stage, 0 where it has no Agent block); `bias_key(s)` is the file's
// name of stage s's first an_bias.
void check_config_agent_counts(const nlohmann::json& meta, const std::vector<int>& weights_agents,
                               const std::function<std::string(size_t)>& bias_key);
// InLine's predictor of its local residual: `residual.0` Conv1d(C, C, 1, groups=h) and `residual.2`
// Conv1d(C, 9C, 1, groups=h); returns h.
int read_inline_residual(ShapeReader& shapes, const std::string& prefix, int dim);

}  // namespace attnscope
