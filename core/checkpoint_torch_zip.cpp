// torch.save zip checkpoints (.pth/.bin): <top>/data.pkl through the restricted unpickler, plus one
// stored record <top>/data/<key> per storage, each read once and checked against what views ask of it.
#include <algorithm>
#include <map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include "core/checkpoint_reading.h"
#include "core/excerpt.h"
#include "core/pickle_reader.h"
#include "core/zip_archive.h"

namespace attnscope {
namespace {

using pickle::Kind;
using pickle::Value;

// A state_dict's data.pkl takes some 100 bytes per tensor; 64 MB is hundreds of thousands of them.
constexpr uint64_t kMaxPickleBytes = uint64_t(64) << 20;
// Views may repeat a storage's bytes (tied weights); the tensors of a file may add up to at most
// this many times the bytes of the storages they view, plus kViewAllowanceBytes.
constexpr uint64_t kMaxViewAmplification = 2;
constexpr uint64_t kViewAllowanceBytes = uint64_t(256) << 20;

std::string join_with(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// Reads each storage record once; views and tied weights share it.
class StorageReader {
 public:
  StorageReader(const std::string& path, caffe2::serialize::PyTorchStreamReader& zip, const ZipDirectory& directory)
      : path_(path), zip_(zip), directory_(directory) {}

  torch::Tensor storage(const Value& s) {
    auto it = storages_.find(s.text);
    if (it != storages_.end()) {
      if (it->second.scalar_type() != s.dtype || it->second.numel() != s.numel) {
        bad_checkpoint(path_, "storage '" + excerpt(s.text) + "' is declared with two different types or sizes");
      }
      return it->second;
    }
    const std::string record = "data/" + s.text;
    const ZipRecord* entry = directory_.find(record);
    if (!entry || !zip_.hasRecord(record))
      bad_checkpoint(path_, "the archive has no storage record '" + excerpt(record) + "'");
    // Judged on the directory's sizes, before LibTorch allocates what the record declares.
    const uint64_t needed = static_cast<uint64_t>(s.numel) * c10::elementSize(s.dtype);
    if (entry->uncompressed_size < needed) {
      bad_checkpoint(path_, "storage record '" + excerpt(record) + "' has " + std::to_string(entry->uncompressed_size) +
                                " bytes but " + std::to_string(s.numel) + " " + c10::toString(s.dtype) +
                                " elements need " + std::to_string(needed) + ": the file is truncated or damaged");
    }
    if (entry->method != 0)
      bad_checkpoint(
          path_, "storage record '" + excerpt(record) +
                     "' is compressed; torch.save stores tensors uncompressed: re-save the checkpoint with torch.save");
    auto [data, size] = zip_.getRecord(record);
    storage_bytes_ += size;
    const auto options = torch::TensorOptions().dtype(s.dtype);
    torch::Tensor t = s.numel == 0 ? torch::empty({0}, options) : torch::from_blob(data.get(), {s.numel}, options);
    records_.push_back(std::move(data));  // from_blob does not own; cloned before returning
    storages_.emplace(s.text, t);
    return t;
  }

  // A contiguous tensor that owns its memory; bounds were checked by the unpickler.
  torch::Tensor tensor(const Value& t) {
    const auto options = torch::TensorOptions().dtype(t.storage->dtype);
    const int64_t numel = c10::multiply_integers(t.sizes);
    if (numel == 0) return torch::empty(t.sizes, options);
    const torch::Tensor& stored = storage(*t.storage);
    tensor_bytes_ += uint64_t(numel) * c10::elementSize(t.storage->dtype);
    if (tensor_bytes_ > kMaxViewAmplification * storage_bytes_ + kViewAllowanceBytes)
      bad_checkpoint(path_, "its tensors view their storages over and over (" + std::to_string(tensor_bytes_) +
                                " bytes of tensors from " + std::to_string(storage_bytes_) +
                                " bytes of storage): the file is damaged or hostile");
    return stored.as_strided(t.sizes, t.strides, t.storage_offset).clone(at::MemoryFormat::Contiguous);
  }

 private:
  const std::string& path_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  const ZipDirectory& directory_;
  uint64_t storage_bytes_ = 0, tensor_bytes_ = 0;
  std::map<std::string, torch::Tensor> storages_;
  std::vector<at::DataPtr> records_;
};

// "a, b, c" for messages; long state_dicts are cut short.
std::string key_list(const Value& dict) {
  constexpr size_t kShown = 12;
  std::vector<std::string> keys;
  for (const auto& [k, v] : dict.entries) {
    if (keys.size() == kShown) {
      keys.push_back("... (" + std::to_string(dict.entries.size()) + " in all)");
      break;
    }
    keys.push_back(k->kind == Kind::String ? excerpt(k->text, 80) : "?");
  }
  return join_with(keys, ", ");
}

[[noreturn]] void refuse(const std::string& path, const std::string& where, const Value& refused) {
  const std::string& name = refused.text;
  if (name.rfind("torch.", 0) == 0 && name.size() > 7 && name.compare(name.size() - 7, 7, "Storage") == 0) {
    bad_checkpoint(path, where + " is a tensor stored as '" + excerpt(name) +
                             "', a type attnscope does not read "
                             "(supported: float, half, bfloat16, double, int64/32/16/8, uint8, bool)");
  }
  bad_checkpoint(path, "refusing to load: " + where + " is built by '" + excerpt(refused.text) +
                           "', which attnscope does not unpickle (it reads only tensors, containers and "
                           "numbers, and runs no pickled code); " +
                           kCheckpointConvertHint);
}

// The first refused object anywhere inside `v`, or nullptr. Iterative: hostile pickles can nest
// millions deep (one byte per level) or be cyclic. `seen` is shared by the calls for one state_dict:
// what an earlier entry reached held nothing refused, and a memoised value shared by every entry
// is then walked once, not once per entry.
const Value* find_refused(const Value* v, std::unordered_set<const Value*>& seen) {
  std::vector<const Value*> pending{v};
  while (!pending.empty()) {
    const Value* next = pending.back();
    pending.pop_back();
    if (!seen.insert(next).second) continue;
    if (next->kind == Kind::Refused) return next;
    pending.insert(pending.end(), next->items.begin(), next->items.end());
    for (const auto& [key, item] : next->entries) {
      pending.push_back(key);
      pending.push_back(item);
    }
  }
  return nullptr;
}

// Picks the state_dict: root["model"|"model_ema"|"state_dict"] or the root itself.
const Value& select_state_dict(const std::string& path, const Value& root, const std::string& container,
                               std::string& chosen_key) {
  if (root.kind == Kind::Refused) {
    bad_checkpoint(path, "the file holds an object built by '" + excerpt(root.text) +
                             "' (e.g. a whole model saved with torch.save(model)), not a state_dict; "
                             "save model.state_dict() instead, or " +
                             kCheckpointConvertHint);
  }
  if (root.kind != Kind::Dict) {
    bad_checkpoint(path, "the top level is " + pickle::Unpickled::describe(root) + ", not a state_dict");
  }
  const Value* chosen = nullptr;
  if (!container.empty()) {
    chosen = pickle::Unpickled::find(root, container);
    if (!chosen) {
      bad_checkpoint(path, "no '" + excerpt(container) + "' entry (top-level keys: " + key_list(root) + ")");
    }
    chosen_key = container;
  } else {
    for (const char* key : {"model", "model_ema", "state_dict"}) {
      if ((chosen = pickle::Unpickled::find(root, key))) {
        chosen_key = key;
        break;
      }
    }
    if (!chosen) {
      // A flat state_dict has tensors at the top; otherwise the weights sit under a key we do not
      // guess (e.g. 'net'), and objects beside them must not be blamed for the failure.
      const bool has_tensors = std::any_of(root.entries.begin(), root.entries.end(),
                                           [](const auto& entry) { return entry.second->kind == Kind::Tensor; });
      if (!has_tensors) {
        // Tensors that could not be rebuilt (e.g. a protocol-0 file) say why rather than vanish.
        for (const auto& [key, value] : root.entries)
          if (value->kind == Kind::Invalid && key->kind == Kind::String)
            bad_checkpoint(path, "state_dict entry '" + excerpt(key->text) + "' is unusable: " + value->text);
        if (root.entries.empty()) bad_checkpoint(path, "the file holds an empty dictionary: no weights");
        // The entry the weights are likely under: the first dictionary (torch.save({'net': sd, 'epoch': 3})).
        std::string candidate = "KEY";
        for (const auto& [key, value] : root.entries)
          if (value->kind == Kind::Dict && key->kind == Kind::String) {
            candidate = excerpt(key->text, 80);
            break;
          }
        bad_checkpoint(path,
                       "no state_dict found: no tensors at the top level and no 'model', 'model_ema' or 'state_dict' "
                       "entry (top-level keys: " +
                           key_list(root) +
                           "); if the weights are under another entry, write them out as a safetensors file: "
                           "scripts/convert_checkpoint.py FILE OUT.safetensors --key " +
                           candidate);
      }
      return root;
    }
  }
  if (chosen->kind == Kind::Refused) refuse(path, "'" + chosen_key + "'", *chosen);
  if (chosen->kind != Kind::Dict) {
    bad_checkpoint(path, "'" + chosen_key + "' is " + pickle::Unpickled::describe(*chosen) + ", not a state_dict");
  }
  return *chosen;
}

void strip_data_parallel_prefix(std::map<std::string, torch::Tensor>& tensors) {
  const std::string prefix = "module.";
  for (const auto& [name, t] : tensors) {
    if (name.compare(0, prefix.size(), prefix) != 0) return;
  }
  std::map<std::string, torch::Tensor> stripped;
  for (auto& [name, t] : tensors) stripped.emplace(name.substr(prefix.size()), std::move(t));
  tensors = std::move(stripped);
}

Checkpoint read_pytorch_zip(const std::string& path, const std::string& container, uint64_t base) {
  open_checkpoint_file(path);  // a clear "cannot open" before miniz reports anything
  ZipDirectory directory;
  auto zip = guarded_checkpoint_call(path, "not a readable PyTorch zip archive",
                                     [&] { return open_torch_zip(path, &directory, base); });
  const std::vector<std::string> records =
      guarded_checkpoint_call(path, "corrupt zip archive", [&] { return zip->getAllRecords(); });
  auto has = [&](const std::string& name) { return std::find(records.begin(), records.end(), name) != records.end(); };
  if (has("constants.pkl")) {
    bad_checkpoint(path,
                   "a TorchScript archive (torch.jit.save), not a torch.save checkpoint; save "
                   "model.state_dict() with torch.save instead");
  }
  if (!has("data.pkl") || !directory.find("data.pkl"))
    bad_checkpoint(path, "a zip archive without data.pkl: not a torch.save checkpoint");
  if (directory.find("data.pkl")->uncompressed_size > kMaxPickleBytes)
    bad_checkpoint(path, "its data.pkl would take " + std::to_string(directory.find("data.pkl")->uncompressed_size) +
                             " bytes, more than the " + std::to_string(kMaxPickleBytes >> 20) +
                             " MB a state_dict's needs: the file is damaged or hostile");

  auto [pkl, pkl_size] = guarded_checkpoint_call(path, "corrupt data.pkl", [&] { return zip->getRecord("data.pkl"); });
  pickle::Unpickled graph;
  try {
    graph = pickle::unpickle(static_cast<const char*>(pkl.get()), pkl_size);
  } catch (const pickle::PickleError& e) {
    bad_checkpoint(path, std::string("corrupt data.pkl: ") + e.what());
  }

  Checkpoint ckpt;
  ckpt.format = "pytorch-zip";
  const Value& state_dict = select_state_dict(path, *graph.root(), container, ckpt.container_key);
  if (graph.root()->kind == Kind::Dict)
    for (const auto& [key, value] : graph.root()->entries)
      if (key->kind == Kind::String && value->kind == Kind::Dict) ckpt.containers.push_back(key->text);
  const std::string where = ckpt.container_key.empty() ? "state_dict" : "'" + ckpt.container_key + "'";
  StorageReader storages(path, *zip, directory);
  std::unordered_set<const Value*> checked;
  std::unordered_set<const Value*> beside;  // apart from `checked`: the state_dict's own walk must see every node
  if (graph.root()->kind == Kind::Dict && graph.root() != &state_dict)
    for (const auto& [key, value] : graph.root()->entries)
      if (key->kind == Kind::String && value != &state_dict)
        if (const Value* refused = find_refused(value, beside))
          ckpt.unread_objects.push_back(excerpt(key->text, 80) + " (" + excerpt(refused->text, 120) + ")");
  for (const auto& [key, value] : state_dict.entries) {
    if (key->kind != Kind::String) continue;
    const std::string entry = where + " entry '" + excerpt(key->text) + "'";
    if (const Value* refused = find_refused(value, checked)) refuse(path, entry, *refused);
    if (value->kind == Kind::Invalid) bad_checkpoint(path, entry + " is unusable: " + value->text);
    if (value->kind != Kind::Tensor) continue;  // e.g. a version number stored beside the weights
    const Value& stored = *value;               // C++17 lambdas cannot capture structured bindings (clang rejects it)
    ckpt.tensors.insert_or_assign(key->text,
                                  guarded_checkpoint_call(path, entry, [&] { return storages.tensor(stored); }));
  }
  if (ckpt.tensors.empty()) {
    bad_checkpoint(path, "no tensors in the " + where + " (its keys: " + key_list(state_dict) + ")");
  }
  strip_data_parallel_prefix(ckpt.tensors);
  return ckpt;
}

}  // namespace

Checkpoint load_pytorch_zip(const std::string& path, const std::string& container, uint64_t base) {
  return guarded_checkpoint_call(path, "", [&] { return read_pytorch_zip(path, container, base); });
}

}  // namespace attnscope
