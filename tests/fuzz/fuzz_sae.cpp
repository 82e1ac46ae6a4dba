// Fuzz target: any bytes as a sparse autoencoder's files (models/sparse_autoencoder.h): as saev's
// sae.pt (a JSON line, then torch.save's archive at its offset), and the first line alone as a
// SAELens cfg.json, a ViT-Prisma or a dictionary_learning config.json beside no weights. Every
// input must be read or refused with a message, never allocate what its header declares first.
#include <exception>
#include <filesystem>
#include <fstream>

#include "fuzz_input.h"
#include "models/sparse_autoencoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  namespace fs = std::filesystem;
  const std::string saev = fuzz::input_file("sae", data, size);
  try {
    load_sparse_autoencoder(saev);
  } catch (const std::exception&) {
  }
  // The first line as each folder format's config.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string line = bytes.substr(0, bytes.find('\n'));
  const fs::path folder = fs::path(saev).string() + "-folder";
  for (const char* name : {"cfg.json", "config.json"}) {
    std::error_code error;
    fs::remove_all(folder, error);
    fs::create_directories(folder, error);
    std::ofstream(folder / name, std::ios::binary) << line;
    if (std::string(name) == "cfg.json") std::ofstream(folder / "sae_weights.safetensors", std::ios::binary) << "";
    try {
      load_sparse_autoencoder(folder.string());
    } catch (const std::exception&) {
    }
  }
  std::error_code error;
  fs::remove_all(folder, error);
  return 0;
}
