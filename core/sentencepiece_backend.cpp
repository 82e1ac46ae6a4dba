#include "core/sentencepiece_backend.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace attnscope {

namespace {

using LoadFunction = SentencePieceBackend* (*)(const std::string*, std::string*);

// The module beside the executable (an installed app), else where this build wrote it.
LoadFunction module_entry() {
  static std::once_flag once;
  static LoadFunction entry = nullptr;
  static std::string problem;
  std::call_once(once, [] {
    const char* name = "libattnscope_sentencepiece.so";
    std::vector<std::string> candidates;
    std::error_code error;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (!error) candidates.push_back((self.parent_path() / name).string());
    candidates.push_back(ATTNSCOPE_SENTENCEPIECE_MODULE);
#if defined(__SANITIZE_ADDRESS__)
    const int flags = RTLD_NOW | RTLD_LOCAL;  // AddressSanitizer refuses RTLD_DEEPBIND
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
    for (const std::string& path : candidates) {
      if (!std::filesystem::exists(path, error)) continue;
      void* handle = dlopen(path.c_str(), flags);
      if (!handle) {
        const char* message = dlerror();
        problem = path + ": " + (message ? message : "dlopen failed");
        continue;
      }
      entry = reinterpret_cast<LoadFunction>(dlsym(handle, "attnscope_sentencepiece_load"));
      if (entry) return;
      problem = path + " has no attnscope_sentencepiece_load";
    }
    if (problem.empty())
      problem = std::string(name) + " is neither beside the executable nor at " + ATTNSCOPE_SENTENCEPIECE_MODULE +
                " (build attnscope again)";
  });
  if (!entry) throw std::runtime_error("SentencePiece is not available: " + problem);
  return entry;
}

}  // namespace

std::unique_ptr<SentencePieceBackend> load_sentencepiece(const std::string& serialized_model) {
  std::string error;
  SentencePieceBackend* backend = module_entry()(&serialized_model, &error);
  if (!backend) throw std::runtime_error(error.empty() ? "not a SentencePiece model" : error);
  return std::unique_ptr<SentencePieceBackend>(backend);
}

}  // namespace attnscope
