// What the model caches on this machine hold (`attnscope models`, as `hf cache scan` lists them):
// every Hugging Face cache repo with its refs, snapshots and size, torch.hub's checkpoints, and for
// each whether attnscope opens it and as what, judged from safetensors headers and configs alone
// (no weights are read).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnscope {

struct CachedModel {
  std::string name;                         // what --model takes: hf-hub:ORG/NAME, or the torch.hub file name
  std::string kind;                         // "hf-hub" or "torch-hub"
  std::string path;                         // the repo folder or the file
  std::map<std::string, std::string> refs;  // ref -> commit
  std::vector<std::string> snapshots;       // commits with a snapshot
  std::uintmax_t bytes = 0;                 // on disk (blobs, or the snapshot's files when copied)
  std::string opens;                        // "vit (hf-dinov3), 21.6 M parameters"; empty when not judged or refused
  std::string why_not;                      // the refusal, or why it was not judged from headers alone
  nlohmann::json to_json() const;
};

// Every repo and checkpoint of the caches (models/model_source.h's roots), at most `limit` repos
// (the rest counted in `left_out`), sorted by name.
std::vector<CachedModel> scan_model_caches(size_t limit, size_t* left_out = nullptr);

}  // namespace attnscope
