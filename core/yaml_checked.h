// YAML from files attnscope does not control (the authors' training configs beside the weights,
// --config): read into JSON under bounds fixed before anything is built. yaml-cpp's own tree
// shares an aliased node, but everything that walks it expands each alias again, so ten levels of
// aliases in 600 bytes (a "billion laughs" file) become 10^10 values; here each alias is paid for
// as the values it copies, and the file is refused once the total passes the bound.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace attnscope {

// What one YAML document may expand to: values (maps, lists, scalars, every alias counted as the
// values it repeats) and the bytes of their text. A training config has a few hundred values.
constexpr size_t kMaxYamlValues = 100'000;
constexpr size_t kMaxYamlTextBytes = size_t(8) << 20;

// Parses the first document of `text` (UTF-8); throws std::invalid_argument naming `what`. Plain scalars
// that read as whole numbers, numbers or booleans become them; quoted ones stay text. Nesting is
// bounded by kMaxJsonDepth and a key given twice in one map is an error, as for JSON.
nlohmann::json parse_yaml_checked(const std::string& text, const std::string& what);

// Reads a regular file of at most `max_bytes` and parses it as above; throws std::invalid_argument.
nlohmann::json read_yaml_file(const std::string& path, const std::string& what, size_t max_bytes = size_t(1) << 20);

}  // namespace attnscope
