// Fuzz target: any bytes as a safetensors file through the checkpoint reader.
#include <exception>

#include "core/checkpoint.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnscope::fuzz::input_file("safetensors", data, size);
  try {
    attnscope::load_safetensors(path);
  } catch (const std::exception&) {
    // A clear error is the right outcome for a bad file; crashes, hangs and huge allocations are not.
  }
  return 0;
}
