// Fuzz target: any bytes as a session file (JSON into the shared option table). Whatever a session
// sets must be written back (to_json) in a form that reads again to the same state.
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>

#include "core/json_checked.h"
#include "fuzz_input.h"
#include "session/app_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  AppState state;
  try {
    apply_json(state, parse_json_checked(std::string(reinterpret_cast<const char*>(data), size), "session"));
  } catch (const std::exception&) {
    return 0;
  }
  const nlohmann::json saved = to_json(state);
  AppState reloaded;
  try {
    apply_json(reloaded, saved);
  } catch (const std::exception&) {
    std::abort();  // a state the option table wrote but cannot read back
  }
  if (to_json(reloaded) != saved) std::abort();
  return 0;
}
