// `bench --scale` in the engine-only build (ATTNSCOPE_ENGINE_ONLY): it times the whole `run`
// command, which writes its images with OpenCV and is not in that build.
#include <stdexcept>

#include "app/bench_scale.h"

namespace attnscope {

void bench_scale(const std::string&, const std::string&, const std::filesystem::path&) {
  throw std::invalid_argument(
      "--scale times the `run` command, which the engine-only build does not have (its images are written with "
      "OpenCV): use the default build, or `device-check` for DINOv2 at 518 and 1036 px");
}

}  // namespace attnscope
