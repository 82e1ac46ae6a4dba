// A checkpoint split into safetensors shards by an index (model.safetensors.index.json, as
// transformers' and timm's save_pretrained write it): every shard it names is checked before any
// is read, then read in turn and merged into one name -> tensor map.
#include <filesystem>
#include <set>

#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "core/json_checked.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxShards = 4096;
constexpr size_t kMaxIndexBytes = size_t(64) << 20;

// A shard is a plain file name beside the index: no folder part, nothing that climbs out.
bool plain_shard_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

bool is_shard_index(const std::string& path) {
  const std::string suffix = ".safetensors.index.json";
  return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

Checkpoint read_shards(const std::string& index_path, bool shapes_only) {
  nlohmann::json index;
  try {
    index = read_json_file(index_path, "the shard index " + index_path, kMaxIndexBytes);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string(e.what()) + ": fix or remove it");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw CheckpointError(index_path + ": a shard index has a weight_map object (tensor name -> shard file)");
  const fs::path folder = fs::path(index_path).parent_path();
  std::map<std::string, std::set<std::string>> names_by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || !plain_shard_name(shard.get<std::string>()))
      throw CheckpointError(index_path + ": tensor '" + excerpt(name) + "' is in shard " + excerpt(shard.dump(), 80) +
                            ", not a file name beside the index (shards outside the folder are refused)");
    names_by_shard[shard.get<std::string>()].insert(name);
    if (names_by_shard.size() > kMaxShards)
      throw CheckpointError(index_path + ": more than " + std::to_string(kMaxShards) + " shards");
  }
  if (names_by_shard.empty()) throw CheckpointError(index_path + ": the weight_map names no tensor");
  std::error_code error;
  for (const auto& [shard, names] : names_by_shard)
    if (!fs::is_regular_file(folder / shard, error))
      throw CheckpointError(index_path + ": its shard " + excerpt(shard) + " (" + std::to_string(names.size()) +
                            " tensors) is missing beside it: the download is incomplete");
  Checkpoint merged;
  merged.format = "safetensors (" + std::to_string(names_by_shard.size()) + " shards)";
  for (const auto& [shard, names] : names_by_shard) {
    const std::string path = (folder / shard).string();
    Checkpoint part = shapes_only ? read_safetensors_shapes(path) : load_safetensors(path);
    for (const std::string& name : names) {
      auto it = part.tensors.find(name);
      if (it == part.tensors.end())
        throw CheckpointError(index_path + ": tensor '" + excerpt(name) + "' is not in its shard " + excerpt(shard) +
                              ": the index and the shards disagree");
      merged.tensors[name] = it->second;
    }
    if (merged.metadata.empty()) merged.metadata = part.metadata;
  }
  return merged;
}

}  // namespace

Checkpoint load_sharded_safetensors(const std::string& index_path) { return read_shards(index_path, false); }

Checkpoint read_sharded_safetensors_shapes(const std::string& index_path) { return read_shards(index_path, true); }

}  // namespace attnscope
