// How attention rollout fuses a layer's heads into one matrix. Kept free of torch so that the
// shared option registry (session/app_state) can name it.
#pragma once

#include "core/enum_names.h"

#include <string>

namespace attnscope {

enum class HeadFusion { Mean, Max, Min };
template <>
struct EnumTable<HeadFusion> {
  static const std::vector<EnumEntry<HeadFusion>>& entries();
};

HeadFusion parse_head_fusion(const std::string& name);  // throws std::invalid_argument
std::string to_string(HeadFusion fusion);

}  // namespace attnscope
