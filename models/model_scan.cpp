#include "models/model_scan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/checkpoint.h"
#include "core/excerpt.h"
#include "models/arch_config.h"
#include "models/checkpoint_layouts.h"
#include "models/model_families.h"
#include "models/model_source.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

std::uintmax_t folder_bytes(const fs::path& folder) {
  std::uintmax_t total = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    if (!it->is_symlink(error) && it->is_regular_file(error)) total += it->file_size(error);
  return total;
}

// What the snapshot opens as, from its safetensors headers and configs: the family and layout the
// loader would take, its registered name and parameter count, or why it would refuse.
void judge(const std::string& folder, CachedModel& model) {
  try {
    const std::string file = resolve_weights_file(folder);
    Checkpoint checkpoint;
    if (is_shard_index(file)) {
      checkpoint = read_sharded_safetensors_shapes(file);
    } else if (file.size() > 12 && file.compare(file.size() - 12, 12, ".safetensors") == 0) {
      checkpoint = read_safetensors_shapes(file);
    } else {
      model.why_not = "a PyTorch file: judged when opened (the scan reads no weights)";
      return;
    }
    const LayoutFacts layout = adopt_known_layout(checkpoint, folder);
    const BackboneFamily& family = family_for(checkpoint);
    const ArchConfig config = gather_arch_config(family, checkpoint, file, {});
    std::vector<std::string> notes;
    std::vector<ArchAssumption> assumed;
    FamilyInput input{checkpoint, config.values, config.sources, layout, notes, assumed};
    const InferredBackbone inferred = family.infer(input);
    std::ostringstream text;
    text << family.name;
    if (layout.layout != CheckpointLayout::Timm) text << " (" << to_string(layout.layout) << ")";
    if (!config.architecture.empty()) text << ", " << config.architecture;
    text.precision(3);
    text << ", about " << inferred.estimate().parameter_bytes / 4 / 1e6 << " M parameters";
    model.opens = text.str();
  } catch (const std::exception& e) {
    model.why_not = e.what();
  }
}

}  // namespace

nlohmann::json CachedModel::to_json() const {
  nlohmann::json j = {{"name", name}, {"kind", kind}, {"path", path}, {"bytes", bytes}};
  if (kind == "hf-hub") {
    j["refs"] = refs;
    j["snapshots"] = snapshots;
  }
  j["opens"] = opens.empty() ? nlohmann::json() : nlohmann::json(opens);
  if (!why_not.empty()) j["why_not"] = why_not;
  return j;
}

std::vector<CachedModel> scan_model_caches(size_t limit, size_t* left_out) {
  std::vector<CachedModel> models;
  size_t skipped = 0;
  std::error_code error;
  const fs::path cache = hf_hub_cache_root();
  for (fs::directory_iterator it(cache, error), end; !error && it != end; it.increment(error)) {
    const std::string folder = it->path().filename().string();
    if (folder.rfind("models--", 0) != 0 || !it->is_directory(error)) continue;
    if (models.size() >= limit) {
      ++skipped;
      continue;
    }
    CachedModel model;
    model.kind = "hf-hub";
    model.path = it->path().string();
    std::string id = folder.substr(8);
    if (const auto separator = id.find("--"); separator != std::string::npos) id.replace(separator, 2, "/");
    model.name = "hf-hub:" + id;
    std::error_code inner;
    for (fs::recursive_directory_iterator ref(it->path() / "refs", inner), refs_end; !inner && ref != refs_end;
         ref.increment(inner))
      if (ref->is_regular_file(inner))
        model.refs[fs::relative(ref->path(), it->path() / "refs", inner).string()] = read_hf_ref(ref->path().string());
    for (fs::directory_iterator snapshot(it->path() / "snapshots", inner), snapshots_end;
         !inner && snapshot != snapshots_end; snapshot.increment(inner))
      if (snapshot->is_directory(inner)) model.snapshots.push_back(snapshot->path().filename().string());
    std::sort(model.snapshots.begin(), model.snapshots.end());
    model.bytes = folder_bytes(it->path());
    // The revision --model takes by default is main; without refs/main, the only snapshot by its
    // commit (the name listed is then that pinned name, so that every listed name opens).
    if (!model.refs.count("main") && model.snapshots.size() == 1) model.name += "@" + model.snapshots.front();
    if (!model.refs.count("main") && model.snapshots.size() != 1) {
      model.why_not = "no refs/main and " + std::to_string(model.snapshots.size()) +
                      " snapshots: give a revision (hf-hub:" + id + "@REVISION)";
    } else {
      try {  // resolved as --model resolves it: the same refusals (broken links, missing snapshots)
        judge(resolve_model_source(model.name).path, model);
      } catch (const std::exception& e) {
        model.why_not = e.what();
      }
    }
    models.push_back(model);
  }
  const fs::path checkpoints = torch_hub_checkpoints();
  for (fs::directory_iterator it(checkpoints, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    if (models.size() >= limit) {
      ++skipped;
      continue;
    }
    CachedModel model;
    model.kind = "torch-hub";
    model.name = it->path().filename().string();
    model.path = it->path().string();
    model.bytes = it->file_size(error);
    if (model.name.size() > 12 && model.name.compare(model.name.size() - 12, 12, ".safetensors") == 0)
      judge(model.path, model);
    else
      model.why_not = "a PyTorch file: judged when opened (the scan reads no weights)";
    models.push_back(model);
  }
  std::sort(models.begin(), models.end(), [](const CachedModel& a, const CachedModel& b) { return a.name < b.name; });
  if (left_out) *left_out = skipped;
  return models;
}

}  // namespace attnscope
