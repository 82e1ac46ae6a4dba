// The attribution methods by one name table: the CAM family (read at a hook point), attention
// relevance and gradient rollout, attention rollout and a layer's attention (read through attention
// layers), and integrated gradients (read at the input). Options, sessions, summaries and the GUI's
// combo all read the table; CamMethod (analysis/cam_methods.h) is the CAM family within it.
#pragma once

#include <string>
#include <vector>

#include "core/enum_names.h"

namespace attnscope {

enum class AttributionMethod {
  GradCam,
  GradCamPlusPlus,
  XGradCam,
  LayerCam,
  EigenCam,
  HiResCam,
  ScoreCam,
  Relevance,
  GradRollout,
  Rollout,
  Attention,
  IntegratedGradients,
};
template <>
struct EnumTable<AttributionMethod> {
  static const std::vector<EnumEntry<AttributionMethod>>& entries();  // name: gradcam, ...; label: Grad-CAM, ...
};
inline std::string to_string(AttributionMethod method) { return enum_name(method); }
// The name papers use ("Grad-CAM", "attention relevance (Chefer et al.)"), for messages and summaries.
inline std::string method_title(AttributionMethod method) { return enum_label(method); }

// The CAM family: maps read at a hook point (--gradcam-layer).
bool reads_hook_point(AttributionMethod method);
// Relevance, gradient rollout, rollout and attention: maps read through attention layers.
bool reads_attention_layer(AttributionMethod method);

// "a,b,c" (or "all") -> methods, each checked, without repeats; throws std::invalid_argument naming
// `option` and listing the methods.
std::vector<AttributionMethod> parse_method_list(const std::string& text, const std::string& option = "--methods");
// The list as the option writes it: "gradcam,rollout".
std::string to_string(const std::vector<AttributionMethod>& methods);

}  // namespace attnscope
