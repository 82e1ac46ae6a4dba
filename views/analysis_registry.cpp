// The registry's table, built from views/analysis_list.h, and the option-table part it owns.
#include "views/analysis_registry.h"

#include <algorithm>

#include "core/excerpt.h"

namespace attnscope {

#define ATTNSCOPE_ANALYSIS(name) AnalysisEntry name##_analysis();
#include "views/analysis_list.h"
#undef ATTNSCOPE_ANALYSIS

const std::vector<AnalysisEntry>& analysis_registry() {
  static const std::vector<AnalysisEntry> entries = {
#define ATTNSCOPE_ANALYSIS(name) name##_analysis(),
#include "views/analysis_list.h"
#undef ATTNSCOPE_ANALYSIS
  };
  return entries;
}

std::string analysis_progress_text(const std::string& name, int done, int total) {
  const AnalysisEntry* entry = find_analysis(name);
  if (entry && entry->progress_text) return entry->progress_text(done, total);
  return std::to_string(done) + "/" + std::to_string(total) + " images";
}

const AnalysisEntry* find_analysis(const std::string& name) {
  for (const auto& entry : analysis_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

const AnalysisEntry* find_cli_analysis(const std::string& name) {
  for (const auto& entry : analysis_registry())
    if (entry.name == name || std::find(entry.cli_names.begin(), entry.cli_names.end(), name) != entry.cli_names.end())
      return &entry;
  return nullptr;
}

std::string cli_analysis_names() {
  std::string names;
  for (const auto& entry : analysis_registry()) {
    if (entry.name == "attribution") {
      // Its view's name is a session's; `analyze` names its methods.
      for (const auto& alias : entry.cli_names) names += (names.empty() ? "" : ", ") + alias;
      continue;
    }
    names += (names.empty() ? "" : ", ") + entry.name;
    for (const auto& alias : entry.cli_names) names += ", " + alias;
  }
  return names;
}

const std::vector<std::string>& analysis_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list = {"none"};
    for (const auto& entry : analysis_registry())
      if (!entry.label.empty()) list.push_back(entry.name);
    return list;
  }();
  return names;
}

std::string analysis_help() {
  std::string help;
  for (const auto& entry : analysis_registry())
    if (!entry.label.empty()) help += (help.empty() ? "" : ", ") + entry.name + " (" + entry.help + ")";
  return help;
}

void add_analysis_options(std::vector<OptionSpec>& options) {
  // Options several analyses share (a folder of images) are declared by each and listed once.
  for (const auto& entry : analysis_registry())
    for (const auto& option : entry.options)
      if (std::none_of(options.begin(), options.end(),
                       [&](const OptionSpec& known) { return known.name == option.name; }))
        options.push_back(option);
}

}  // namespace attnscope
