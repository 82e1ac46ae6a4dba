// Where a --model string points, resolved offline as huggingface_hub and torch.hub find their files:
// a path; `local-dir:PATH`; `hf-hub:ORG/NAME[@REVISION]` in the Hugging Face cache (a branch or tag
// under refs/, or a commit); a bare `ORG/NAME` when no such path exists (the hub, with a note); a bare
// `NAME.pth` in torch.hub's checkpoints. Never a network access: what the caches lack is refused
// naming where it looked. What was resolved is the model's provenance in every output.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace attnscope {

struct ModelSource {
  std::string given;  // as the user wrote it
  std::string kind;   // "path", "local-dir", "hf-hub", "torch-hub"
  std::string path;   // the file or folder read
  // hf-hub: the repo (ORG/NAME), the revision asked for, the commit it named, the cache's root.
  std::string repo, revision, commit, cache;
  struct File {
    std::string name;
    std::uintmax_t size = 0;
    std::string blob;  // the blob a snapshot's link points to (the LFS sha256 of weights); empty for copies
  };
  std::vector<File> files;  // hf-hub: the snapshot's files
  std::vector<std::string> notes;

  nlohmann::json to_json() const;
  // A few lines for a person: what was given, what it resolved to (repo, revision, commit) and the
  // files read with their sizes and blobs; the workbench shows it in a panel's tooltip.
  std::string describe() const;
  // The name that reopens these very files: hf-hub:ORG/NAME@COMMIT for a hub name, else `given`.
  std::string pinned() const { return kind == "hf-hub" ? "hf-hub:" + repo + "@" + commit : given; }
};

// The Hugging Face cache's root, in huggingface_hub's order: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
// $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
std::string hf_hub_cache_root();
// The same root and what chose it (the variable's name, or "the default, ~/.cache"), for messages.
std::pair<std::string, std::string> hf_hub_cache_root_and_origin();
// The commit a Hugging Face cache ref file (refs/<revision>) holds: its first line (of its first 64
// characters), trailing whitespace removed.
std::string read_hf_ref(const std::string& file);
// torch.hub's checkpoints folder: $TORCH_HOME/hub/checkpoints, TORCH_HOME defaulting to
// $XDG_CACHE_HOME/torch or ~/.cache/torch.
std::string torch_hub_checkpoints();

// Throws CheckpointError (a clear refusal naming the repo and where it looked) for a name the
// caches do not hold, a revision that is neither a ref nor a commit, a ref naming a missing
// snapshot, a broken link, or a name that climbs out of the cache ("..").
ModelSource resolve_model_source(const std::string& given);

// `given` as a name that opens the same files from any folder: a path (or local-dir:'s) made
// absolute; hub names and torch.hub file names, which name no path here, as they are.
std::string absolute_model_name(const std::string& given);

}  // namespace attnscope
