#include "analysis/residual_stream.h"

#include "models/head_ablation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace attnscope {

using torch::indexing::Slice;

namespace {

torch::Tensor as_double(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kDouble); }

std::string gib(double bytes) {
  std::ostringstream text;
  text.precision(2);
  text << std::fixed << bytes / double(uint64_t(1) << 30) << " GiB";
  return text.str();
}

void check_record_size(const VisionTransformerImpl& model, const StreamRecording& recording, int64_t batch,
                       int64_t tokens, int records, const std::string& what) {
  const VitArch& arch = model.arch();
  bool local = false;
  for (const BlockArch& block : arch.blocks) local = local || block.local_concentration;
  const double bytes = records * record_bytes(recording, batch, tokens, arch.depth, arch.embed_dim, local);
  if (bytes > kMaxRecordBytes)
    throw std::invalid_argument(what + " would keep " + gib(bytes) + " of the residual stream (" +
                                std::to_string(arch.depth) + " blocks x " + std::to_string(tokens) + " tokens x " +
                                std::to_string(arch.embed_dim) + " channels), more than the " + gib(kMaxRecordBytes) +
                                " allowed: use a smaller input");
}

void check_image(const torch::Tensor& image, const std::string& what) {
  if (!image.defined() || image.dim() != 4 || image.size(0) != 1)
    throw std::invalid_argument(what + " must be one image [1, 3, H, W]");
}

// The tokens the read-out reads: the class token (and the distillation token when head_dist reads
// it), or the patch tokens of a pooled model.
std::vector<int64_t> readout_tokens(const VisionTransformerImpl& model, const TokenLayout& layout) {
  const VitArch& arch = model.arch();
  if (arch.pool == GlobalPool::Token) {
    if (!model.head_dist.is_empty()) return {0, 1};
    return {0};
  }
  std::vector<int64_t> patches;
  for (int64_t token = layout.prefix_tokens(); token < layout.total_tokens(); ++token) patches.push_back(token);
  return patches;
}

// Why the read-out is not a linear map of the final residual once its norm's scale is cached, or
// empty when it is.
std::string nonlinear_readout(const VisionTransformerImpl& model) {
  if (!model.pooler.is_empty())
    return "its output is the Hugging Face pooler's tanh(dense(class token)), which is not linear in the residual";
  if (!model.blocks_token_only->is_empty())
    return "its class token is computed after the blocks by class-attention blocks (CaiT's blocks_token_only: a "
           "softmax over the tokens, then an MLP), which are not linear in the residual";
  if (!model.attn_pool.is_empty())
    return "its features come from an attention-pool head (attn_pool: a softmax over the tokens, then an MLP), "
           "which is not linear in the residual";
  if (!model.norm.is_empty() && !model.fc_norm.is_empty())
    return "it has two LayerNorms in sequence (norm, then fc_norm on the pooled features)";
  if (model.norm.is_empty() && model.fc_norm.is_empty())
    return "it has no final LayerNorm, whose cached scale the decomposition divides by";
  if (!model.fc_norm.is_empty() && !model.head_dist.is_empty())
    return "its distillation head reads a token without the fc_norm the class head reads through";
  return "";
}

void check_linear_readout(const VisionTransformerImpl& model, const std::string& what) {
  if (const std::string reason = nonlinear_readout(model); !reason.empty())
    throw std::invalid_argument(what + " needs a read-out that is linear once the final LayerNorm's scale is fixed: " +
                                reason + " (ablation and patching read the real output and apply to it)");
}

// A linear layer after the norm as [K, C] and [K] float64; without a head, the identity.
std::pair<torch::Tensor, torch::Tensor> head_matrix(const torch::nn::Linear& head, int64_t width) {
  if (head.is_empty()) return {torch::eye(width, torch::kDouble), torch::zeros({width}, torch::kDouble)};
  const torch::Tensor weight = as_double(head->weight);
  const torch::Tensor bias =
      head->bias.defined() ? as_double(head->bias) : torch::zeros({weight.size(0)}, torch::kDouble);
  return {weight, bias};
}

// The read-out as a linear map of the residual once the final norm's scales are those of the run:
// a component c [T, C] reads sum over slots of (sum_t weight_t c_t) . direction, and the biases
// read `constant`. Centring c_t before the dot product (apply_ln_to_stack) equals centring the
// direction, as fold_layer_norm's center_weights does to W_H.
struct ReadoutSlot {
  torch::Tensor token_weights;  // [T] float64: pooling share over the token's scale
  torch::Tensor direction;      // [C] float64, centred: norm weight times W^T t
};
struct LinearReadout {
  std::vector<ReadoutSlot> slots;
  double constant = 0.0;  // t . (head bias + W norm bias): the head bias term
};

LinearReadout linear_readout(const VisionTransformerImpl& model, const TokenLayout& layout,
                             const ResidualStreamRecord& record, const torch::Tensor& target) {
  const VitArch& arch = model.arch();
  const int64_t width = arch.embed_dim, tokens = layout.total_tokens();
  const bool final_norm = !model.norm.is_empty();
  const torch::nn::LayerNorm& norm = final_norm ? model.norm : model.fc_norm;
  const torch::Tensor gamma = as_double(norm->weight), beta = as_double(norm->bias);
  const torch::Tensor scale = as_double(final_norm ? record.final_scale[0] : record.pooled_scale[0].expand({tokens}));
  LinearReadout readout;
  auto add_slot = [&](const std::vector<int64_t>& slot_tokens, double share, const torch::nn::Linear& head) {
    const auto [weight, bias] = head_matrix(head, width);
    if (weight.size(0) != target.size(0))
      throw std::invalid_argument("the read-out direction has " + std::to_string(target.size(0)) +
                                  " values, the output " + std::to_string(weight.size(0)));
    const torch::Tensor back = gamma * torch::mv(weight.t(), target);
    ReadoutSlot slot;
    slot.direction = back - back.mean();
    slot.token_weights = torch::zeros({tokens}, torch::kDouble);
    for (int64_t token : slot_tokens) slot.token_weights[token] = share / scale[token].item<double>();
    readout.constant +=
        share * double(slot_tokens.size()) * (torch::dot(target, torch::mv(weight, beta) + bias)).item<double>();
    readout.slots.push_back(slot);
  };
  const std::vector<int64_t> read = readout_tokens(model, layout);
  if (read.size() == 2) {
    add_slot({0}, 0.5, model.head);
    add_slot({1}, 0.5, model.head_dist);
  } else {
    add_slot(read, 1.0 / double(read.size()), model.head);
  }
  return readout;
}

// Slot weights over the tokens a record kept (`kept`; empty: all).
torch::Tensor kept_weights(const torch::Tensor& weights, const std::vector<int64_t>& kept) {
  if (kept.empty()) return weights;
  const torch::Tensor index = torch::tensor(kept, torch::kLong);
  const torch::Tensor missing = weights.clone().index_fill_(0, index, 0.0);
  if (missing.ne(0).any().item<bool>())
    throw std::logic_error("the run did not record every token the read-out reads (readout_recording)");
  return weights.index_select(0, index);
}

// A component [1, T', C] read out.
double read_component(const LinearReadout& readout, const torch::Tensor& component, const std::vector<int64_t>& kept) {
  const torch::Tensor c = as_double(component[0]);
  double value = 0.0;
  for (const ReadoutSlot& slot : readout.slots)
    value += torch::dot(torch::mv(c.t(), kept_weights(slot.token_weights, kept)), slot.direction).item<double>();
  return value;
}

void check_recorded(const ResidualRun& run, int depth, bool components, const std::string& what) {
  const ResidualStreamRecord& record = run.record;
  bool complete = record.first_block == 0 && int(record.resid_pre.size()) == depth && record.resid_final.defined();
  for (int b = 0; complete && b < depth; ++b) {
    complete = record.resid_pre[size_t(b)].defined();
    if (components)
      complete = complete && record.attn_out[size_t(b)].defined() && record.mlp_out[size_t(b)].defined() &&
                 record.z[size_t(b)].defined();
  }
  if (!complete)
    throw std::logic_error(what + " needs a run that recorded every block" +
                           (components ? " (readout_recording)" : "'s input"));
  if (run.output.logits.size(0) != 1) throw std::logic_error(what + " reads a run of one image");
}

}  // namespace

VisionTransformerImpl& residual_stream_model(Backbone& backbone) {
  if (auto* vit = dynamic_cast<VisionTransformerImpl*>(&backbone)) return *vit;
  const std::string family = backbone.family();
  if (backbone.hierarchical())
    throw std::invalid_argument(
        family +
        " is hierarchical: its stages merge tokens (and its windows mix them within stages), so no one "
        "residual stream runs from the embedding to the read-out for direct logit attribution, the logit "
        "lens, head ablation or patching to follow. They run on ViT-shaped models: timm ViT/DeiT, Hugging "
        "Face ViT/DeiT, CLIP's visual tower, DINOv2");
  if (!backbone.computes_attention())
    throw std::invalid_argument(family +
                                " is a TorchScript file: it reports its attention probabilities but not its weights "
                                "or residual stream; open the checkpoint the file was traced from");
  throw std::invalid_argument(family + " has no residual stream attnscope can decompose");
}

// ---- Read-out targets ---------------------------------------------------------------------------

ReadoutTarget ReadoutTarget::of_class(int index) {
  ReadoutTarget target;
  target.class_index = index;
  return target;
}

ReadoutTarget ReadoutTarget::along(const torch::Tensor& direction) {
  ReadoutTarget target;
  target.kind = Kind::Direction;
  target.direction = direction.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
  return target;
}

ReadoutTarget ReadoutTarget::output_norm() {
  ReadoutTarget target;
  target.kind = Kind::OutputNorm;
  return target;
}

ReadoutTarget ReadoutTarget::from(const AttributionTarget& target) {
  switch (target.kind) {
    case TargetKind::Norm:
      return output_norm();
    case TargetKind::Text:
    case TargetKind::Image:
      // The direct read-outs are linear: a prompt or another image is read along its unit
      // embedding (the cosine's numerator); the cosine itself is not a sum of the components.
      return along(target.direction);
    case TargetKind::Class:
      break;
  }
  return of_class(target.index);
}

ReadoutTarget readout_for(const AttributionTarget& target, bool has_classes, const torch::Tensor& output_row) {
  if (target.kind != TargetKind::Class) return ReadoutTarget::from(target);
  if (target.index >= 0) return ReadoutTarget::of_class(target.index);
  if (!has_classes) return ReadoutTarget::output_norm();
  return ReadoutTarget::of_class(int(output_row.reshape({-1}).argmax().item<int64_t>()));
}

std::string ReadoutTarget::describe() const {
  switch (kind) {
    case Kind::Class:
      return "class " + std::to_string(class_index);
    case Kind::Direction:
      return "a direction";
    case Kind::OutputNorm:
      return "the output norm";
  }
  return "";
}

void ReadoutTarget::check(int64_t output_dim) const {
  if (kind == Kind::Class && (class_index < 0 || class_index >= output_dim))
    throw std::invalid_argument("class " + std::to_string(class_index) + ": the output has " +
                                std::to_string(output_dim) + " values (0.." + std::to_string(output_dim - 1) + ")");
  if (kind == Kind::Direction) {
    if (!direction.defined() || direction.numel() != output_dim)
      throw std::invalid_argument("the read-out direction has " +
                                  std::to_string(direction.defined() ? direction.numel() : 0) + " values, the output " +
                                  std::to_string(output_dim));
    if (!torch::isfinite(direction).all().item<bool>() || direction.norm().item<double>() == 0.0)
      throw std::invalid_argument("the read-out direction must be finite and not zero");
  }
}

double ReadoutTarget::read(const torch::Tensor& output_row) const {
  const torch::Tensor row = as_double(output_row).reshape({-1});
  check(row.numel());
  switch (kind) {
    case Kind::Class:
      return row[class_index].item<double>();
    case Kind::Direction:
      return torch::dot(row, direction).item<double>();
    case Kind::OutputNorm:
      return row.norm().item<double>();
  }
  return 0.0;
}

torch::Tensor ReadoutTarget::output_direction(const torch::Tensor& output_row) const {
  const torch::Tensor row = as_double(output_row).reshape({-1});
  check(row.numel());
  if (kind == Kind::Class)
    return torch::zeros({row.numel()}, torch::kDouble).index_fill_(0, torch::tensor({int64_t(class_index)}), 1.0);
  if (kind == Kind::Direction) return direction;
  const double norm = row.norm().item<double>();
  if (norm == 0.0) throw std::invalid_argument("the output is zero: its norm has no direction to decompose along");
  return row / norm;
}

double LogitDifference::of(const torch::Tensor& output_row) const {
  return target.read(output_row) - (baseline ? baseline->read(output_row) : 0.0);
}

std::string LogitDifference::describe() const {
  return baseline ? target.describe() + " minus " + baseline->describe() : target.describe();
}

// ---- Recorded runs, direct logit attribution, the lens -----------------------------------------

StreamRecording readout_recording(const VisionTransformerImpl& model, const TokenLayout& layout) {
  StreamRecording recording;
  recording.resid_pre = recording.components = recording.z = true;
  recording.tokens = readout_tokens(model, layout);
  return recording;
}

ResidualRun record_residual_stream(VisionTransformerImpl& model, const torch::Tensor& image,
                                   const AttentionSettings& settings, const StreamRecording& recording,
                                   const ForwardOptions& options) {
  check_image(image, "the image");
  const TokenLayout layout = model.arch().layout_for(int(image.size(2)), int(image.size(3)));
  check_record_size(model, recording, 1, layout.total_tokens(), 1, "recording this run");
  ResidualRun run;
  run.output = model.forward_with_streams(image, settings, options, {}, recording, &run.record);
  return run;
}

LogitAttribution direct_logit_attribution(VisionTransformerImpl& model, const ResidualRun& run,
                                          const ReadoutTarget& target) {
  check_linear_readout(model, "direct logit attribution");
  const VitArch& arch = model.arch();
  check_recorded(run, arch.depth, true, "direct logit attribution");
  const ResidualStreamRecord& record = run.record;
  const torch::Tensor output_row = run.output.logits[0];
  const torch::Tensor direction = target.output_direction(output_row);
  const LinearReadout readout = linear_readout(model, run.output.layout, record, direction);
  const int heads = arch.heads;
  const int64_t head_dim = arch.embed_dim / heads;

  LogitAttribution attribution;
  attribution.heads = torch::zeros({arch.depth, heads}, torch::kDouble);
  attribution.attn_bias = torch::zeros({arch.depth}, torch::kDouble);
  auto add = [&](const std::string& label, double value) {
    attribution.labels.push_back(label);
    attribution.values.push_back(value);
  };
  add("embed", read_component(readout, record.resid_pre[0], {}));
  for (int b = 0; b < arch.depth; ++b) {
    const std::string layer = std::to_string(b);
    const double attn_out = read_component(readout, record.attn_out[size_t(b)], record.tokens);
    add(layer + "_attn_out", attn_out);
    // Each head: z [h, T', d] pooled by the slot's weights, through its slice of the output
    // projection (and LayerScale) onto the slot's direction.
    auto* block = model.blocks[size_t(b)]->as<BlockImpl>();
    const torch::Tensor z = as_double(record.z[size_t(b)][0]);
    const torch::Tensor output_weight = as_double(block->attn->output_weight());
    const torch::Tensor layer_scale =
        block->ls1.is_empty() ? torch::ones({arch.embed_dim}, torch::kDouble) : as_double(block->ls1->gamma);
    torch::Tensor per_head = torch::zeros({heads}, torch::kDouble);
    for (const ReadoutSlot& slot : readout.slots) {
      const torch::Tensor pooled = torch::einsum("t,htd->hd", {kept_weights(slot.token_weights, record.tokens), z});
      const torch::Tensor back = torch::mv(output_weight.t(), layer_scale * slot.direction).view({heads, head_dim});
      per_head += (pooled * back).sum(-1);
    }
    attribution.heads[b] = per_head;
    attribution.attn_bias[b] = attn_out - per_head.sum().item<double>();
    if (record.local_out[size_t(b)].defined())
      add(layer + "_local_out", read_component(readout, record.local_out[size_t(b)], record.tokens));
    add(layer + "_mlp_out", read_component(readout, record.mlp_out[size_t(b)], record.tokens));
  }
  add("head_bias", readout.constant);
  attribution.output = target.read(output_row);
  double sum = 0.0;
  for (double value : attribution.values) sum += value;
  attribution.residual = attribution.output - sum;
  return attribution;
}

torch::Tensor head_result(VisionTransformerImpl& model, int layer, int head, const torch::Tensor& z) {
  const VitArch& arch = model.arch();
  check_heads({{layer, head}}, arch.depth, arch.heads);
  const int64_t head_dim = arch.embed_dim / arch.heads;
  if (!z.defined() || z.dim() < 2 || z.size(-1) != head_dim)
    throw std::invalid_argument("z of head " + head_name({layer, head}) + " must be [..., T, " +
                                std::to_string(head_dim) + "]");
  auto* block = model.blocks[size_t(layer)]->as<BlockImpl>();
  const torch::Tensor slice = block->attn->output_weight().narrow(1, head * head_dim, head_dim);  // [C, d]
  torch::Tensor result = torch::matmul(z.to(slice.dtype()), slice.t());
  if (!block->ls1.is_empty()) result = result * block->ls1->gamma;
  return result;
}

torch::Tensor patch_logit_lens(VisionTransformerImpl& model, const ResidualRun& run) {
  check_linear_readout(model, "the logit lens");
  const VitArch& arch = model.arch();
  check_recorded(run, arch.depth, false, "the logit lens");
  const ResidualStreamRecord& record = run.record;
  const int64_t tokens = record.resid_final.size(1);
  const bool final_norm = !model.norm.is_empty();
  const torch::nn::LayerNorm& norm = final_norm ? model.norm : model.fc_norm;
  torch::Tensor weight;  // [K, C]: the read-out with this token in every slot; undefined: none (features)
  if (!model.head.is_empty()) {
    weight = model.head->weight.detach();
    if (!model.head_dist.is_empty()) weight = (weight + model.head_dist->weight.detach()) / 2;
  }
  const int64_t outputs = weight.defined() ? weight.size(0) : arch.embed_dim;
  const double bytes = 4.0 * double(arch.depth + 1) * double(tokens) * double(outputs);
  if (bytes > kMaxRecordBytes)
    throw std::invalid_argument("the logit lens of " + std::to_string(tokens) + " tokens x " + std::to_string(outputs) +
                                " outputs over " + std::to_string(arch.depth + 1) + " layers would take " + gib(bytes) +
                                ", more than the " + gib(kMaxRecordBytes) + " allowed: use a smaller input");
  // Each token's own scale: the forward's (ln_final.hook_scale), or with fc_norm alone the scale
  // fc_norm would give the final residual's token.
  const torch::Tensor final_residual = record.resid_final[0];
  const torch::Tensor scale =
      final_norm ? record.final_scale[0]
                 : (final_residual - final_residual.mean(-1, true)).pow(2).mean(-1).add(arch.layer_norm_eps).sqrt();
  std::vector<torch::Tensor> stack;
  for (int b = 0; b < arch.depth; ++b) stack.push_back(record.resid_pre[size_t(b)][0]);
  stack.push_back(final_residual);
  torch::Tensor normed = torch::stack(stack);  // [L + 1, T, C]
  normed = (normed - normed.mean(-1, true)) / scale.view({1, tokens, 1}) * norm->weight.detach();
  if (!weight.defined()) return normed.contiguous();
  return torch::matmul(normed, weight.t());
}

// ---- Heads --------------------------------------------------------------------------------------

void check_heads(const std::vector<HeadIndex>& heads, int layers, int heads_per_layer) {
  if (heads_per_layer <= 0) throw std::invalid_argument("the model has no attention heads to ablate");
  if (heads.empty()) throw std::invalid_argument("no heads listed (give L.H[,L.H...])");
  for (size_t i = 0; i < heads.size(); ++i) {
    const HeadIndex& head = heads[i];
    if (head.layer < 0 || head.layer >= layers)
      throw std::invalid_argument("head " + head_name(head) + ": layer " + std::to_string(head.layer) +
                                  " is outside 0.." + std::to_string(layers - 1));
    if (head.head < 0 || head.head >= heads_per_layer)
      throw std::invalid_argument("head " + head_name(head) + ": head " + std::to_string(head.head) +
                                  " is outside 0.." + std::to_string(heads_per_layer - 1) + " (the model has " +
                                  std::to_string(heads_per_layer) + " heads a layer)");
    if (std::find(heads.begin(), heads.begin() + int64_t(i), head) != heads.begin() + int64_t(i))
      throw std::invalid_argument("head " + head_name(head) + " is listed twice");
  }
}

std::vector<HeadIndex> parse_heads(const std::string& text, int layers, int heads_per_layer) {
  if (text.empty() || text == "none")
    throw std::invalid_argument("'" + text + "' is not a head: give LAYER.HEAD, e.g. 3.1, separated by commas");
  const std::vector<HeadIndex> heads = parse_head_list(text);
  check_heads(heads, layers, heads_per_layer);
  return heads;
}

HeadMeans mean_head_outputs(VisionTransformerImpl& model, const std::vector<torch::Tensor>& images,
                            const AttentionSettings& settings, const std::vector<HeadIndex>& heads,
                            const ProgressReport& progress, const CancelCheck& cancelled) {
  const VitArch& arch = model.arch();
  check_heads(heads, arch.depth, arch.heads);
  if (images.empty()) throw std::invalid_argument("mean ablation needs images to average the heads' outputs over");
  for (size_t i = 0; i < images.size(); ++i) check_image(images[i], "image " + std::to_string(i));
  const torch::Tensor all = average_head_outputs(
      model, images, settings,
      [&](int done, int total) {
        if (progress) progress(done, total);
      },
      cancelled);
  HeadMeans means;
  means.heads = heads;
  std::vector<torch::Tensor> listed;
  for (const HeadIndex& head : heads) listed.push_back(all[head.layer][head.head]);
  means.z = torch::stack(listed);
  means.tokens = all.size(2);
  means.images = int(images.size());
  return means;
}

namespace {

// Whether `clean` holds what a run resumed at `first` takes from it: each earlier block's input and
// what `recording` asks of those blocks, and their captures when `capture`.
bool clean_run_covers(const ResidualRun& clean, const StreamRecording& recording, int first, int depth, bool capture) {
  const ResidualStreamRecord& record = clean.record;
  if (record.first_block != 0 || int(record.resid_pre.size()) != depth || !record.resid_pre[size_t(first)].defined())
    return false;
  if (capture && int(clean.output.layers.size()) != depth) return false;
  if (recording.per_block_streams() && record.tokens != recording.tokens) return false;
  for (int b = 0; b < first; ++b) {
    if (recording.resid_pre && !record.resid_pre[size_t(b)].defined()) return false;
    if (recording.components && !record.attn_out[size_t(b)].defined()) return false;
    if (recording.z && !record.z[size_t(b)].defined()) return false;
  }
  return true;
}

bool same_layout(const TokenLayout& a, const TokenLayout& b) {
  return a.has_class_token == b.has_class_token && a.has_dist_token == b.has_dist_token &&
         a.register_tokens == b.register_tokens && a.grid_h == b.grid_h && a.grid_w == b.grid_w;
}

}  // namespace

ResidualRun ablate_heads(VisionTransformerImpl& model, const torch::Tensor& image, const AttentionSettings& settings,
                         const HeadAblation& ablation, const ForwardOptions& options, const StreamRecording& recording,
                         const ResidualRun* clean) {
  const VitArch& arch = model.arch();
  check_heads(ablation.heads, arch.depth, arch.heads);
  if (!image.defined() || image.dim() != 4) throw std::invalid_argument("the image must be [B, 3, H, W]");
  const TokenLayout layout = arch.layout_for(int(image.size(2)), int(image.size(3)));
  check_record_size(model, recording, image.size(0), layout.total_tokens(), 1, "recording the ablated run");
  StreamEdits edits;
  int first = arch.depth;
  for (const HeadIndex& head : ablation.heads) {
    HeadReplacement replacement{head.layer, head.head, {}};
    if (ablation.kind == AblationKind::Mean) {
      const auto& listed = ablation.means.heads;
      const auto found = std::find(listed.begin(), listed.end(), head);
      if (found == listed.end() || !ablation.means.z.defined())
        throw std::invalid_argument("mean ablation of head " + head_name(head) +
                                    ": its mean output was not computed (mean_head_outputs over the images)");
      if (ablation.means.tokens != layout.total_tokens())
        throw std::invalid_argument("the mean outputs were taken over images of " +
                                    std::to_string(ablation.means.tokens) + " tokens; this image has " +
                                    std::to_string(layout.total_tokens()) + ": use images of the same size");
      replacement.z = ablation.means.z[found - listed.begin()];
    }
    edits.heads.push_back(replacement);
    first = std::min(first, head.layer);
  }
  ResidualRun run;
  const bool resume = clean && image.size(0) == 1 && same_layout(clean->output.layout, layout) &&
                      clean_run_covers(*clean, recording, first, arch.depth, options.capture);
  if (!resume) {
    run.output = model.forward_with_streams(image, settings, options, edits, recording, &run.record);
    return run;
  }
  run.output = model.forward_from_block(first, clean->record.resid_pre[size_t(first)], layout, settings, options, edits,
                                        recording, &run.record);
  // The blocks before the first ablated one are the clean run's.
  if (options.capture) {
    std::vector<AttentionCapture> layers(clean->output.layers.begin(), clean->output.layers.begin() + first);
    layers.insert(layers.end(), run.output.layers.begin(), run.output.layers.end());
    run.output.layers = std::move(layers);
  }
  for (int b = 0; b < first; ++b) {
    const size_t i = size_t(b);
    if (recording.resid_pre) run.record.resid_pre[i] = clean->record.resid_pre[i];
    if (recording.components) {
      run.record.attn_out[i] = clean->record.attn_out[i];
      run.record.local_out[i] = clean->record.local_out[i];
      run.record.mlp_out[i] = clean->record.mlp_out[i];
    }
    if (recording.z) run.record.z[i] = clean->record.z[i];
  }
  run.record.first_block = 0;
  return run;
}

// ---- Activation patching ------------------------------------------------------------------------

ActivationPatching activation_patching(VisionTransformerImpl& model, const torch::Tensor& clean_image,
                                       const torch::Tensor& corrupt_image, const AttentionSettings& settings,
                                       const LogitDifference& difference, const ProgressReport& progress,
                                       const CancelCheck& cancelled) {
  const VitArch& arch = model.arch();
  check_image(clean_image, "the clean image");
  check_image(corrupt_image, "the corrupted image");
  if (clean_image.sizes() != corrupt_image.sizes())
    throw std::invalid_argument("the clean image is " + std::to_string(clean_image.size(3)) + "x" +
                                std::to_string(clean_image.size(2)) + ", the corrupted one " +
                                std::to_string(corrupt_image.size(3)) + "x" + std::to_string(corrupt_image.size(2)) +
                                ": patching replaces activations token by token, so both need one size");
  if (difference.baseline && difference.baseline->kind == difference.target.kind &&
      difference.target.kind == ReadoutTarget::Kind::Class &&
      difference.baseline->class_index == difference.target.class_index)
    throw std::invalid_argument("class " + std::to_string(difference.target.class_index) +
                                " against itself: the logit difference is zero for every run, the metric undefined");
  const TokenLayout layout = arch.layout_for(int(clean_image.size(2)), int(clean_image.size(3)));
  const int64_t tokens = layout.total_tokens();
  StreamRecording clean_recording, corrupt_recording;
  clean_recording.resid_pre = clean_recording.z = true;
  corrupt_recording.resid_pre = true;
  check_record_size(model, clean_recording, 1, tokens, 2, "activation patching");

  ForwardOptions options;
  options.capture = false;
  options.cancelled = cancelled;
  ResidualStreamRecord clean, corrupt;
  const torch::Tensor clean_output =
      model.forward_with_streams(clean_image, settings, options, {}, clean_recording, &clean).logits[0];
  const torch::Tensor corrupt_output =
      model.forward_with_streams(corrupt_image, settings, options, {}, corrupt_recording, &corrupt).logits[0];
  ActivationPatching patching;
  patching.clean = difference.of(clean_output);
  patching.corrupt = difference.of(corrupt_output);
  const double denominator = patching.clean - patching.corrupt;
  // The outputs are float32: a difference within their rounding is no difference.
  const double rounding =
      4.0 * std::numeric_limits<float>::epsilon() * (std::abs(patching.clean) + std::abs(patching.corrupt));
  if (!(std::abs(denominator) > rounding))
    throw std::invalid_argument("the " + difference.describe() + " is " + std::to_string(patching.clean) +
                                " on the clean image and " + std::to_string(patching.corrupt) +
                                " on the corrupted one: with no difference between the runs the patching metric "
                                "(ld_patched - ld_corrupt) / (ld_clean - ld_corrupt) is undefined");

  const int depth = arch.depth, heads = arch.heads;
  const int64_t total = int64_t(depth) * (heads + tokens);
  patching.heads = torch::zeros({depth, heads}, torch::kDouble);
  patching.residual = torch::zeros({depth, tokens}, torch::kDouble);
  auto patched = [&](int block, const StreamEdits& edits) {
    const torch::Tensor output =
        model.forward_from_block(block, corrupt.resid_pre[size_t(block)], layout, settings, options, edits, {}, nullptr)
            .logits[0];
    ++patching.forwards;
    patching.blocks_run += depth - block;
    if (progress) progress(patching.forwards, total);
    return (difference.of(output) - patching.corrupt) / denominator;
  };
  for (int block = 0; block < depth; ++block) {
    for (int head = 0; head < heads; ++head) {
      StreamEdits edits;
      edits.heads.push_back({block, head, clean.z[size_t(block)][0][head]});
      patching.heads[block][head] = patched(block, edits);
    }
    for (int64_t token = 0; token < tokens; ++token) {
      StreamEdits edits;
      edits.residuals.push_back({block, int(token), clean.resid_pre[size_t(block)][0][token]});
      patching.residual[block][token] = patched(block, edits);
    }
  }
  return patching;
}

}  // namespace attnscope
