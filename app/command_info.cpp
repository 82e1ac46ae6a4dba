// `attnscope info`: what attnscope reads from a checkpoint, before running anything.
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/commands.h"
#include "core/json_checked.h"
#include "models/model_loader.h"

namespace attnscope {

CommandSyntax info_syntax() {
  return {"attnscope info --model FILE [--arch heads=1/2/5/8] [--config FILE]",
          {"model", "arch", "config"},
          {{"json", "", "print the architecture as JSON", ""}}};
}

int info_command(const Args& args) {
  auto parsed = parse_or_print_help(args, info_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  if (line.state.model.empty()) throw std::invalid_argument("--model is required");
  const LoadedModel model = load_model(line.state.model, line.state.arch_overrides(), torch::kCPU);
  if (!line.flags["json"].empty()) {
    nlohmann::json json = {{"model", model.path},
                           {"format", model.format},
                           {"container", model.container_key},
                           {"parameters", model.parameter_count},
                           {"architecture", model.backbone->describe()},
                           {"normalization",
                            {{"mean", model.normalization.mean},
                             {"std", model.normalization.std},
                             {"source", model.normalization_source}}},
                           {"registered_name", model.architecture},
                           {"model_source", model.source.to_json()},
                           {"assumed", assumed_json(model.report.assumed)},
                           {"notes", model.report.notes},
                           {"warnings", model.report.warnings}};
    std::cout << json_text(json) << "\n";
    return 0;
  }
  const Backbone& backbone = *model.backbone;
  const InputGeometry geometry = backbone.input_geometry();
  std::cout << (model.source.kind == "path" || model.source.given.empty() ? model.path : model.source.given) << " ("
            << model.format << (model.container_key.empty() ? "" : ", under '" + model.container_key + "'") << ")\n"
            << "  family        " << backbone.family() << "\n"
            << "  input         " << geometry.native_height << "x" << geometry.native_width << " native"
            << (geometry.fixed ? ", that size only" : ", sides multiples of " + std::to_string(geometry.multiple))
            << "\n"
            << "  output        "
            << (backbone.output_kind() == OutputKind::Logits ? std::to_string(backbone.num_classes()) + " classes"
                                                             : to_string(backbone.output_kind()) + ", no classes")
            << "\n"
            << "  normalise     mean " << model.normalization.mean[0] << "," << model.normalization.mean[1] << ","
            << model.normalization.mean[2] << " std " << model.normalization.std[0] << "," << model.normalization.std[1]
            << "," << model.normalization.std[2] << " (" << model.normalization_source << ")\n";
  for (const auto& line : backbone.summary_lines()) std::cout << "  " << line << "\n";
  std::cout << "  parameters    " << model.parameter_count << "\n";
  if (!model.architecture.empty()) std::cout << "  registered    " << model.architecture << "\n";
  if (model.source.kind == "hf-hub")
    std::cout << "  source        hf-hub " << model.source.repo << " @ " << model.source.revision << " = "
              << model.source.commit << "\n";
  for (const auto& assumed : model.report.assumed) std::cout << "  assumed: " << assumed.describe() << "\n";
  for (const auto& note : model.report.notes) std::cout << "  note: " << note << "\n";
  print_warnings("info", model.report.warnings);
  return 0;
}

}  // namespace attnscope
