#include "session/session_history.h"

namespace attnscope {

void SessionHistory::record(const nlohmann::json& session) {
  if (!steps_.empty() && steps_[position_] == session) return;
  if (!steps_.empty()) steps_.erase(steps_.begin() + std::ptrdiff_t(position_) + 1, steps_.end());
  steps_.push_back(session);
  if (steps_.size() > kSteps) steps_.pop_front();
  position_ = steps_.size() - 1;
}

std::optional<nlohmann::json> SessionHistory::undo() {
  if (!can_undo()) return std::nullopt;
  return steps_[--position_];
}

std::optional<nlohmann::json> SessionHistory::redo() {
  if (!can_redo()) return std::nullopt;
  return steps_[++position_];
}

}  // namespace attnscope
