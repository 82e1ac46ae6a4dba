// JSON from files attnscope does not control (sessions, safetensors headers, Hugging Face configs,
// TorchScript metadata): nesting is bounded, so no deep file can exhaust the stack of code that
// walks or prints it, and a duplicate key is an error instead of nlohmann's silent last-copy-wins.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace attnscope {

constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws std::invalid_argument naming `what` (e.g. "session file a.json").
nlohmann::json parse_json_checked(const std::string& text, const std::string& what);

// Reads a regular file of at most `max_bytes` and parses it as above; throws std::invalid_argument.
nlohmann::json read_json_file(const std::string& path, const std::string& what, size_t max_bytes = size_t(64) << 20);

// JSON as attnscope writes its files and reports, indented by 2: a string that is not UTF-8 (a
// path's bytes) is written with U+FFFD for its bad bytes instead of failing the whole write (a
// summary naming a non-UTF-8 input path was refused with nlohmann's raw type error).
std::string json_text(const nlohmann::json& json);

}  // namespace attnscope
