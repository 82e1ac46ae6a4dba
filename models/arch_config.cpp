#include "models/arch_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/excerpt.h"
#include "core/json_checked.h"
#include "core/yaml_checked.h"
#include "models/checkpoint_layouts.h"
#include "models/model_families.h"
#include "models/vit.h"

namespace attnscope {

namespace fs = std::filesystem;

const std::vector<ArchKey>& arch_keys() {
  static const std::vector<ArchKey> keys = [] {
    std::vector<ArchKey> all = {
        {"heads", "num_heads", "attention heads (per stage for hierarchical models)", ArchKey::Counts},
        {"img_size", "img_size", "the training input side", ArchKey::Count},
    };
    for (const BackboneFamily& family : backbone_families())
      for (const ArchKey& key : family.config_keys)
        if (std::none_of(all.begin(), all.end(),
                         [&](const ArchKey& known) { return std::string(known.key) == key.key; }))
          all.push_back(key);
    return all;
  }();
  return keys;
}

namespace {

const ArchKey* key_named(const std::string& name) {
  for (const ArchKey& key : arch_keys())
    if (name == key.key || (*key.authors && name == key.authors)) return &key;
  return nullptr;
}

std::string known_keys_text() {
  std::string text;
  for (const ArchKey& key : arch_keys()) text += (text.empty() ? "" : ", ") + std::string(key.key);
  return text;
}

std::string value_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return value.dump();
  std::string text;
  for (const auto& item : value) text += (text.empty() ? "" : "/") + value_text(item);
  return text;
}

// A value of `key` as attnscope reads it: img_size [s, s] is s; timm's window_size (7, 7) is 7.
nlohmann::json normalised(const ArchKey& key, nlohmann::json value, const std::string& source) {
  auto refuse = [&](const std::string& expected) {
    return CheckpointError(source + ": " + key.key + " " + excerpt(value.dump(), 80) + " is not " + expected);
  };
  // 1e9 and 4.0 are whole numbers as JSON and YAML write them: read as the integers they are, and
  // refused as out of range past int's (1e20 heads is no count).
  auto read_whole = [&](nlohmann::json& item) {
    if (!item.is_number_float() || item.get<double>() != std::floor(item.get<double>())) return;
    if (std::fabs(item.get<double>()) > double(std::numeric_limits<int>::max()))
      throw CheckpointError(source + ": " + key.key + " " + excerpt(item.dump(), 40) +
                            " is out of range for a count (at most " + std::to_string(std::numeric_limits<int>::max()) +
                            ")");
    item = int64_t(item.get<double>());
  };
  if (key.kind == ArchKey::Count || key.kind == ArchKey::Counts) {
    if (value.is_array())
      for (auto& item : value) read_whole(item);
    else
      read_whole(value);
  }
  const bool square_pair = value.is_array() && value.size() == 2 && value[0] == value[1];
  switch (key.kind) {
    case ArchKey::Count:
      if (square_pair) value = value[0];
      if (!value.is_number_integer() || value.get<int64_t>() < 1) throw refuse("a whole number from 1");
      return value;
    case ArchKey::Counts:
      if (value.is_number_integer() && value.get<int64_t>() >= 1) return value;
      if (value.is_string()) return value;  // "1-1-1-1": stage_counts reads it, knowing the stages
      if (value.is_array()) {               // 0 in a list: a stage without attention (CARE's strip-conv stages)
        for (const auto& item : value)
          if (!item.is_number_integer() || item.get<int64_t>() < 0)
            throw refuse("a whole number from 1 or a list of them");
        return value;
      }
      throw refuse("a whole number from 1 or a list of them");
    case ArchKey::Number:
      if (!value.is_number() || !std::isfinite(value.get<double>())) throw refuse("a number");
      return value;
    case ArchKey::Text:
      if (!value.is_string()) throw refuse("text");
      return value;
    case ArchKey::Flag:
      if (value.is_boolean()) return value;
      if (value.is_number_integer() && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1))
        return nlohmann::json(value.get<int64_t>() == 1);
      throw refuse("true or false");
  }
  return value;
}

// The keys of `args` (authors' names or attnscope's) as attnscope's; the rest listed in `ignored`.
nlohmann::json in_attnscope_keys(const nlohmann::json& args, const std::string& source,
                                 std::vector<std::string>* ignored) {
  nlohmann::json out = nlohmann::json::object();
  if (!args.is_object()) return out;
  for (const auto& [name, value] : args.items()) {
    // timm's window_size is one (h, w) for every stage, not a per-stage list.
    const bool square_pair = value.is_array() && value.size() == 2 && value[0] == value[1];
    if (const ArchKey* key = key_named(name))
      out[key->key] = normalised(*key, name == "window_size" && square_pair ? value[0] : value, source);
    else if (name == "family" || name == "architecture")
      out[name] = value;
    else if (ignored)
      ignored->push_back(name);
  }
  return out;
}

// One source's values laid over the values so far, noting where it replaces another's.
void lay_over(ArchConfig& config, const nlohmann::json& values, const std::string& source) {
  for (const auto& [key, value] : values.items()) {
    auto held = config.values.find(key);
    if (held != config.values.end() && *held != value && key != "architecture")
      config.notes.push_back(source + " gives " + key + " = " + value_text(value) + " over " + config.sources[key] +
                             "'s " + value_text(*held));
    config.values[key] = value;
    config.sources[key] = source;
  }
}

// ---- The authors' training yaml (FLatten's cfgs/*.yaml), read through the bounded reader.

const nlohmann::json* at_path(const nlohmann::json& root, std::initializer_list<const char*> path) {
  const nlohmann::json* node = &root;
  for (const char* name : path) {
    if (!node->is_object() || !node->contains(name)) return nullptr;
    node = &(*node)[name];
  }
  return node;
}

// FLatten's config (config.py, models/build.py): MODEL.TYPE picks the model and DATA.IMG_SIZE is
// the training input; where each family keeps its constructor's arguments (MODEL.LA.*, MODEL.SWIN.*)
// is the family's (BackboneFamily::yaml_keys).
nlohmann::json yaml_model_args(const nlohmann::json& yaml, std::string& architecture) {
  nlohmann::json args = nlohmann::json::object();
  if (const auto* type = at_path(yaml, {"MODEL", "TYPE"}); type && type->is_string())
    architecture = type->get<std::string>();
  if (const auto* value = at_path(yaml, {"DATA", "IMG_SIZE"})) args["img_size"] = *value;
  for (const BackboneFamily& family : backbone_families())
    for (const YamlArchKey& key : family.yaml_keys) {
      const nlohmann::json* node = &yaml;
      for (const char* name : key.path)
        node = node && node->is_object() && node->contains(name) ? &(*node)[name] : nullptr;
      if (node) args[key.argument] = *node;
    }
  return args;
}

nlohmann::json read_yaml(const fs::path& file) {
  try {
    return read_yaml_file(file.string(), file.string());
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string(e.what()) + ": fix it");
  }
}

bool is_yaml(const fs::path& file) { return file.extension() == ".yaml" || file.extension() == ".yml"; }

// An authors' config: model_args and the registered name, from a timm config.json or a yaml.
struct ConfigFile {
  nlohmann::json args = nlohmann::json::object();
  std::string architecture;
};

ConfigFile config_from_yaml(const nlohmann::json& yaml) {
  ConfigFile config;
  config.args = yaml_model_args(yaml, config.architecture);
  return config;
}

// A timm config.json (an object, as read_json_beside returns it).
ConfigFile config_from_json(const nlohmann::json& json, const fs::path& file) {
  ConfigFile config;
  if (json.contains("architecture") && json["architecture"].is_string())
    config.architecture = json["architecture"].get<std::string>();
  if (json.contains("model_args")) {
    if (!json["model_args"].is_object())
      throw CheckpointError(file.string() + ": model_args is not an object of keyword arguments");
    config.args = json["model_args"];
  }
  return config;
}

ConfigFile read_config_file(const fs::path& file) {
  if (is_yaml(file)) return config_from_yaml(read_yaml(file));
  return config_from_json(read_json_beside(file.parent_path(), file.filename().string()), file);
}

// The yaml beside the weights: FILE.yaml, else the only yaml in the folder; several without one
// named after the weights are not guessed between.
fs::path yaml_beside(const fs::path& weights, std::vector<std::string>& notes) {
  std::error_code error;
  for (const char* extension : {".yaml", ".yml"}) {
    fs::path named = weights;
    named.replace_extension(extension);
    if (fs::is_regular_file(named, error)) return named;
  }
  std::vector<fs::path> found;
  for (fs::directory_iterator it(weights.parent_path().empty() ? "." : weights.parent_path(), error), end;
       !error && it != end; it.increment(error))
    if (is_yaml(it->path()) && it->is_regular_file(error)) found.push_back(it->path());
  if (found.size() == 1) return found.front();
  if (found.size() > 1)
    notes.push_back(std::to_string(found.size()) +
                    " yaml files beside the weights and none named after them: none read (give one with --config)");
  return {};
}

// timm's config.json beside the weights: one that names an architecture or carries model_args
// (a Hugging Face config.json has neither and is read by the layout).
bool is_timm_config(const nlohmann::json& json) {
  return json.is_object() && (json.contains("architecture") || json.contains("model_args"));
}

}  // namespace

ArchOverrides ArchOverrides::parse(const std::string& arch, const std::string& config_file) {
  ArchOverrides overrides;
  overrides.config_file = config_file;
  std::stringstream stream(arch);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(
          "--arch expects key=value pairs (per-stage values split by '/', e.g. "
          "heads=1/2/5/8), got '" +
          excerpt(item) + "'");
    const std::string name = item.substr(0, eq), text = item.substr(eq + 1);
    const ArchKey* key = key_named(name);
    if (!key)
      throw std::invalid_argument("unknown --arch key '" + excerpt(name) + "' (known: " + known_keys_text() + ")");
    auto number = [&](const std::string& part) -> nlohmann::json {
      try {
        size_t used = 0;
        if (key->kind == ArchKey::Number) {
          const double value = std::stod(part, &used);
          if (used == part.size()) return value;
        } else {
          const long long value = std::stoll(part, &used);
          if (used == part.size()) return value;
        }
      } catch (const std::exception&) {
      }
      throw std::invalid_argument("--arch " + excerpt(name + "=" + text) + " is not " +
                                  (key->kind == ArchKey::Number ? "a number" : "a whole number or a list a/b/c"));
    };
    nlohmann::json value;
    if (key->kind == ArchKey::Text) {
      value = text;
    } else if (key->kind == ArchKey::Flag) {
      if (text != "true" && text != "false" && text != "1" && text != "0")
        throw std::invalid_argument("--arch " + excerpt(name + "=" + text) + " is not true or false (1 or 0)");
      value = text == "true" || text == "1";
    } else if (key->kind == ArchKey::Counts && text.find('/') != std::string::npos) {
      value = nlohmann::json::array();
      for (size_t begin = 0;;) {  // every piece, the empty ones too ("7/" is refused)
        const size_t slash = text.find('/', begin);
        value.push_back(number(text.substr(begin, slash - begin)));
        if (slash == std::string::npos) break;
        begin = slash + 1;
      }
    } else {
      value = number(text);
    }
    if (key->kind != ArchKey::Text && key->kind != ArchKey::Flag)
      for (const auto& one : value.is_array() ? value : nlohmann::json::array({value}))
        if (key->kind != ArchKey::Number && (one.get<int64_t>() < 1 || one.get<int64_t>() > 4096))
          throw std::invalid_argument(std::string("--arch ") + key->key + " must be from 1 to 4096");
    if (std::string(key->key) == "eps" && !(value.get<double>() > 0 && value.get<double>() < 1))
      throw std::invalid_argument("--arch eps must be a number from 0 (exclusive) to 1, e.g. 1e-6");
    if (std::string(key->key) == "act") parse_mlp_activation(text);  // throws naming the ones it runs
    if (overrides.values.contains(key->key))                         // heads=3,heads=4: which was meant is not guessed
      throw std::invalid_argument(std::string("--arch gives ") + key->key + " twice: give it once");
    overrides.values[key->key] = value;
  }
  return overrides;
}

std::string where_to_give(const std::string& key) {
  const ArchKey* entry = key_named(key);
  const std::string authors = entry && *entry->authors ? entry->authors : key;
  const std::string example = entry && entry->kind == ArchKey::Counts ? key + "=a/b/c/d (one per stage)" : key + "=...";
  return "config.json model_args " + authors + ", --config FILE or --arch " + example;
}

std::string ArchAssumption::describe() const {
  return key + " = " + value_text(value) + " (" + why + "); give it with " + where_to_give(key);
}

nlohmann::json ArchAssumption::to_json() const {
  return {{"key", key}, {"value", value}, {"why", why}, {"how", "give it with " + where_to_give(key)}};
}

nlohmann::json assumed_json(const std::vector<ArchAssumption>& assumed) {
  nlohmann::json list = nlohmann::json::array();
  for (const ArchAssumption& one : assumed) list.push_back(one.to_json());
  return list;
}

CheckpointError unfit_default_error(const std::string& problem, const std::string& key) {
  return CheckpointError(problem + ": give " + key + " with " + where_to_give(key));
}

const ReleasedArch* find_released(const std::string& name, const BackboneFamily** family) {
  for (const BackboneFamily& candidate : backbone_families())
    for (const ReleasedArch& released : candidate.released)
      if (name == released.name) {
        if (family) *family = &candidate;
        return &released;
      }
  return nullptr;
}

ArchConfig gather_arch_config(const BackboneFamily& family, const Checkpoint& checkpoint,
                              const std::string& weights_file, const ArchOverrides& overrides) {
  ArchConfig config;
  const fs::path weights(weights_file);
  std::error_code error;

  // Every source, read first, so the registered name can come from the highest one that gives it.
  ConfigFile given;
  if (!overrides.config_file.empty()) {
    if (!fs::exists(overrides.config_file, error))
      throw CheckpointError("--config " + excerpt(overrides.config_file) + ": no such file");
    if (!fs::is_regular_file(overrides.config_file, error))
      throw CheckpointError("--config " + excerpt(overrides.config_file) +
                            " is not a regular file (a folder, pipe or device): give a .yaml or .json config");
    given = read_config_file(overrides.config_file);
    config.notes.push_back("read --config " + overrides.config_file);
  }
  nlohmann::json own = architecture_metadata(checkpoint, weights_file);
  ConfigFile hub;
  if (const nlohmann::json json = read_json_beside(weights.parent_path(), "config.json"); is_timm_config(json)) {
    hub = config_from_json(json, weights.parent_path() / "config.json");
    config.notes.push_back("read config.json beside the weights");
  }
  // open_clip's timm trunks name their timm model and pooling in open_clip_config.json.
  ConfigFile open_clip;
  if (const nlohmann::json json = read_json_beside(weights.parent_path(), "open_clip_config.json"); json.is_object()) {
    const nlohmann::json* vision = at_path(json, {"model_cfg", "vision_cfg"});
    if (vision && vision->is_object() && vision->contains("timm_model_name") &&
        (*vision)["timm_model_name"].is_string()) {
      open_clip.architecture = (*vision)["timm_model_name"].get<std::string>();
      if (vision->contains("timm_pool") && (*vision)["timm_pool"].is_string() &&
          !(*vision)["timm_pool"].get<std::string>().empty())
        open_clip.args["global_pool"] = (*vision)["timm_pool"];
      config.notes.push_back("read open_clip_config.json beside the weights: timm_model_name " +
                             excerpt(open_clip.architecture));
    }
  }
  // A yaml beside the weights may be anything (a conda environment): read as a training config only
  // when it has a MODEL section, and one that cannot be parsed is said, not fatal (--config is).
  ConfigFile yaml;
  if (const fs::path file = yaml_beside(weights, config.notes); !file.empty()) {
    try {
      const nlohmann::json parsed = read_yaml(file);
      if (parsed.is_object() && parsed.contains("MODEL")) {
        yaml = config_from_yaml(parsed);
        config.notes.push_back("read " + file.filename().string() + " beside the weights");
      } else {
        config.notes.push_back(file.filename().string() +
                               " beside the weights has no MODEL section: not a training config, not read");
      }
    } catch (const CheckpointError& e) {
      config.notes.push_back(std::string(e.what()) + " (not read)");
    }
  }

  for (const std::string* name : {&given.architecture, &hub.architecture, &yaml.architecture, &open_clip.architecture})
    if (config.architecture.empty() && !name->empty()) config.architecture = *name;
  if (own.is_object() && own.contains("architecture") && own["architecture"].is_string() && config.architecture.empty())
    config.architecture = own["architecture"].get<std::string>();

  std::vector<std::string> ignored;
  nlohmann::json registered_args;
  if (!config.architecture.empty()) {
    const BackboneFamily* owner = nullptr;
    if (const ReleasedArch* released = find_released(config.architecture, &owner)) {
      if (owner != &family)
        throw CheckpointError("the config names architecture '" + excerpt(config.architecture) + "', a " + owner->runs +
                              " model, but the weights are " + family.runs + "'s: the config belongs to another file");
      nlohmann::json registered = nlohmann::json::parse(released->model_args);
      lay_over(config, in_attnscope_keys(registered, "", nullptr), "the released " + config.architecture);
      // timm's create_model(name, **model_args): the config's arguments replace the name's.
      for (const nlohmann::json* args : {&open_clip.args, &yaml.args, &hub.args, &given.args})
        if (args->is_object()) registered.update(*args);
      registered_args = registered;
    } else {
      config.notes.push_back("architecture '" + excerpt(config.architecture) +
                             "' is not in attnscope's table of released models: the keys and the configs decide");
    }
  }
  lay_over(config, in_attnscope_keys(open_clip.args, "open_clip_config.json", nullptr), "open_clip_config.json");
  lay_over(config, in_attnscope_keys(yaml.args, "the yaml beside the weights", &ignored),
           "the yaml beside the weights");
  lay_over(config, in_attnscope_keys(hub.args, "config.json model_args", &ignored), "config.json model_args");
  lay_over(config, in_attnscope_keys(own, "the file's arch metadata", nullptr), "the file's arch metadata");
  lay_over(config, in_attnscope_keys(given.args, "--config", &ignored), "--config");
  lay_over(config, overrides.values, "--arch");
  if (!registered_args.is_null()) {
    config.values["registered_args"] = registered_args;
    config.values["architecture"] = config.architecture;
  }
  if (!ignored.empty()) {
    std::sort(ignored.begin(), ignored.end());
    ignored.erase(std::unique(ignored.begin(), ignored.end()), ignored.end());
    std::string list;
    for (const auto& name : ignored) list += (list.empty() ? "" : ", ") + excerpt(name, 40);
    config.notes.push_back("config arguments the keys show or that do not change the forward pass: " + list);
  }
  return config;
}

std::vector<int> stage_counts(const nlohmann::json& values, const std::string& key, size_t stages) {
  if (!values.is_object() || !values.contains(key)) return {};
  const nlohmann::json& value = values.at(key);
  std::vector<int> out;
  auto refuse = [&] {
    return CheckpointError("arch " + key + " " + excerpt(value.dump(), 80) +
                           " is not a whole number from 1, a list of them or a string like 1-1-1-1");
  };
  if (value.is_number_integer()) {
    out.assign(stages, value.get<int>());
  } else if (value.is_array()) {
    for (const auto& item : value) {
      if (!item.is_number_integer()) throw refuse();
      out.push_back(item.get<int>());
    }
  } else if (value.is_string()) {
    std::string text = value.get<std::string>();
    std::replace(text.begin(), text.end(), '/', '-');
    if (text.empty() || text.back() == '-') throw refuse();  // getline drops a last empty part
    std::stringstream parts(text);
    std::string part;
    while (std::getline(parts, part, '-')) {
      if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) throw refuse();
      out.push_back(std::stoi(part));
    }
  } else {
    throw refuse();
  }
  for (int v : out)  // 0 passes: each family bounds what it reads, naming the key
    if (v < 0) throw refuse();
  if (out.size() != stages)
    throw CheckpointError("arch " + key + " " + excerpt(value.dump(), 80) + " gives " + std::to_string(out.size()) +
                          " stage(s), the weights have " + std::to_string(stages));
  return out;
}

}  // namespace attnscope
