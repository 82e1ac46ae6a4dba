#include "core/json_checked.h"

#include "core/excerpt.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace attnscope {

nlohmann::json parse_json_checked(const std::string& text, const std::string& what) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  std::string problem;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (!problem.empty()) return false;
    if (depth > kMaxJsonDepth) {
      problem = "nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      problem = "has the key '" + excerpt(parsed.get<std::string>()) + "' twice in one object";
    return problem.empty();
  };
  json parsed = json::parse(text, check, /*allow_exceptions=*/false);
  if (!problem.empty()) throw std::invalid_argument(what + " " + problem);
  if (parsed.is_discarded()) throw std::invalid_argument(what + " is not valid JSON");
  return parsed;
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, size_t max_bytes) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) throw std::invalid_argument("cannot read " + what + ": no such file");
  if (std::filesystem::is_directory(status)) throw std::invalid_argument(what + " is a folder, not a JSON file");
  if (!std::filesystem::is_regular_file(status))
    throw std::invalid_argument(what + " is not a regular file (a pipe, socket or device)");
  if (std::filesystem::file_size(path, error) > max_bytes)
    throw std::invalid_argument(what + " is larger than " + std::to_string(max_bytes >> 20) + " MB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read " + what);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_checked(text.str(), what);
}

std::string json_text(const nlohmann::json& json) {
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace attnscope
