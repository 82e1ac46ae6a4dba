// Every option: the session's and each analysis's (the analysis registry).
#include "views/analysis_registry.h"
#include "views/option_catalog.h"

namespace attnscope {

const std::vector<OptionSpec>& app_options() {
  static const std::vector<OptionSpec> options = [] {
    std::vector<OptionSpec> all = session_options();
    for (OptionSpec& option : analysis_options()) all.push_back(std::move(option));
    return all;
  }();
  return options;
}

}  // namespace attnscope
