// Fuzz target: any bytes as a safetensors header (JSON), followed by the zero bytes its offsets
// ask for (up to 1 MB): layout detection, architecture inference and its bounds, and, where the
// estimate is small, building the model and copying the weights, as load_model does.
#include <exception>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/json_checked.h"
#include "fuzz_input.h"
#include "models/arch_limits.h"
#include "models/checkpoint_layouts.h"
#include "models/model_loader.h"

namespace {

// The end of the data the header's offsets describe, or 0 when it cannot be told.
uint64_t data_size(const std::string& header) {
  uint64_t end = 0;
  try {
    const nlohmann::json parsed = attnscope::parse_json_checked(header, "header");
    if (!parsed.is_object()) return 0;
    for (const auto& [name, entry] : parsed.items()) {
      if (!entry.is_object() || !entry.contains("data_offsets")) continue;
      const auto& offsets = entry["data_offsets"];
      if (offsets.is_array() && offsets.size() == 2 && offsets[1].is_number_unsigned())
        end = std::max(end, offsets[1].get<uint64_t>());
    }
  } catch (const std::exception&) {
    return 0;
  }
  return end;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  const std::string header(reinterpret_cast<const char*>(data), size);
  const uint64_t zeros = data_size(header);
  if (zeros > (1 << 20)) return 0;
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((size >> (8 * i)) & 0xFF);
  file += header + std::string(zeros, '\0');
  const std::string path = fuzz::input_file("arch", file.data(), file.size());
  try {
    Checkpoint checkpoint = load_safetensors(path);
    const LayoutFacts layout = adopt_known_layout(checkpoint, path);
    LoadReport report;
    const VitArch arch = infer_arch(checkpoint, nlohmann::json::object(), &report, &layout);
    if (vit_arch_estimate(arch).total_bytes() < double(64 << 20)) {
      VisionTransformer model(arch);
      copy_weights(*model, checkpoint, report);
    }
  } catch (const std::exception&) {
  }
  return 0;
}
