// What analyses and ablated forwards keep between runs of the worker (and of one command), under
// keys of everything they depend on. No GL, ImGui or OpenCV: the engine-only build's `run` uses it.
#pragma once

#include <map>
#include <memory>
#include <string>

namespace attnscope {

// Re-use between runs of the worker: an analysis keeps what it computed under a key of
// everything it depends on, and a run that only changed the selection gets it back.
class AnalysisCache {
 public:
  template <typename T>
  std::shared_ptr<const T> get(const std::string& key) const {
    const auto found = entries_.find(key);
    return found == entries_.end() ? nullptr : std::static_pointer_cast<const T>(found->second);
  }
  void put(const std::string& key, std::shared_ptr<const void> value) {
    if (entries_.size() >= 64) entries_.clear();  // bounded: views of many settings are cheap to redo
    entries_[key] = std::move(value);
  }

 private:
  std::map<std::string, std::shared_ptr<const void>> entries_;
};

}  // namespace attnscope
