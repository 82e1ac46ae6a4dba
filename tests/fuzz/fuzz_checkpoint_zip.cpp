// Fuzz target: torch.save files. Bytes starting with "PK" are the whole archive (zip structure,
// LibTorch's reader, storages); any other bytes are a data.pkl, wrapped into a well-formed archive
// with 32 storages of 1 KB ("0" to "31"), so that the unpickler and the tensor rebuilds see them.
#include <exception>

#include "core/checkpoint.h"
#include "core/pickle_reader.h"
#include "fuzz_input.h"
#include "untrusted_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string archive = bytes;
  if (bytes.compare(0, 2, "PK") != 0) {
    try {
      pickle::unpickle(bytes.data(), bytes.size());
    } catch (const pickle::PickleError&) {
    }
    std::map<std::string, std::string> storages;
    for (int key = 0; key < 32; ++key) storages[std::to_string(key)] = std::string(1024, '\x01');
    archive = attnscope::testing::zip_bytes(attnscope::testing::torch_archive(bytes, storages));
  }
  const std::string path = fuzz::input_file("checkpoint_zip", archive.data(), archive.size());
  try {
    load_checkpoint(path);
  } catch (const std::exception&) {
  }
  return 0;
}
