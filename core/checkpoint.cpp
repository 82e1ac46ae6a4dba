// Checkpoint reading and writing: safetensors (strictly validated, like the Rust reference
// implementation) and torch.save zip archives through the restricted unpickler.
#include "core/checkpoint.h"

#include "core/json_checked.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/excerpt.h"
#include "core/pickle_reader.h"
#include "core/zip_archive.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors and torch.save data are little-endian; byte swapping is not implemented");

namespace attnscope {
namespace {

using pickle::Kind;
using pickle::Value;

constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;  // the reference implementation's limit
// A state_dict's data.pkl takes some 100 bytes per tensor; 64 MB is hundreds of thousands of them.
constexpr uint64_t kMaxPickleBytes = uint64_t(64) << 20;
// Views may repeat a storage's bytes (tied weights); the tensors of a file may add up to at most
// this many times the bytes of the storages they view, plus kViewAllowanceBytes.
constexpr uint64_t kMaxViewAmplification = 2;
constexpr uint64_t kViewAllowanceBytes = uint64_t(256) << 20;
const char* const kConvertHint = "if you trust the file, convert it with scripts/convert_checkpoint.py";

[[noreturn]] void bad_checkpoint(const std::string& path, const std::string& what) {
  throw CheckpointError(path + ": " + what);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Runs `body`, turning whatever LibTorch, miniz or the allocator throw into one CheckpointError.
template <typename Body>
auto guarded(const std::string& path, const std::string& context, Body&& body) {
  const std::string prefix = context.empty() ? "" : context + ": ";
  try {
    return body();
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& e) {
    bad_checkpoint(path, prefix + first_line(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    bad_checkpoint(path, prefix + "out of memory");
  } catch (const std::exception& e) {
    bad_checkpoint(path, prefix + first_line(e.what()));
  }
}

std::ifstream open_for_reading(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad_checkpoint("cannot open " + path, "Is a directory");
  // A FIFO or device would block the read forever: only regular files are opened.
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    bad_checkpoint("cannot open " + path, "not a regular file (a pipe, socket or device)");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError("cannot open " + path + ": " + (errno != 0 ? std::strerror(errno) : "unreadable file"));
  }
  return in;
}

struct DtypeCode {
  const char* code;
  c10::ScalarType type;
};
constexpr DtypeCode kDtypeCodes[] = {
    {"F32", c10::ScalarType::Float},  {"F16", c10::ScalarType::Half}, {"BF16", c10::ScalarType::BFloat16},
    {"F64", c10::ScalarType::Double}, {"I64", c10::ScalarType::Long}, {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},  {"I8", c10::ScalarType::Char},  {"U8", c10::ScalarType::Byte},
    {"BOOL", c10::ScalarType::Bool},
};

const DtypeCode* find_dtype(const std::string& code) {
  for (const auto& d : kDtypeCodes) {
    if (code == d.code) return &d;
  }
  return nullptr;
}

const char* dtype_code(c10::ScalarType type) {
  for (const auto& d : kDtypeCodes) {
    if (type == d.type) return d.code;
  }
  return nullptr;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// ---------------------------------------------------------------------------------------------
// safetensors: u64 LE header length, JSON header, then one contiguous data buffer.

struct SafetensorsEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

std::string offsets_text(const SafetensorsEntry& e) {
  return "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& info,
                             uint64_t data_size) {
  const std::string where = "tensor '" + excerpt(name) + "'";
  if (!info.is_object()) bad_checkpoint(path, where + " is not a JSON object");
  SafetensorsEntry e;
  e.name = name;

  const auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) bad_checkpoint(path, where + " has no dtype string");
  const DtypeCode* code = find_dtype(dtype->get<std::string>());
  if (!code) {
    bad_checkpoint(path, where + " has unsupported dtype '" + excerpt(dtype->get<std::string>()) +
                             "' (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
  }
  e.dtype = code->type;

  const auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array()) bad_checkpoint(path, where + " has no shape array");
  uint64_t numel = 1;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t(INT64_MAX)) {
      bad_checkpoint(path, where + " has shape " + excerpt(shape->dump()) + ": dimensions must be non-negative ints");
    }
    e.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    if (__builtin_mul_overflow(numel, dim.get<uint64_t>(), &numel)) {
      bad_checkpoint(path, where + " has shape " + excerpt(shape->dump()) + " whose size overflows");
    }
  }

  const auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    bad_checkpoint(path, where + " needs data_offsets [begin, end] of non-negative ints");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end) bad_checkpoint(path, where + " has data_offsets " + offsets_text(e) + " with begin > end");
  if (e.end > data_size) {
    bad_checkpoint(path, where + " has data_offsets " + offsets_text(e) + " past the end of the data (" +
                             std::to_string(data_size) + " bytes)");
  }
  uint64_t needed = 0;
  if (__builtin_mul_overflow(numel, uint64_t(c10::elementSize(e.dtype)), &needed)) {
    bad_checkpoint(path, where + " has shape " + excerpt(shape->dump()) + " whose size in bytes overflows");
  }
  if (needed != e.end - e.begin) {
    bad_checkpoint(path, where + " has data_offsets " + offsets_text(e) + " but shape " + excerpt(shape->dump()) + " " +
                             code->code + " needs " + std::to_string(needed) + " bytes");
  }
  return e;
}

// The data buffer must be exactly the tensors laid end to end: no overlap, no hole, no tail.
void check_layout(const std::string& path, std::vector<SafetensorsEntry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < covered) {
      bad_checkpoint(path, "tensors '" + excerpt(previous->name) + "' " + offsets_text(*previous) + " and '" +
                               excerpt(e.name) + "' " + offsets_text(e) + " overlap");
    }
    if (e.begin > covered) {
      bad_checkpoint(path, "bytes " + std::to_string(covered) + ".." + std::to_string(e.begin) +
                               " of the data (before tensor '" + excerpt(e.name) + "') belong to no tensor");
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size) {
    bad_checkpoint(path, "the last " + std::to_string(data_size - covered) + " bytes of the data (" +
                             std::to_string(data_size) + " in all) belong to no tensor");
  }
}

Checkpoint read_safetensors(const std::string& path) {
  std::ifstream in = open_for_reading(path);
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) {
    bad_checkpoint(path, "not a safetensors file: only " + std::to_string(file_size) + " bytes");
  }
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  if (header_size > kMaxSafetensorsHeader) {
    bad_checkpoint(
        path, "not a safetensors file: header length " + std::to_string(header_size) + " exceeds the 100 MB limit");
  }
  if (header_size > file_size - 8) {
    bad_checkpoint(path, "not a safetensors file (or truncated): header length " + std::to_string(header_size) +
                             " runs past the end of the file (" + std::to_string(file_size) + " bytes)");
  }
  std::string header_text(header_size, '\0');
  if (!in.read(header_text.data(), static_cast<std::streamsize>(header_size))) {
    bad_checkpoint(path, "read error in the header");
  }
  nlohmann::json header;
  try {
    header = parse_json_checked(header_text, "the safetensors header");
  } catch (const std::invalid_argument& e) {
    bad_checkpoint(path, std::string("not a usable safetensors file: ") + e.what());
  }
  if (!header.is_object()) bad_checkpoint(path, "not a safetensors file: the header is not a JSON object");

  const uint64_t data_size = file_size - 8 - header_size;
  Checkpoint ckpt;
  ckpt.format = "safetensors";
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) bad_checkpoint(path, "__metadata__ must map strings to strings");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string())
          bad_checkpoint(path, "__metadata__ must map strings to strings ('" + excerpt(key) + "')");
        ckpt.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, info, data_size));
  }
  check_layout(path, entries, data_size);

  // Entries are sorted by offset and contiguous, so the data is read front to back.
  for (const auto& e : entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    const auto n = static_cast<std::streamsize>(e.end - e.begin);
    if (n > 0 && !in.read(static_cast<char*>(t.data_ptr()), n)) {
      bad_checkpoint(path, "read error in the data of tensor '" + excerpt(e.name) + "'");
    }
    ckpt.tensors[e.name] = std::move(t);
  }
  return ckpt;
}

// ---------------------------------------------------------------------------------------------
// torch.save zip archives: <top>/data.pkl plus one record <top>/data/<key> per storage.

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
  return join(keys, ", ");
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
                           kConvertHint);
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
                             kConvertHint);
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
        bad_checkpoint(path,
                       "no state_dict found: no tensors at the top level and no 'model', 'model_ema' or 'state_dict' "
                       "entry (top-level keys: " +
                           key_list(root) + "); name the entry that holds the weights");
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

Checkpoint read_pytorch_zip(const std::string& path, const std::string& container) {
  open_for_reading(path);  // a clear "cannot open" before miniz reports anything
  ZipDirectory directory;
  auto zip = guarded(path, "not a readable PyTorch zip archive", [&] { return open_torch_zip(path, &directory); });
  const std::vector<std::string> records = guarded(path, "corrupt zip archive", [&] { return zip->getAllRecords(); });
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

  auto [pkl, pkl_size] = guarded(path, "corrupt data.pkl", [&] { return zip->getRecord("data.pkl"); });
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
  for (const auto& [key, value] : state_dict.entries) {
    if (key->kind != Kind::String) continue;
    const std::string entry = where + " entry '" + excerpt(key->text) + "'";
    if (const Value* refused = find_refused(value, checked)) refuse(path, entry, *refused);
    if (value->kind == Kind::Invalid) bad_checkpoint(path, entry + " is unusable: " + value->text);
    if (value->kind != Kind::Tensor) continue;  // e.g. a version number stored beside the weights
    const Value& stored = *value;               // C++17 lambdas cannot capture structured bindings (clang rejects it)
    ckpt.tensors.insert_or_assign(key->text, guarded(path, entry, [&] { return storages.tensor(stored); }));
  }
  if (ckpt.tensors.empty()) {
    bad_checkpoint(path, "no tensors in the " + where + " (its keys: " + key_list(state_dict) + ")");
  }
  strip_data_parallel_prefix(ckpt.tensors);
  return ckpt;
}

// torch.save(..., _use_new_zipfile_serialization=False) starts with a pickled magic number.
bool is_legacy_torch_pickle(const std::string& head) {
  static const std::string magic("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14);
  return head.compare(0, magic.size(), magic) == 0;
}

}  // namespace

Checkpoint load_safetensors(const std::string& path) {
  return guarded(path, "", [&] { return read_safetensors(path); });
}

Checkpoint load_pytorch_zip(const std::string& path, const std::string& container) {
  return guarded(path, "", [&] { return read_pytorch_zip(path, container); });
}

bool is_torchscript_archive(const std::string& path) {
  try {
    std::string head(4, '\0');
    {
      std::ifstream in = open_for_reading(path);
      in.read(head.data(), 4);
      if (in.gcount() != 4 || head != "PK\x03\x04") return false;
    }
    return open_torch_zip(path)->hasRecord("constants.pkl");
  } catch (const std::exception&) {
    return false;
  }
}

Checkpoint load_checkpoint(const std::string& path, const std::string& container) {
  std::string head(16, '\0');
  {
    std::ifstream in = open_for_reading(path);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  // Any zip signature (an empty zip starts with its end record, PK\x05\x06) goes to the zip reader.
  if (head.compare(0, 2, "PK") == 0) {
    if (head.compare(0, 4, "PK\x05\x06") == 0)
      bad_checkpoint(path, "an empty zip archive: not a torch.save checkpoint");
    return load_pytorch_zip(path, container);
  }
  // A safetensors header is JSON right after its 8-byte length; the length's low byte can be 0x80,
  // so this must be decided before the pickle checks below.
  if (head.size() > 8 && head[8] == '{') return load_safetensors(path);
  if (is_legacy_torch_pickle(head)) {
    bad_checkpoint(path,
                   "a legacy (pre-1.6, non-zip) PyTorch checkpoint, which attnscope does not read; "
                   "re-save it with torch.save in PyTorch >= 1.6, or " +
                       std::string(kConvertHint));
  }
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) {
    bad_checkpoint(path, std::string("a plain Python pickle, not a checkpoint attnscope reads; ") + kConvertHint);
  }
  return load_safetensors(path);
}

void save_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  guarded(path, "", [&] {
    std::vector<torch::Tensor> data;  // in name order, the order of the data offsets
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
      if (name == "__metadata__") bad_checkpoint(path, "a tensor cannot be named __metadata__");
      const char* code = dtype_code(tensor.scalar_type());
      if (!code) {
        bad_checkpoint(path, "cannot save tensor '" + excerpt(name) + "' of dtype " +
                                 std::string(c10::toString(tensor.scalar_type())));
      }
      torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
      const uint64_t bytes = t.numel() * t.element_size();
      header[name] = {{"dtype", code}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
      data.push_back(std::move(t));
    }
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::string header_text = header.dump();
    header_text.append((8 - header_text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

    try {
      write_file_atomically(path, [&](std::ostream& out) {
        unsigned char length[8];
        for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_text.size() >> (8 * i));
        out.write(reinterpret_cast<const char*>(length), 8);
        out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
        for (const auto& t : data) {
          out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
        }
      });
    } catch (const std::runtime_error& e) {
      throw CheckpointError(e.what());  // already "cannot write PATH: reason"
    }
  });
}

}  // namespace attnscope
