// `attnscope models`: what the caches on this machine hold and whether attnscope opens each.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "models/model_scan.h"
#include "models/model_source.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxListed = 10000;

std::string size_text(std::uintmax_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= (std::uintmax_t(1) << 30))
    out << double(bytes) / double(std::uintmax_t(1) << 30) << " GiB";
  else if (bytes >= (1 << 20))
    out << double(bytes) / double(1 << 20) << " MiB";
  else if (bytes >= (1 << 10))
    out << double(bytes) / double(1 << 10) << " KiB";
  else
    out << bytes << " bytes";
  return out.str();
}

// A cache root that is no folder (a vanished disk, a variable naming a file) is said, not listed as empty.
std::string folder_problem(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) return "";
  if (fs::exists(path, error)) return "not a folder";
  return error && error != std::errc::no_such_file_or_directory ? error.message() : "no such folder";
}

}  // namespace

CommandSyntax models_syntax() {
  return {"attnscope models [--json]",
          {},
          {{"json", "", "print the list as JSON", ""}},
          "Lists the Hugging Face cache (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, "
          "$XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub) and torch.hub's checkpoints "
          "($TORCH_HOME/hub/checkpoints): each repo's refs, snapshots and size, and whether attnscope opens it, as "
          "which family, judged from its safetensors headers and configs (no weights are read). Give a listed name "
          "to --model."};
}

int models_command(const Args& args) {
  auto parsed = parse_or_print_help(args, models_syntax());
  if (!parsed) return 0;
  size_t left_out = 0;
  const std::vector<CachedModel> models = scan_model_caches(kMaxListed, &left_out);
  const auto [hub_root, hub_origin] = hf_hub_cache_root_and_origin();
  const std::string hub_problem = folder_problem(hub_root), torch_problem = folder_problem(torch_hub_checkpoints());
  if (!parsed->flags["json"].empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const CachedModel& model : models) list.push_back(model.to_json());
    nlohmann::json out = {{"hf_hub_cache", hub_root},
                          {"hf_hub_cache_from", hub_origin},
                          {"torch_hub_checkpoints", torch_hub_checkpoints()},
                          {"models", list}};
    if (!hub_problem.empty()) out["hf_hub_cache_problem"] = hub_problem;
    if (!torch_problem.empty()) out["torch_hub_checkpoints_problem"] = torch_problem;
    if (left_out > 0) out["left_out"] = left_out;
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::cout << "Hugging Face cache: " << excerpt(hub_root, 4096) << " (from " << hub_origin
            << (hub_problem.empty() ? "" : "; " + hub_problem)
            << ")\ntorch.hub checkpoints: " << excerpt(torch_hub_checkpoints(), 4096)
            << (torch_problem.empty() ? "" : " (" + torch_problem + ")") << "\n";
  if (models.empty()) std::cout << "no models in either cache\n";
  for (const CachedModel& model : models) {
    std::cout << "\n" << model.name << "  (" << size_text(model.bytes) << ")\n";
    for (const auto& [ref, commit] : model.refs) std::cout << "  refs/" << ref << " = " << commit << "\n";
    if (model.kind == "hf-hub" && model.snapshots.size() > model.refs.size())
      std::cout << "  " << model.snapshots.size() << " snapshots\n";
    if (!model.opens.empty())
      std::cout << "  opens as " << model.opens << "\n";
    else
      std::cout << "  " << model.why_not << "\n";
  }
  if (left_out > 0) std::cout << "\n" << left_out << " more not listed (at most " << kMaxListed << ")\n";
  return 0;
}

}  // namespace attnscope
