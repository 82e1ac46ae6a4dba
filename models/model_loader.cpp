#include "models/model_loader.h"

#include "core/assets.h"
#include "core/excerpt.h"
#include "core/json_checked.h"
#include "models/checkpoint_keys.h"
#include "models/checkpoint_layouts.h"
#include "models/clip_text_checkpoint.h"
#include "models/finite_checks.h"
#include "models/model_families.h"
#include "models/model_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace attnscope {

std::string LoadReport::describe() const {
  std::ostringstream out;
  auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out << items.size() << " " << what << ": ";
    for (size_t i = 0; i < items.size() && i < 6; ++i) out << (i ? ", " : "") << items[i];
    if (items.size() > 6) out << ", ...";
    out << "; ";
  };
  list("missing", missing);
  list("unexpected", unexpected);
  list("mis-shaped", misshaped);
  std::string text = out.str();
  if (text.size() >= 2) text.resize(text.size() - 2);
  return text;
}

void copy_weights(torch::nn::Module& model, const Checkpoint& checkpoint, LoadReport& report) {
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  auto copy_one = [&](const std::string& name, torch::Tensor& target, bool optional) {
    auto it = checkpoint.tensors.find(name);
    if (it == checkpoint.tensors.end()) {
      if (!optional) report.missing.push_back(name);
      return;
    }
    used.insert(name);
    if (!it->second.sizes().equals(target.sizes())) {
      report.misshaped.push_back(name + ": file " + shape_text(it->second.sizes()) + " vs model " +
                                 shape_text(target.sizes()));
      return;
    }
    target.copy_(it->second.to(target.dtype()));
  };
  for (auto& item : model.named_parameters()) copy_one(item.key(), item.value(), false);
  for (auto& item : model.named_buffers()) {
    // BatchNorm's batch counter does not change inference.
    const bool optional =
        item.key().size() >= 19 && item.key().compare(item.key().size() - 19, 19, "num_batches_tracked") == 0;
    copy_one(item.key(), item.value(), optional);
  }
  for (const auto& entry : checkpoint.tensors)
    if (!used.count(entry.first)) report.unexpected.push_back(entry.first);
}

namespace {

// A TorchScript archive without attnscope's metadata can still hold weights attnscope runs
// natively (OpenAI's released CLIP files): its parameters are read, its forward never runs.
Checkpoint read_weights(const std::string& file) {
  if (is_shard_index(file)) return load_sharded_safetensors(file);
  if (!is_torchscript_archive(file)) return load_checkpoint(file);
  Checkpoint checkpoint;
  checkpoint.format = "torchscript-weights";
  checkpoint.tensors = scripted_state_dict(file);
  if (!checkpoint.tensors.count("visual.conv1.weight"))
    throw CheckpointError(file +
                          ": a TorchScript file without attnscope.json; export the model with "
                          "scripts/export_torchscript.py (see its --help for what a model must satisfy)");
  return checkpoint;
}

// The checks --mean and --std get, for the values a checkpoint or its config declares: every mean
// finite, every std finite and positive (a channel is divided by it). Throws std::invalid_argument
// naming `source` and the option that overrides it.
void check_declared_normalization(const std::array<float, 3>& mean, const std::array<float, 3>& std,
                                  const std::string& source) {
  auto text = [](const std::array<float, 3>& values) {
    std::ostringstream out;
    out << values[0] << "," << values[1] << "," << values[2];
    return out.str();
  };
  for (float value : mean)
    if (!std::isfinite(value))
      throw std::invalid_argument(source + " declares mean " + text(mean) +
                                  ": every value must be a finite number (--mean R,G,B overrides it)");
  for (float value : std)
    if (!(std::isfinite(value) && value > 0))
      throw std::invalid_argument(source + " declares std " + text(std) +
                                  ": every value must be positive, a channel is divided by it (--std R,G,B "
                                  "overrides it)");
}

// What the file (or the config beside it) declares about its input, for every family alike.
void adopt_declared_preprocessing(const LayoutFacts& layout, LoadedModel& loaded) {
  if (!layout.normalization_source.empty())
    check_declared_normalization(layout.mean, layout.std, layout.normalization_source);
  loaded.normalization.mean = layout.mean;
  loaded.normalization.std = layout.std;
  loaded.normalization_source =
      layout.normalization_source.empty() ? "ImageNet (timm default)" : layout.normalization_source;
  loaded.declared.normalization = loaded.normalization;
  loaded.declared.normalization_source = loaded.normalization_source;
  loaded.declared.resize = layout.resize;
  loaded.declared.crop_pct = layout.crop_pct;
  loaded.declared.interpolation = layout.interpolation;
  loaded.declared.source = layout.preprocessing_source;
}

LoadedModel load_scripted_model(const std::string& path, const std::string& file, torch::Device device) {
  LoadedModel loaded;
  loaded.path = path;
  loaded.format = "torchscript";
  auto scripted = std::make_shared<ScriptedModel>(file, device);
  loaded.backbone = scripted;
  loaded.class_names = scripted->class_names();
  loaded.normalization.mean = scripted->mean();
  loaded.normalization.std = scripted->std();
  loaded.normalization_source = "attnscope.json";
  check_declared_normalization(loaded.normalization.mean, loaded.normalization.std, "attnscope.json");
  loaded.declared.normalization = loaded.normalization;
  loaded.declared.normalization_source = loaded.normalization_source;
  loaded.device = device;
  loaded.parameter_count = scripted->parameter_count();
  loaded.text_tower_absent =
      "this file has no text tower: a TorchScript file exported by attnscope holds an image model alone";
  loaded.report.notes.push_back("TorchScript file '" + scripted->name() +
                                "': " + std::to_string(scripted->layers().size()) +
                                " attention layers report their probabilities; variant swaps, f_p and Grad-CAM "
                                "need a model attnscope implements natively");
  return loaded;
}

}  // namespace

ClipTextTowerImpl& LoadedModel::text(const std::string& what) const {
  if (text_tower.is_empty()) throw std::invalid_argument(what + " needs CLIP's text tower; " + text_tower_absent);
  return *text_tower.ptr();
}

Backbone& LoadedModel::native(const std::string& what) {
  if (is_scripted())
    throw std::invalid_argument(what +
                                " needs q, k and the activations of a model attnscope implements natively; a "
                                "TorchScript file reports only its attention probabilities");
  return *backbone;
}

VisionTransformerImpl& LoadedModel::vit() const {
  auto* model = dynamic_cast<VisionTransformerImpl*>(backbone.get());
  if (!model) throw std::invalid_argument("a " + backbone->family() + " model is not a ViT");
  return *model;
}

const VitArch& LoadedModel::vit_arch() const {
  // A TorchScript file describes its token layout with the same fields.
  if (auto* scripted = dynamic_cast<const ScriptedModel*>(backbone.get())) return scripted->arch();
  return vit().arch();
}

namespace {

// A training checkpoint with several weight sets: the one the family's paper reports (L2ViT:
// model_ema), reloaded when the reader chose another; says which in the notes.
std::vector<std::string> adopt_preferred_container(Checkpoint& checkpoint, const std::string& file) {
  const std::vector<std::string>& order = family_for(checkpoint).containers;
  auto held = [&](const std::string& key) {
    return std::find(checkpoint.containers.begin(), checkpoint.containers.end(), key) != checkpoint.containers.end();
  };
  auto preferred = std::find_if(order.begin(), order.end(), held);
  if (preferred == order.end()) return {};
  std::string others;
  for (const std::string& key : checkpoint.containers)
    if (key != *preferred && (key == "model" || key == "model_ema" || key == "state_dict" || key == "state_dict_ema"))
      others += (others.empty() ? "" : ", ") + ("'" + key + "'");
  if (*preferred != checkpoint.container_key) checkpoint = load_checkpoint(file, *preferred);
  return {"weights from '" + *preferred + "'" +
          (*preferred == "model_ema" ? " (the EMA weights the paper reports)" : "") +
          (others.empty() ? "" : "; the file also holds " + others)};
}

// The text tower of a CLIP file beside its visual tower: a file whose text tower cannot be read
// still opens for the image analyses, with a warning, and the reason kept for what needs the text.
void attach_text_tower(ClipTextSource source, const std::string& path, LoadedModel& loaded) {
  if (source.checkpoint.tensors.empty()) {
    loaded.text_tower_absent = source.absent;
    return;
  }
  const auto* vit = dynamic_cast<const VisionTransformerImpl*>(loaded.backbone.get());
  try {
    if (!vit || vit->arch().output_kind != OutputKind::Embedding)
      throw CheckpointError(
          "the visual tower has no projection to the joint embedding space (" +
          std::string(source.layout == CheckpointLayout::HfClip ? "visual_projection.weight" : "visual.proj") +
          " missing)");
    ClipTextLoad load = load_clip_text_tower(std::move(source), path, vit->arch().num_classes);
    loaded.report.notes.insert(loaded.report.notes.end(), load.notes.begin(), load.notes.end());
    loaded.report.warnings.insert(loaded.report.warnings.end(), load.warnings.begin(), load.warnings.end());
    loaded.report.assumed.insert(loaded.report.assumed.end(), load.assumed.begin(), load.assumed.end());
    loaded.text_tower = load.tower;
    loaded.text_tower->to(loaded.device);
  } catch (const CheckpointError& e) {
    loaded.text_tower_absent = std::string("this file's text tower cannot be used: ") + e.what();
    loaded.report.warnings.push_back(loaded.text_tower_absent + " (the image analyses are unaffected)");
  }
}

}  // namespace

LoadedModel load_model(const std::string& given, const ArchOverrides& overrides, torch::Device device) {
  // hf-hub:, local-dir: and the caches' bare names become the snapshot or file they name.
  const ModelSource source = resolve_model_source(given);
  const std::string& path = source.path;
  const std::string file = resolve_weights_file(path);
  if (is_torchscript_archive(file) && has_attnscope_metadata(file)) {
    LoadedModel scripted = load_scripted_model(path, file, device);
    scripted.source = source;
    return scripted;
  }
  Checkpoint checkpoint = read_weights(file);
  const std::vector<std::string> container_notes = adopt_preferred_container(checkpoint, file);
  ClipTextSource text = take_clip_text_tensors(checkpoint);
  if (checkpoint.tensors.empty() && !text.checkpoint.tensors.empty())
    throw CheckpointError(path +
                          ": a CLIP text tower alone, without the visual tower; attnscope opens image models (load "
                          "the full CLIP file)");
  LoadedModel loaded;
  loaded.path = path;
  loaded.source = source;
  loaded.format = checkpoint.format;
  loaded.container_key = checkpoint.container_key;
  loaded.metadata = checkpoint.metadata;
  const LayoutFacts layout = adopt_known_layout(checkpoint, path);
  loaded.report.notes = source.notes;
  loaded.report.notes.insert(loaded.report.notes.end(), layout.notes.begin(), layout.notes.end());
  loaded.report.notes.insert(loaded.report.notes.end(), container_notes.begin(), container_notes.end());
  const BackboneFamily& family = family_for(checkpoint);
  const ArchConfig config = gather_arch_config(family, checkpoint, file, overrides);
  loaded.report.notes.insert(loaded.report.notes.end(), config.notes.begin(), config.notes.end());
  loaded.architecture = config.architecture;
  FamilyInput input{checkpoint, config.values, config.sources, layout, loaded.report.notes, loaded.report.assumed};
  // The family's sizes are judged before the model is built: nothing is allocated beyond the bounds.
  auto model = family.infer(input).build();
  loaded.backbone = model;
  copy_weights(*model, checkpoint, loaded.report);
  if (!loaded.report.ok())
    throw CheckpointError(path + ": weights do not fit the inferred " + model->family() +
                          " architecture: " + loaded.report.describe());
  if (const auto names = non_finite_tensors(checkpoint.tensors); !names.empty())
    loaded.report.warnings.push_back("the checkpoint's " + describe_non_finite(names));
  adopt_declared_preprocessing(layout, loaded);
  const int classes = model->num_classes();
  std::string unused_names;
  loaded.class_names = classes > 0 && layout.class_names.size() == size_t(classes)
                           ? layout.class_names
                           : class_names_for(loaded, &unused_names);
  if (!unused_names.empty()) loaded.report.warnings.push_back(unused_names);
  model->eval();
  model->to(device);
  loaded.device = device;
  loaded.parameter_count = model->parameter_count();
  attach_text_tower(std::move(text), path, loaded);
  return loaded;
}

std::vector<std::string> class_names_for(const LoadedModel& model, std::string* unused) {
  auto it = model.metadata.find("class_names");
  if (it != model.metadata.end()) {
    nlohmann::json parsed;
    try {
      parsed = parse_json_checked(it->second, "metadata class_names");
    } catch (const std::invalid_argument&) {
      parsed = nullptr;  // unusable names: the outputs are numbered instead
    }
    if (parsed.is_array() && int(parsed.size()) == model.num_classes()) {
      std::vector<std::string> names;
      for (const auto& name : parsed)
        names.push_back(name.is_string() ? excerpt(name.get<std::string>()) : "class " + std::to_string(names.size()));
      return names;
    }
    // Dropped names are said (they were dropped in silence): the outputs are numbered instead.
    if (unused)
      *unused = "the file's class_names metadata " +
                (parsed.is_array() ? "lists " + std::to_string(parsed.size()) + " names for " +
                                         std::to_string(model.num_classes()) + " classes"
                                   : std::string("is not a JSON list of names")) +
                ": not used, the classes are numbered";
  }
  if (model.num_classes() == 1000) return read_class_names(asset_path("imagenet1k_classes.txt"));
  return {};
}

std::string output_name(const LoadedModel& model, int index) {
  const std::string kind = to_string(model.output_kind());
  if (index < 0) return "norm of the " + kind;
  if (model.output_kind() != OutputKind::Logits) return kind + " dim " + std::to_string(index);
  return index < int(model.class_names.size()) ? model.class_names[size_t(index)] : "class " + std::to_string(index);
}

torch::Device resolve_device(const std::string& name) {
  if (name.empty() || name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::kCPU;
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw std::invalid_argument("--device cuda: this LibTorch build has no CUDA or no GPU is visible");
    return torch::Device(name);
  }
  throw std::invalid_argument("unknown device '" + excerpt(name) + "' (expected auto, cpu or cuda)");
}

}  // namespace attnscope
