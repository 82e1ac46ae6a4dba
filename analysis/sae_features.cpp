#include "analysis/sae_features.h"

#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/json_checked.h"
#include "core/npy.h"

namespace attnscope {

StreamAtPoint read_stream_point(VisionTransformerImpl& model, const torch::Tensor& images, const StreamPoint& point,
                                const AttentionSettings& settings, const ForwardOptions& options) {
  StreamAtPoint read;
  StreamEdits probe;
  probe.transforms.push_back({point, [&read](const torch::Tensor& activation) {
                                read.activation = activation;
                                return activation;
                              }});
  read.output = model.forward_with_streams(images, settings, options, probe, {}, nullptr);
  return read;
}

SaeImageReport sae_image_report(VisionTransformerImpl& model, const SparseAutoencoder& sae, const std::string& hook,
                                const torch::Tensor& image, const AttentionSettings& settings,
                                const std::function<bool()>& cancelled) {
  c10::InferenceMode inference_mode;
  SaeImageReport report;
  report.point = sae_stream_point(sae, hook, model.arch().depth, model.arch().embed_dim);
  ForwardOptions options;
  options.cancelled = cancelled;
  const auto [output, seen] = read_stream_point(model, image, report.point, settings, options);
  report.layout = output.layout;
  report.logits = output.logits[0].to(torch::kCPU, torch::kFloat);
  report.activations = seen[0].to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor on_device = seen[0].to(sae.W_enc.device(), torch::kFloat);
  const torch::Tensor features = sae.encode(on_device);
  report.features = features.to(torch::kCPU).contiguous();
  report.reconstruction = sae.decode(features, on_device).to(torch::kCPU).contiguous();

  // The reconstruction's figures over the tokens the SAE was trained on.
  const torch::Tensor read = sae.class_token_only ? torch::arange(0, 1, torch::kLong)
                                                  : torch::arange(0, report.layout.total_tokens(), torch::kLong);
  const torch::Tensor x = report.activations.index_select(0, read).to(torch::kDouble);
  const torch::Tensor x_hat = report.reconstruction.index_select(0, read).to(torch::kDouble);
  const torch::Tensor f = report.features.index_select(0, read);
  const double error = (x - x_hat).pow(2).sum().item<double>();
  const double variance = (x - x.mean(0, /*keepdim=*/true)).pow(2).sum().item<double>();
  report.tokens_read = read.size(0);
  report.normalised_mse = variance > 0 ? error / variance : std::numeric_limits<double>::quiet_NaN();
  report.l0 = (f > 0).sum().item<double>() / double(read.size(0));
  report.silent_fraction = 1.0 - (f > 0).any(0).sum().item<double>() / double(sae.d_sae);
  return report;
}

TokenTopFeatures top_features_per_token(const torch::Tensor& features, int k) {
  const int64_t kept = std::min<int64_t>(k, features.size(1));
  auto [values, indices] = features.topk(kept, 1, /*largest=*/true, /*sorted=*/true);
  return {indices.contiguous(), values.contiguous()};
}

torch::Tensor scored_tokens(const SparseAutoencoder& sae, const TokenLayout& layout) {
  if (sae.class_token_only || layout.patch_tokens() == 0) return torch::arange(0, 1, torch::kLong);
  return torch::arange(layout.prefix_tokens(), layout.total_tokens(), torch::kLong);
}

void SaeTopImages::start(int64_t features, int k_kept) {
  k = k_kept;
  images_done = 0;
  tokens_seen = 0;
  values = torch::full({features, k}, -std::numeric_limits<float>::infinity());
  images = torch::full({features, k}, -1, torch::kLong);
  tokens = torch::full({features, k}, -1, torch::kLong);
  image_counts = torch::zeros({features}, torch::kLong);
  token_counts = torch::zeros({features}, torch::kLong);
}

void SaeTopImages::add(int64_t image, const torch::Tensor& features, const torch::Tensor& read) {
  const torch::Tensor scored = features.index_select(0, read);  // [R, F]
  const auto [peak, at] = scored.max(0);                        // [F]
  const torch::Tensor fired = scored > 0;
  // New tensors, never updated in place: a copy of the pass is a snapshot (the workbench keeps one
  // when a newer request stops it).
  image_counts = image_counts + fired.any(0).to(torch::kLong);
  token_counts = token_counts + fired.sum(0).to(torch::kLong);
  tokens_seen += features.size(0);
  // Merge each feature's new peak into its k kept: one more column, then the k largest.
  const torch::Tensor all_values = torch::cat({values, peak.unsqueeze(1)}, 1);
  const torch::Tensor all_images = torch::cat({images, torch::full({values.size(0), 1}, image, torch::kLong)}, 1);
  const torch::Tensor all_tokens = torch::cat({tokens, read.index_select(0, at).unsqueeze(1)}, 1);
  auto [kept, order] = all_values.topk(k, 1, /*largest=*/true, /*sorted=*/true);
  values = kept.contiguous();
  images = all_images.gather(1, order).contiguous();
  tokens = all_tokens.gather(1, order).contiguous();
  ++images_done;
}

double SaeTopImages::dead_fraction() const {
  return (image_counts == 0).sum().item<double>() / double(image_counts.size(0));
}

}  // namespace attnscope

namespace attnscope {

void SaeFolderPass::add(int64_t image, const SaeImageReport& report, const SparseAutoencoder& sae) {
  const torch::Tensor x = report.activations.to(torch::kDouble), x_hat = report.reconstruction.to(torch::kDouble);
  error += (x - x_hat).pow(2).sum().item<double>();
  variance += (x - x.mean(0, true)).pow(2).sum().item<double>();
  active += (report.features > 0).sum().item<double>();
  tokens += report.features.size(0);
  top.add(image, report.features, scored_tokens(sae, report.layout));
}

double SaeFolderPass::normalised_mse() const {
  return variance > 0 ? error / variance : std::numeric_limits<double>::quiet_NaN();
}

double SaeFolderPass::l0() const { return tokens ? active / double(tokens) : 0.0; }

void SaeFolderPass::save(const std::string& folder, const std::string& key) const {
  std::filesystem::create_directories(folder);
  write_npy(folder + "/values.npy", top.values);
  write_npy(folder + "/images.npy", top.images);
  write_npy(folder + "/tokens.npy", top.tokens);
  write_npy(folder + "/image_counts.npy", top.image_counts);
  write_npy(folder + "/token_counts.npy", top.token_counts);
  const nlohmann::json progress = {{"key", key},      {"done", top.images_done}, {"tokens_seen", top.tokens_seen},
                                   {"error", error},  {"variance", variance},    {"active", active},
                                   {"tokens", tokens}};
  write_file_atomically(folder + "/progress.json", [&](std::ostream& out) { out << json_text(progress); });
}

bool SaeFolderPass::load(const std::string& folder, const std::string& key) {
  std::error_code error_code;
  if (!std::filesystem::is_regular_file(folder + "/progress.json", error_code)) return false;
  try {
    const nlohmann::json progress =
        read_json_file(folder + "/progress.json", "the SAE folder pass's progress", 1 << 20);
    if (progress.at("key").get<std::string>() != key) return false;
    SaeFolderPass loaded = *this;
    loaded.top.values = read_npy(folder + "/values.npy");
    loaded.top.images = read_npy(folder + "/images.npy");
    loaded.top.tokens = read_npy(folder + "/tokens.npy");
    loaded.top.image_counts = read_npy(folder + "/image_counts.npy");
    loaded.top.token_counts = read_npy(folder + "/token_counts.npy");
    const auto sizes = top.values.sizes();
    if (loaded.top.values.sizes() != sizes || loaded.top.images.sizes() != sizes ||
        loaded.top.tokens.sizes() != sizes || loaded.top.image_counts.sizes() != top.image_counts.sizes() ||
        loaded.top.token_counts.sizes() != top.token_counts.sizes() ||
        loaded.top.values.scalar_type() != torch::kFloat || loaded.top.images.scalar_type() != torch::kLong ||
        loaded.top.tokens.scalar_type() != torch::kLong || loaded.top.image_counts.scalar_type() != torch::kLong ||
        loaded.top.token_counts.scalar_type() != torch::kLong)
      return false;
    loaded.top.images_done = progress.at("done").get<int64_t>();
    loaded.top.tokens_seen = progress.at("tokens_seen").get<int64_t>();
    loaded.error = progress.at("error").get<double>();
    loaded.variance = progress.at("variance").get<double>();
    loaded.active = progress.at("active").get<double>();
    loaded.tokens = progress.at("tokens").get<int64_t>();
    if (loaded.top.images_done < 0) return false;
    *this = std::move(loaded);
    return true;
  } catch (const std::exception&) {
    return false;  // damaged: start over
  }
}

}  // namespace attnscope
