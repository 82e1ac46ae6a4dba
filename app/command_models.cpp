// `attnscope models`: what the caches on this machine hold and whether attnscope opens each.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/json_checked.h"
#include "models/model_scan.h"
#include "models/model_source.h"

namespace attnscope {

namespace {

constexpr size_t kMaxListed = 10000;

std::string size_text(std::uintmax_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= (std::uintmax_t(1) << 30))
    out << double(bytes) / double(std::uintmax_t(1) << 30) << " GiB";
  else
    out << double(bytes) / double(1 << 20) << " MiB";
  return out.str();
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
  if (!parsed->flags["json"].empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const CachedModel& model : models) list.push_back(model.to_json());
    nlohmann::json out = {
        {"hf_hub_cache", hf_hub_cache_root()}, {"torch_hub_checkpoints", torch_hub_checkpoints()}, {"models", list}};
    if (left_out > 0) out["left_out"] = left_out;
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::cout << "Hugging Face cache: " << hf_hub_cache_root() << "\ntorch.hub checkpoints: " << torch_hub_checkpoints()
            << "\n";
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
