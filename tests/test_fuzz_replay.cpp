// Every fuzz target's entry point over its checked-in corpus (tests/fuzz/corpus/TARGET/), compiled
// into this binary with the project's normal compiler: every input must return. The targets are the
// libFuzzer sources themselves (scripts/fuzz.sh builds them as fuzzers), each entry point renamed
// here; in one binary they cost one compilation instead of eight executables of their own.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#define LLVMFuzzerTestOneInput fuzz_safetensors_input
#include "fuzz/fuzz_safetensors.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_checkpoint_zip_input
#include "fuzz/fuzz_checkpoint_zip.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_image_input
#include "fuzz/fuzz_image.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_session_input
#include "fuzz/fuzz_session.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_arch_input
#include "fuzz/fuzz_arch.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_yaml_input
#include "fuzz/fuzz_yaml.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_sae_input
#include "fuzz/fuzz_sae.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_prompt_file_input
#include "fuzz/fuzz_prompt_file.cpp"
#undef LLVMFuzzerTestOneInput

namespace {

using FuzzEntry = int (*)(const uint8_t*, size_t);

// Feeds each file of the target's corpus to its entry point, in name order, and reports the slowest
// input and the process's peak memory (the fuzzers' limits are 10 s and 2 GB an input).
void replay_corpus(const std::string& target, FuzzEntry entry) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(ATTNSCOPE_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target;
  std::vector<fs::path> inputs;
  for (const auto& item : fs::directory_iterator(folder))
    if (item.is_regular_file()) inputs.push_back(item.path());
  std::sort(inputs.begin(), inputs.end());
  ASSERT_FALSE(inputs.empty()) << "no corpus in " << folder;
  double slowest = 0;
  fs::path slowest_input;
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0) << input;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds >= slowest) {
      slowest = seconds;
      slowest_input = input;
    }
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::cout << target << ": " << inputs.size() << " inputs, slowest " << slowest * 1000 << " ms ("
            << slowest_input.filename().string() << "), peak RSS " << usage.ru_maxrss / 1024 << " MB\n";
}

}  // namespace

TEST(FuzzReplay, Safetensors) { replay_corpus("safetensors", fuzz_safetensors_input); }
TEST(FuzzReplay, CheckpointZip) { replay_corpus("checkpoint_zip", fuzz_checkpoint_zip_input); }
TEST(FuzzReplay, Image) { replay_corpus("image", fuzz_image_input); }
TEST(FuzzReplay, Session) { replay_corpus("session", fuzz_session_input); }
TEST(FuzzReplay, Arch) { replay_corpus("arch", fuzz_arch_input); }
TEST(FuzzReplay, Yaml) { replay_corpus("yaml", fuzz_yaml_input); }
TEST(FuzzReplay, Sae) { replay_corpus("sae", fuzz_sae_input); }
TEST(FuzzReplay, PromptFile) { replay_corpus("prompt_file", fuzz_prompt_file_input); }
