// Every option of the engine-only build (ATTNSCOPE_ENGINE_ONLY): the session's. Its commands run
// no analyses, so the analyses' own options are not there; views/app_options.cpp adds them.
#include "views/option_catalog.h"

namespace attnscope {

const std::vector<OptionSpec>& app_options() {
  static const std::vector<OptionSpec> options = session_options();
  return options;
}

}  // namespace attnscope
