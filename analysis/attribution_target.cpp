#include "analysis/attribution_target.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "core/clip_tokenizer.h"
#include "core/excerpt.h"
#include "core/unicode_text.h"
#include "models/clip_text.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "models/text_tokenizer.h"

namespace attnscope {

namespace {

int parse_class_argument(const std::string& text) {
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < -1 || value > 1'000'000'000)
    throw std::invalid_argument("--target class:C expects a class index >= 0 (or -1 for the top-1 class), got '" +
                                excerpt(text) + "'");
  return int(value);
}

// A unit vector [K] from an embedding, refused when it has no direction.
torch::Tensor unit_direction(const torch::Tensor& embedding, const std::string& what) {
  const torch::Tensor row = embedding.detach().to(torch::kCPU, torch::kFloat).reshape({-1});
  const double length = row.norm().item<double>();
  if (!std::isfinite(length) || length == 0.0)
    throw std::invalid_argument(what + " has no direction (its embedding's norm is " + std::to_string(length) + ")");
  return row / length;
}

AttributionTarget resolve_class(const TargetSpec& spec, const TargetContext& context) {
  const AttributionTarget target = class_target(spec.class_index);
  check_target(*context.model.backbone, target);
  return target;
}

AttributionTarget resolve_text(const TargetSpec& spec, const TargetContext& context) {
  const std::string what = "--target text:";
  ClipTextTowerImpl& tower = context.model.text(what);
  torch::Tensor ids;
  AttributionTarget target;
  try {
    const auto tokenizer = text_tokenizer_for(context.model.path, tower.arch());
    // The tower's own context where it is shorter than CLIP's 77, as zero-shot tokenizes (issue 60).
    ids = tokenizer->tokenize_tensor({spec.prompt}, text_context_length(tower.arch()));
    target.tokenizer = tokenizer->vocabulary_source();
    target.prompt_tokens = tokenizer->prompt_tokens(ids[0]);
  } catch (const ClipTokenizerError& error) {
    throw std::invalid_argument(what + " " + error.what());
  }
  target.kind = TargetKind::Text;
  target.spec = spec;
  torch::NoGradGuard no_grad;
  const torch::Tensor embedding = tower.encode_text(ids.to(tower.text_projection.device()));
  target.direction = unit_direction(embedding[0], "the prompt '" + excerpt(spec.prompt, 60) + "'");
  target.scale = tower.logit_scale.detach().to(torch::kCPU, torch::kDouble).exp().item<double>();
  target.bias = tower.logit_bias.defined() ? tower.logit_bias.detach().to(torch::kCPU).item<double>() : 0.0;
  target.text_model = tower.arch().scores == TextScores::Sigmoid ? "SigLIP" : "CLIP";
  target.chosen = "text";
  return target;
}

AttributionTarget resolve_image(const TargetSpec& spec, const TargetContext& context) {
  const std::string what = "--target image:" + excerpt(spec.image_file);
  RgbImage rgb;
  try {
    rgb = load_image_rgb(spec.image_file, context.max_pixels);
  } catch (const std::exception& error) {
    throw std::invalid_argument(what + ": " + one_line(error.what()));
  }
  const RgbImage prepared = prepare_model_input(rgb, context.input, context.model);
  torch::Tensor output;
  {
    c10::InferenceMode inference;
    ForwardOptions plain;
    plain.capture = false;
    const torch::Tensor input = image_to_tensor(prepared, context.model.normalization).to(context.model.device);
    output = context.model.forward(input, context.attention, plain).logits[0];
  }
  AttributionTarget target;
  target.kind = TargetKind::Image;
  target.spec = spec;
  target.direction = unit_direction(output, what);
  target.chosen = "image";
  return target;
}

}  // namespace

TargetSpec TargetSpec::of_class(int index) {
  TargetSpec spec;
  spec.class_index = index < 0 ? -1 : index;
  return spec;
}

bool TargetSpec::operator==(const TargetSpec& other) const {
  return kind == other.kind && class_index == other.class_index && prompt == other.prompt &&
         image_file == other.image_file;
}

const std::vector<TargetKindEntry>& target_kinds() {
  static const std::vector<TargetKindEntry> kinds = [] {
    std::vector<TargetKindEntry> all;
    all.push_back(
        {TargetKind::Class, "class", "C",
         "the logit of class C (-1: the top-1 class); on models without classes output dimension C (-1: "
         "the output's norm)",
         [](const std::string& argument, TargetSpec& spec) { spec.class_index = parse_class_argument(argument); },
         [](const TargetSpec& spec) { return std::to_string(spec.class_index); }, resolve_class,
         [](const AttributionTarget& target) {
           return target.index < 0 ? std::string("the top-1 class") : "class " + std::to_string(target.index);
         }});
    all.push_back({TargetKind::Text, "text", "PROMPT",
                   "CLIP's logit of the image and PROMPT (logit_scale.exp() times the cosine of the image and text "
                   "embeddings, as logits_per_image; SigLIP's plus logit_bias); needs a CLIP or SigLIP file with its "
                   "text tower",
                   [](const std::string& argument, TargetSpec& spec) {
                     if (argument.find_first_not_of(" \t\r\n") == std::string::npos)
                       throw std::invalid_argument("--target text:PROMPT needs a prompt, got an empty one");
                     if (!decode_utf8(argument))
                       throw std::invalid_argument("--target text: the prompt is not valid UTF-8");
                     spec.prompt = argument;
                   },
                   [](const TargetSpec& spec) { return spec.prompt; }, resolve_text,
                   [](const AttributionTarget& target) {
                     return "the " + target.text_model + " logit of '" + excerpt(target.spec.prompt, 60) + "'";
                   }});
    all.push_back({TargetKind::Image, "image", "FILE",
                   "the cosine similarity of the output embedding to FILE's (prepared as the input, through the same "
                   "model)",
                   [](const std::string& argument, TargetSpec& spec) {
                     if (argument.empty())
                       throw std::invalid_argument("--target image:FILE needs a file, got an empty path");
                     spec.image_file = argument;
                   },
                   [](const TargetSpec& spec) { return spec.image_file; }, resolve_image,
                   [](const AttributionTarget& target) {
                     return "the cosine similarity to " +
                            std::filesystem::path(target.spec.image_file).filename().string();
                   }});
    all.push_back({TargetKind::Norm, "norm", "", "the output's L2 norm", [](const std::string&, TargetSpec&) {},
                   [](const TargetSpec&) { return std::string(); },
                   [](const TargetSpec& spec, const TargetContext&) {
                     AttributionTarget target;
                     target.kind = TargetKind::Norm;
                     target.spec = spec;
                     target.chosen = "output norm";
                     return target;
                   },
                   [](const AttributionTarget&) { return std::string("the output norm"); }});
    return all;
  }();
  return kinds;
}

const TargetKindEntry& target_kind(TargetKind kind) {
  for (const TargetKindEntry& entry : target_kinds())
    if (entry.kind == kind) return entry;
  throw std::logic_error("target_kind: a kind without an entry");
}

std::string target_kinds_text() {
  std::string text;
  for (const TargetKindEntry& entry : target_kinds())
    text += (text.empty() ? "" : " | ") + entry.name + (entry.argument.empty() ? "" : ":" + entry.argument);
  return text;
}

TargetSpec parse_target_spec(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  for (const TargetKindEntry& entry : target_kinds()) {
    if (entry.name != name) continue;
    const bool has_argument = colon != std::string::npos;
    if (entry.argument.empty() && has_argument)
      throw std::invalid_argument("--target " + entry.name + " takes no argument, got '" + excerpt(text) + "'");
    if (!entry.argument.empty() && !has_argument)
      throw std::invalid_argument("--target " + entry.name + " needs its argument: " + entry.name + ":" +
                                  entry.argument);
    TargetSpec spec;
    spec.kind = entry.kind;
    entry.parse(has_argument ? text.substr(colon + 1) : std::string(), spec);
    return spec;
  }
  throw std::invalid_argument("--target: unknown target '" + excerpt(text) + "' (expected " + target_kinds_text() +
                              ")");
}

std::string to_string(const TargetSpec& spec) {
  const TargetKindEntry& entry = target_kind(spec.kind);
  return entry.argument.empty() ? entry.name : entry.name + ":" + entry.argument_text(spec);
}

AttributionTarget resolve_target_spec(const TargetSpec& spec, const TargetContext& context) {
  return target_kind(spec.kind).resolve(spec, context);
}

AttributionTarget class_target(int index) {
  AttributionTarget target;
  target.spec = TargetSpec::of_class(index);
  target.index = target.spec.class_index;
  return target;
}

void check_target(const Backbone& model, const AttributionTarget& requested) {
  const int num_classes = model.num_classes();
  if (requested.kind == TargetKind::Class && model.output_kind() == OutputKind::Logits &&
      requested.index >= num_classes)
    throw std::invalid_argument("--class " + std::to_string(requested.index) + ": the model has " +
                                std::to_string(num_classes) + " classes (0.." + std::to_string(num_classes - 1) + ")");
}

AttributionTarget resolve_target(const Backbone& model, const AttributionTarget& requested,
                                 const torch::Tensor& output_row) {
  check_target(model, requested);
  AttributionTarget target = requested;
  const int64_t width = output_row.size(0);
  if (requested.is_cosine()) {
    if (!requested.direction.defined() || requested.direction.numel() != width)
      throw std::invalid_argument(describe(requested) + ": its embedding has " +
                                  std::to_string(requested.direction.defined() ? requested.direction.numel() : 0) +
                                  " values, this model's " + to_string(model.output_kind()) + " " +
                                  std::to_string(width));
    return target;
  }
  if (requested.kind != TargetKind::Class) return target;
  const bool has_classes = model.output_kind() == OutputKind::Logits;
  if (requested.index >= width)
    throw std::invalid_argument("--class " + std::to_string(requested.index) + ": the " +
                                to_string(model.output_kind()) + " has " + std::to_string(width) + " dimensions");
  if (requested.index >= 0) {
    target.chosen = "given";
  } else if (has_classes) {
    target.index = int(output_row.detach().argmax().item<int64_t>());
    target.chosen = "top-1";
  } else {
    target.kind = TargetKind::Norm;
    target.index = -1;
    target.chosen = "output norm";
  }
  return target;
}

torch::Tensor target_scores(const torch::Tensor& outputs, const AttributionTarget& target) {
  switch (target.kind) {
    case TargetKind::Class:
      if (target.index < 0) throw std::logic_error("target_scores: the class target was not resolved");
      return outputs.select(1, target.index);
    case TargetKind::Norm:
      return outputs.norm(2, {1});
    case TargetKind::Text:
    case TargetKind::Image: {
      // CLIP's image_features / image_features.norm(dim=1, keepdim=True), then the product with the
      // normalised other embedding, times logit_scale.exp() for a prompt.
      const torch::Tensor direction = target.direction.to(outputs.device(), outputs.scalar_type());
      return (outputs / outputs.norm(2, {1}, /*keepdim=*/true)).matmul(direction) * target.scale + target.bias;
    }
  }
  throw std::logic_error("target_scores: unknown kind");
}

std::string describe(const AttributionTarget& target) { return target_kind(target.kind).describe(target); }

}  // namespace attnscope
