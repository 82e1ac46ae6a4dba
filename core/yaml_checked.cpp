#include "core/yaml_checked.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/excerpt.h"
#include "core/json_checked.h"
#include "core/unicode_text.h"

namespace attnscope {

namespace {

// A plain (unquoted) scalar as YAML's core schema reads it where it can: a whole number, a number,
// a boolean; otherwise its text.
nlohmann::json plain_scalar(const std::string& text) {
  try {
    size_t used = 0;
    const long long whole = std::stoll(text, &used);
    if (used == text.size()) return whole;
  } catch (const std::exception&) {
  }
  try {
    size_t used = 0;
    const double number = std::stod(text, &used);
    if (used == text.size()) return number;
  } catch (const std::exception&) {
  }
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  return text;
}

// Builds the JSON from the parser's events, one value at a time, paying for every value before it
// is made: an alias costs the values and text of what it repeats, so the bound holds before any
// expansion is allocated.
class BoundedJsonBuilder : public YAML::EventHandler {
 public:
  explicit BoundedJsonBuilder(const std::string& what) : what_(what) {}

  nlohmann::json take() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override {
    pay(1, 0);
    finish(nullptr, {1, 0}, std::nullopt, anchor);
  }

  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    const auto found = anchors_.find(anchor);
    if (found == anchors_.end()) throw std::invalid_argument(what_ + " has an alias to an unknown anchor");
    const Anchored& anchored = found->second;
    pay(anchored.cost.values, anchored.cost.bytes);
    finish(anchored.value, anchored.cost, anchored.key_text, YAML::NullAnchor);
  }

  void OnScalar(const YAML::Mark&, const std::string& tag, YAML::anchor_t anchor, const std::string& value) override {
    pay(1, value.size());
    // yaml-cpp tags a quoted scalar "!": it stays text.
    finish(tag == "!" ? nlohmann::json(value) : plain_scalar(value), {1, value.size()}, value, anchor);
  }

  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(nlohmann::json::array(), anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(nlohmann::json::object(), anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Cost {
    size_t values = 0, bytes = 0;
  };
  struct Open {
    nlohmann::json value;
    YAML::anchor_t anchor;
    Cost cost;
    std::optional<std::string> key;  // a map's key waiting for its value
  };
  struct Anchored {
    nlohmann::json value;
    Cost cost;
    std::optional<std::string> key_text;  // a scalar's text, should it be used as a key
  };

  void pay(size_t values, size_t bytes) {
    spent_.values += values;
    spent_.bytes += bytes;
    if (spent_.values > kMaxYamlValues || spent_.bytes > kMaxYamlTextBytes)
      throw std::invalid_argument(what_ + " expands to more than " + std::to_string(kMaxYamlValues) + " values or " +
                                  std::to_string(kMaxYamlTextBytes >> 20) +
                                  " MB of text (aliases that repeat aliases, as a \"billion laughs\" file does): "
                                  "not a config attnscope reads");
  }

  void open(nlohmann::json value, YAML::anchor_t anchor) {
    if (stack_.size() >= size_t(kMaxJsonDepth))
      throw std::invalid_argument(what_ + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    pay(1, 0);
    stack_.push_back({std::move(value), anchor, {1, 0}, std::nullopt});
  }

  void close() {
    Open done = std::move(stack_.back());
    stack_.pop_back();
    finish(std::move(done.value), done.cost, std::nullopt, done.anchor);
  }

  // A complete value: remembered under its anchor, then placed in what is open (or as the root).
  void finish(nlohmann::json value, Cost cost, std::optional<std::string> key_text, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) {
      pay(cost.values, cost.bytes);  // the anchor's own copy
      anchors_[anchor] = {value, cost, key_text};
    }
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Open& parent = stack_.back();
    parent.cost.values += cost.values;
    parent.cost.bytes += cost.bytes;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(value));
    } else if (!parent.key) {
      if (!key_text) throw std::invalid_argument(what_ + " has a map key that is not plain text");
      if (parent.value.contains(*key_text))
        throw std::invalid_argument(what_ + " has the key '" + excerpt(*key_text) + "' twice in one map");
      parent.key = std::move(key_text);
    } else {
      parent.value[*parent.key] = std::move(value);
      parent.key.reset();
    }
  }

  std::string what_;
  nlohmann::json root_;
  std::vector<Open> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  Cost spent_;
};

}  // namespace

nlohmann::json parse_yaml_checked(const std::string& text, const std::string& what) {
  // YAML is Unicode text; bytes that are not UTF-8 would reach every message and JSON dump of a value.
  size_t bad_byte = 0;
  if (!decode_utf8(text, &bad_byte))
    throw std::invalid_argument(what + " is not UTF-8 text (byte " + std::to_string(bad_byte) + ")");
  std::istringstream stream(text);
  BoundedJsonBuilder builder(what);
  try {
    YAML::Parser parser(stream);
    parser.HandleNextDocument(builder);
  } catch (const YAML::Exception& e) {
    // The parser's own words and place, without its "yaml-cpp: error at" prefix. A flow left open
    // ("[2, 4") is found where the text ends: said so.
    std::string where = "line " + std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1);
    if (e.msg.find("not found") != std::string::npos) where += " (where the parser looked for it)";
    throw std::invalid_argument(what + " is not valid YAML: " + excerpt(e.msg, 200) + " at " + where);
  }
  return builder.take();
}

nlohmann::json read_yaml_file(const std::string& path, const std::string& what, size_t max_bytes) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) throw std::invalid_argument("cannot read " + what + ": no such file");
  if (std::filesystem::is_directory(status)) throw std::invalid_argument(what + " is a folder, not a YAML file");
  if (!std::filesystem::is_regular_file(status))
    throw std::invalid_argument(what + " is not a regular file (a pipe, socket or device)");
  if (std::filesystem::file_size(path, error) > max_bytes)
    throw std::invalid_argument(what + " is larger than " + std::to_string(max_bytes >> 20) +
                                " MB: not a training config");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read " + what);
  std::stringstream text;
  text << in.rdbuf();
  return parse_yaml_checked(text.str(), what);
}

}  // namespace attnscope
