#include "models/model_families.h"

#include <filesystem>

#include "core/json_checked.h"

namespace attnscope {

// The registry: one line a family. FAMILY(swin) declares `const BackboneFamily& swin_family()`,
// defined beside the family's checkpoint reader (models/swin_checkpoint.cpp), and lists it. ViT,
// whose keys are the loosest, comes last.
#define ATTNSCOPE_BACKBONE_FAMILIES(FAMILY) \
  FAMILY(swin)                              \
  FAMILY(pvt_v1)                            \
  FAMILY(pvt)                               \
  FAMILY(cswin)                             \
  FAMILY(l2vit)                             \
  FAMILY(care)                              \
  FAMILY(mlla)                              \
  FAMILY(vit)

#define ATTNSCOPE_DECLARE_FAMILY(name) const BackboneFamily& name##_family();
ATTNSCOPE_BACKBONE_FAMILIES(ATTNSCOPE_DECLARE_FAMILY)
#undef ATTNSCOPE_DECLARE_FAMILY

const std::vector<BackboneFamily>& backbone_families() {
#define ATTNSCOPE_LIST_FAMILY(name) name##_family(),
  static const std::vector<BackboneFamily> families = {ATTNSCOPE_BACKBONE_FAMILIES(ATTNSCOPE_LIST_FAMILY)};
#undef ATTNSCOPE_LIST_FAMILY
  return families;
}

namespace {

bool has_key_prefix(const Checkpoint& checkpoint, const std::string& prefix) {
  auto it = checkpoint.tensors.lower_bound(prefix);
  return it != checkpoint.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

// "A, B and C" of every family's `runs`.
std::string families_attnscope_runs() {
  const auto& families = backbone_families();
  std::string text;
  for (size_t i = 0; i < families.size(); ++i)
    text += (i == 0 ? "" : i + 1 == families.size() ? " and " : ", ") + families[i].runs;
  return text;
}

// Files of families attnscope recognises but cannot run yet: a refusal that names them.
void refuse_known_unsupported(const Checkpoint& checkpoint) {
  if (has_key_prefix(checkpoint, "dist_head.") && has_key_prefix(checkpoint, "network."))
    throw CheckpointError(
        "unsupported model: a model with network.* and dist_head.* keys is not supported (CARE files, which "
        "attnscope runs, have stem.*, stages.S.blocks.B.* and dist_head.*). attnscope runs " +
        families_attnscope_runs() + " natively; export anything else with scripts/export_torchscript.py");
}

}  // namespace

std::shared_ptr<Backbone> InferredBackbone::build() const {
  check_arch_limits(estimate_);
  return make_();
}

const BackboneFamily& family_for(const Checkpoint& checkpoint) {
  refuse_known_unsupported(checkpoint);
  for (const BackboneFamily& family : backbone_families())
    if (family.recognises(checkpoint)) return family;
  throw std::logic_error("no backbone family takes the checkpoint: the last one (ViT) must take any");
}

nlohmann::json architecture_metadata(const Checkpoint& checkpoint, const std::string& weights_file) {
  auto entry = checkpoint.metadata.find("attnscope_arch");
  if (entry != checkpoint.metadata.end()) {
    try {
      return parse_json_checked(entry->second, "metadata attnscope_arch");
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(std::string(e.what()) + ": fix or remove the metadata");
    }
  }
  const std::string sidecar = weights_file + ".arch.json";
  std::error_code error;
  if (!std::filesystem::exists(sidecar, error)) return nullptr;
  try {
    auto parsed = read_json_file(sidecar, sidecar, size_t(1) << 20);
    if (!parsed.is_object()) throw std::invalid_argument(sidecar + " is not a JSON object");
    return parsed;
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string(e.what()) + ": fix or remove it");
  }
}

}  // namespace attnscope
