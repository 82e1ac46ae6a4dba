// What a gradient method explains (`--target`): a class logit, CLIP's logit of the image and a
// prompt, the cosine similarity of the output embedding to another image's, or the output's L2
// norm. The kinds are one table (target_kinds()): each parses its argument once at the edge into a
// TargetSpec, resolves it against the loaded model into an AttributionTarget that target_scores
// differentiates, and describes it for summaries and titles. A new kind is one entry.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/image.h"
#include "models/attention_settings.h"
#include "models/backbone.h"

namespace attnscope {

struct LoadedModel;

// Each kind's name and parse are its entry in target_kinds().
enum class TargetKind { Class, Text, Image, Norm };

// `--target` as parsed where it enters (the CLI, a session file, a widget): the kind and its typed
// argument. Sessions save it as to_string writes it.
struct TargetSpec {
  TargetKind kind = TargetKind::Class;
  int class_index = -1;    // class: C >= 0; -1 the default (the top-1 class; the norm without classes)
  std::string prompt;      // text: the prompt, UTF-8
  std::string image_file;  // image: the other image's path

  static TargetSpec of_class(int index);
  bool is_default() const { return kind == TargetKind::Class && class_index < 0; }
  bool operator==(const TargetSpec& other) const;
};
// "class:C", "text:PROMPT", "image:FILE" or "norm"; throws std::invalid_argument naming --target.
TargetSpec parse_target_spec(const std::string& text);
std::string to_string(const TargetSpec& spec);  // what parse_target_spec reads back

// What a target is resolved against: the loaded model (its text tower for text targets) and how
// the input image was prepared and run (image targets run another image the same way).
struct TargetContext {
  LoadedModel& model;
  InputSettings input;
  AttentionSettings attention;
  int64_t max_pixels = kDefaultMaxPixels;
};

// A resolved target: what target_scores differentiates.
struct AttributionTarget {
  TargetKind kind = TargetKind::Class;
  int index = -1;                   // Class: the class or output dimension; -1 before the top-1 is chosen
  torch::Tensor direction;          // Text, Image: the unit vector [K] (CPU float32) the output's cosine is taken with
  double scale = 1.0;               // Text: logit_scale.exp() (the cosine times it is CLIP's logit); Image: 1
  double bias = 0.0;                // Text: SigLIP's logit_bias, added to the logit (CLIP: 0)
  std::string text_model = "CLIP";  // Text: whose logit it is ("CLIP", "SigLIP": sigmoid scores)
  std::string chosen;               // "given", "top-1", "output norm", "text" or "image"
  TargetSpec spec;                  // as requested
  int64_t prompt_tokens = 0;        // Text: the prompt's tokens with the start and end tokens
  std::string tokenizer;            // Text: the vocabulary's file(s)

  bool norm() const { return kind == TargetKind::Norm; }
  bool is_cosine() const { return kind == TargetKind::Text || kind == TargetKind::Image; }
};

// One kind of target: its name (before the colon), its argument's name for help, how the argument
// becomes the spec's typed value, how the spec resolves against a model, and its description.
struct TargetKindEntry {
  TargetKind kind;
  std::string name;
  std::string argument;  // "C", "PROMPT", "FILE"; empty: the kind takes none
  std::string help;
  std::function<void(const std::string& argument, TargetSpec& spec)> parse;  // throws std::invalid_argument
  std::function<std::string(const TargetSpec& spec)> argument_text;          // what parse reads back
  std::function<AttributionTarget(const TargetSpec& spec, const TargetContext& context)> resolve;
  std::function<std::string(const AttributionTarget& target)> describe;  // "the CLIP logit of 'a dog'"
};
const std::vector<TargetKindEntry>& target_kinds();
const TargetKindEntry& target_kind(TargetKind kind);
std::string target_kinds_text();  // "class:C | text:PROMPT | image:FILE | norm"

// The spec against the model: a class spec as it is (its top-1 is chosen per image by
// resolve_target), a text spec through the model's text tower and CLIP's tokenizer, an image spec
// through the model on the other image. Throws std::invalid_argument naming what is missing.
AttributionTarget resolve_target_spec(const TargetSpec& spec, const TargetContext& context);

// The class target a class spec resolves to, for callers that choose the class themselves (eval's
// labels): -1 the top-1 class (the norm without classes).
AttributionTarget class_target(int index);

// Throws std::invalid_argument ("--class C: the model has K classes") for a class the model does
// not have.
void check_target(const Backbone& model, const AttributionTarget& requested);

// The target for `requested` given the output row [K] of the unperturbed image: the top-1 class
// (or the norm without classes) for the default; the others checked against the row's width.
AttributionTarget resolve_target(const Backbone& model, const AttributionTarget& requested,
                                 const torch::Tensor& output_row);

// The differentiated score per batch item: outputs [B, K] -> [B]: a logit or output dimension, the
// norm, or scale * cos(output, direction) (CLIP's logits_per_image for a text target,
// pytorch-grad-cam's SimilarityToConceptTarget for an image target).
torch::Tensor target_scores(const torch::Tensor& outputs, const AttributionTarget& target);

// In words, for titles and summaries: "class 3", "the output norm", "the CLIP logit of 'a dog'".
std::string describe(const AttributionTarget& target);

}  // namespace attnscope
