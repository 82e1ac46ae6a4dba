// Loaded models kept by (path, --arch, device, --config), least recently used first out: the
// workbench's panels and the rows of a comparison figure may each name their own checkpoint, and
// switching between them should not reload a file that is still in use.
#pragma once

#include <list>
#include <memory>
#include <string>

#include "models/model_loader.h"

namespace attnscope {

class ModelCache {
 public:
  explicit ModelCache(size_t capacity = 6) : capacity_(capacity) {}

  // The model, loaded on first use (throws what load_model throws). The cache keeps the `capacity`
  // most recently used; a caller's pointer keeps its model alive beyond that.
  // `arch` and `config` are --arch and --config (models/arch_config.h).
  std::shared_ptr<LoadedModel> get(const std::string& path, const std::string& arch, const std::string& device,
                                   const std::string& config = "");
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

  static std::string key(const std::string& path, const std::string& arch, const std::string& device,
                         const std::string& config = "") {
    return path + "|" + arch + "|" + device + "|" + config;
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<LoadedModel> model;
  };
  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace attnscope
