#include "untrusted_files.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/zip_archive.h"

namespace attnscope::testing {

namespace {

std::string le(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out += char((value >> (8 * i)) & 0xFF);
  return out;
}

std::string pickle_string(const std::string& text) { return "X" + le(text.size(), 4) + text; }
std::string pickle_int(int64_t value) { return "\x8a\x08" + le(uint64_t(value), 8); }  // LONG1

}  // namespace

std::string zip_bytes(const std::vector<ZipEntry>& entries) {
  std::string out, directory;
  for (const ZipEntry& entry : entries) {
    const uint64_t offset = out.size();
    const uint64_t uncompressed = entry.claimed_uncompressed < 0 ? entry.data.size() : entry.claimed_uncompressed;
    const uint32_t crc = zip_crc32(entry.data.data(), entry.data.size());
    // Local header: signature, version, flags, method, time, date, crc, sizes, name and extra lengths.
    out += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(entry.method, 2) + le(0, 4) + le(crc, 4) +
           le(entry.data.size(), 4) + le(uncompressed, 4) + le(entry.name.size(), 2) + le(0, 2) + entry.name +
           entry.data;
    directory += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(entry.method, 2) + le(0, 4) + le(crc, 4) +
                 le(entry.data.size(), 4) + le(uncompressed, 4) + le(entry.name.size(), 2) + le(0, 2) + le(0, 2) +
                 le(0, 2) + le(0, 2) + le(0, 4) + le(offset, 4) + entry.name;
  }
  const uint64_t directory_offset = out.size();
  out += directory;
  out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) + le(entries.size(), 2) +
         le(directory.size(), 4) + le(directory_offset, 4) + le(0, 2);
  return out;
}

std::vector<ZipEntry> torch_archive(const std::string& pickle, const std::map<std::string, std::string>& storages) {
  std::vector<ZipEntry> entries = {{"archive/data.pkl", pickle}};
  for (const auto& [key, data] : storages) entries.push_back({"archive/data/" + key, data});
  entries.push_back({"archive/version", "3\n"});
  return entries;
}

std::string state_dict_pickle(const std::vector<PickledTensor>& tensors) {
  std::string out = "\x80\x02}(";
  for (const PickledTensor& t : tensors) {
    out += pickle_string(t.name);
    out += "ctorch._utils\n_rebuild_tensor_v2\n(";
    out += "(" + pickle_string("storage") + "ctorch\nFloatStorage\n" + pickle_string(t.key) + pickle_string("cpu") +
           pickle_int(t.declared_numel) + "tQ";
    out += pickle_int(0) + "(" + pickle_int(t.numel) + "t(" + pickle_int(1) + "t\x89";
    out += "ccollections\nOrderedDict\n)Rt";  // backward hooks
    out += "R";
  }
  return out + "u.";
}

std::string safetensors_file(const std::map<std::string, std::vector<int64_t>>& shapes,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    uint64_t numel = 1;
    for (int64_t d : shape) numel *= uint64_t(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + 4 * numel}}};
    offset += 4 * numel;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  const std::string text = header.dump();
  return le(text.size(), 8) + text + std::string(offset, '\0');
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace attnscope::testing
