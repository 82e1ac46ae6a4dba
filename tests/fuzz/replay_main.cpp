// Runs a fuzz target's entry point over files (the checked-in corpus in ctest), compiled with the
// project's normal compiler: every input must return, and the slowest input and the peak memory
// are reported.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_input.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::directory_iterator(argv[i]))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::cerr << "usage: " << argv[0] << " FILE_OR_FOLDER...\n";
    return 2;
  }
  double slowest = 0;
  fs::path slowest_input;
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto start = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds >= slowest) {
      slowest = seconds;
      slowest_input = input;
    }
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::cout << inputs.size() << " inputs, slowest " << slowest * 1000 << " ms (" << slowest_input.filename().string()
            << "), peak RSS " << usage.ru_maxrss / 1024 << " MB\n";
  return 0;
}
