#include "models/model_families.h"

#include <algorithm>
#include <filesystem>

#include "core/json_checked.h"
#include "models/l2vit_checkpoint.h"
#include "models/pvt_checkpoint.h"
#include "models/swin_checkpoint.h"

namespace attnscope {

namespace {

bool has_prefix(const Checkpoint& checkpoint, const std::string& prefix) {
  auto it = checkpoint.tensors.lower_bound(prefix);
  return it != checkpoint.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

struct Family {
  const char* name;
  bool (*recognises)(const Checkpoint&);
  std::shared_ptr<Backbone> (*build)(Checkpoint&, const nlohmann::json&, std::vector<std::string>&);
};

std::shared_ptr<Backbone> build_swin(Checkpoint& checkpoint, const nlohmann::json& meta,
                                     std::vector<std::string>& notes) {
  const std::string layout = adopt_swin_layout(checkpoint);
  if (layout != "timm") notes.push_back("Microsoft/FLatten Swin layout, renamed to timm's keys");
  return std::make_shared<SwinTransformerImpl>(infer_swin_arch(checkpoint, meta, layout, notes));
}

std::shared_ptr<Backbone> build_pvt(Checkpoint& checkpoint, const nlohmann::json& meta,
                                    std::vector<std::string>& notes) {
  const std::string layout = adopt_pvt_layout(checkpoint);
  if (layout != "timm") notes.push_back("original PVT v2 layout (whai362 / FLatten), renamed to timm's keys");
  return std::make_shared<PyramidVisionTransformerImpl>(infer_pvt_arch(checkpoint, meta, layout, notes));
}

std::shared_ptr<Backbone> build_l2vit(Checkpoint& checkpoint, const nlohmann::json& meta,
                                      std::vector<std::string>& notes) {
  return std::make_shared<L2ViTImpl>(infer_l2vit_arch(checkpoint, meta, notes));
}

const std::vector<Family>& families() {
  static const std::vector<Family> list = {
      {"swin", looks_like_swin, build_swin},
      {"pvt-v2", looks_like_pvt, build_pvt},
      {"l2vit", looks_like_l2vit, build_l2vit},
  };
  return list;
}

// Families whose files attnscope recognises but cannot run yet: a refusal that names them.
void refuse_known_unsupported(const Checkpoint& checkpoint) {
  auto refuse = [](const std::string& what) {
    throw CheckpointError("unsupported model: " + what +
                          ". attnscope runs ViT/DeiT (timm, Hugging Face, CLIP, DINOv2), Swin, FLatten-Swin, PVT v2 "
                          "and FLatten-PVT v2 natively; export anything else with scripts/export_torchscript.py");
  };
  if (has_prefix(checkpoint, "stage1_conv_embed.")) refuse("FLatten-CSwin (stage1_conv_embed.*) is not supported yet");
  if (has_prefix(checkpoint, "dist_head.") && has_prefix(checkpoint, "network."))
    refuse("a CARE model (network.*, dist_head.*) is not supported yet");
}

}  // namespace

std::string preferred_container(const Checkpoint& checkpoint) {
  if (!looks_like_l2vit(checkpoint)) return "";
  for (const std::string& key : l2vit_container_preference())
    if (std::find(checkpoint.containers.begin(), checkpoint.containers.end(), key) != checkpoint.containers.end())
      return key;
  return "";
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

std::shared_ptr<Backbone> build_family_backbone(Checkpoint& checkpoint, const nlohmann::json& meta,
                                                std::vector<std::string>& notes) {
  for (const Family& family : families())
    if (family.recognises(checkpoint)) return family.build(checkpoint, meta, notes);
  refuse_known_unsupported(checkpoint);
  return nullptr;
}

}  // namespace attnscope
