// Fuzz target: any bytes as a training yaml, through the bounded reader (core/yaml_checked.h) that
// every yaml attnscope reads goes through: it must return or throw std::invalid_argument, never
// expand past its bounds (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch an expansion).
#include <stdexcept>
#include <string>

#include "core/yaml_checked.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json parsed = attnscope::parse_yaml_checked(text, "the yaml");
    (void)parsed.dump();  // walking the result may not expand anything either
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
