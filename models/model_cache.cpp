#include "models/model_cache.h"

namespace attnscope {

std::shared_ptr<LoadedModel> ModelCache::get(const std::string& path, const std::string& arch,
                                             const std::string& device, const std::string& config) {
  const std::string wanted = key(path, arch, device, config);
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->key == wanted) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().model;
    }
  auto model =
      std::make_shared<LoadedModel>(load_model(path, ArchOverrides::parse(arch, config), resolve_device(device)));
  entries_.push_front({wanted, std::move(model)});
  while (entries_.size() > capacity_) entries_.pop_back();
  return entries_.front().model;
}

}  // namespace attnscope
