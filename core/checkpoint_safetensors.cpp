// safetensors checkpoints: reading (validated as strictly as the Rust reference implementation:
// u64 LE header length, JSON header, then the tensors' bytes laid end to end) and atomic writing.
#include <algorithm>
#include <tuple>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint_reading.h"
#include "core/excerpt.h"
#include "core/json_checked.h"

namespace attnscope {
namespace {

constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;  // the reference implementation's limit

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

Checkpoint read_safetensors(const std::string& path, bool shapes_only) {
  std::ifstream in = open_checkpoint_file(path);
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

  if (shapes_only) {  // names, dtypes and shapes on the meta device: nothing of the data is read or allocated
    for (const auto& e : entries)
      ckpt.tensors[e.name] = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype).device(torch::kMeta));
    return ckpt;
  }
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

}  // namespace

Checkpoint load_safetensors(const std::string& path) {
  return guarded_checkpoint_call(path, "", [&] { return read_safetensors(path, false); });
}

Checkpoint read_safetensors_shapes(const std::string& path) {
  return guarded_checkpoint_call(path, "", [&] { return read_safetensors(path, true); });
}

void save_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  guarded_checkpoint_call(path, "", [&] {
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
