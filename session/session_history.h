// Undo and redo for the workbench: a history of whole sessions (the session file's JSON), so that
// every interaction the session holds (query, knobs, ablations, prompts, model, panels) is one step
// back, without each control knowing about undo.
#pragma once

#include <cstddef>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>

namespace attnscope {

class SessionHistory {
 public:
  // Remembers `session` as the newest step when it differs from the current one; a step taken after
  // an undo drops the steps that were undone. Keeps the last `kSteps`.
  void record(const nlohmann::json& session);
  // The session one step back (forward), now current; nothing at the oldest (newest) step.
  std::optional<nlohmann::json> undo();
  std::optional<nlohmann::json> redo();
  bool can_undo() const { return position_ > 0; }
  bool can_redo() const { return position_ + 1 < steps_.size(); }

  static constexpr size_t kSteps = 200;

 private:
  std::deque<nlohmann::json> steps_;
  size_t position_ = 0;  // the current step's index in steps_
};

}  // namespace attnscope
