#include "analysis/head_statistics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace attnscope {

namespace {

// [patch queries, patch keys] distances in pixels between the patches' centres. On one grid this is
// the patch size times the grid distance (probing-vits' compute_distance_matrix); PVT's reduced keys
// sit on a coarser grid over the same image.
torch::Tensor patch_distances(const TokenLayout& queries, const TokenLayout& keys) {
  auto centres = [](const TokenLayout& layout) {
    const auto options = torch::TensorOptions().dtype(torch::kDouble);
    const torch::Tensor index = torch::arange(layout.patch_tokens(), options.dtype(torch::kLong));
    const torch::Tensor row = torch::floor_divide(index, layout.grid_w).to(torch::kDouble);
    const torch::Tensor col = torch::remainder(index, layout.grid_w).to(torch::kDouble);
    return std::make_pair((row + 0.5) * layout.patch_size, (col + 0.5) * layout.patch_size);
  };
  const auto [query_y, query_x] = centres(queries);
  const auto [key_y, key_x] = centres(keys);
  const torch::Tensor dy = query_y.unsqueeze(1) - key_y.unsqueeze(0), dx = query_x.unsqueeze(1) - key_x.unsqueeze(0);
  return (dy * dy + dx * dx).sqrt();
}

// The patch block of a matrix [Nq, Nk] folded by offset: the mean over queries of the weight at
// each (dy, dx), on a grid shared by queries and keys.
OffsetMap offset_map(const torch::Tensor& patch_block, int grid_h, int grid_w) {
  OffsetMap map;
  map.rows = 2 * grid_h - 1;
  map.cols = 2 * grid_w - 1;
  map.values.assign(size_t(map.rows) * size_t(map.cols), 0.0);
  const torch::Tensor block = patch_block.contiguous();
  const double* weights = block.data_ptr<double>();
  const int patches = grid_h * grid_w;
  for (int q = 0; q < patches; ++q) {
    const int qr = q / grid_w, qc = q % grid_w;
    const double* row = weights + size_t(q) * size_t(patches);
    for (int k = 0; k < patches; ++k) {
      const int dy = k / grid_w - qr, dx = k % grid_w - qc;
      map.values[size_t(dy + grid_h - 1) * size_t(map.cols) + size_t(dx + grid_w - 1)] += row[k];
    }
  }
  for (double& value : map.values) value /= patches;
  return map;
}

}  // namespace

std::vector<LayerHeadStatistics> head_statistics(const std::vector<AttentionCapture>& layers, int64_t item) {
  std::vector<LayerHeadStatistics> result;
  for (size_t index = 0; index < layers.size(); ++index) {
    const AttentionCapture& capture = layers[index];
    if (capture.heads == 0) continue;
    const TokenLayout &queries = capture.layout, &keys = capture.key_layout;
    LayerHeadStatistics layer;
    layer.layer = int(index);
    layer.name = capture.placement.name;
    layer.patch_size = queries.patch_size;
    const torch::Tensor distances = patch_distances(queries, keys);
    const bool one_grid =
        queries.grid_h == keys.grid_h && queries.grid_w == keys.grid_w && queries.patch_size == keys.patch_size;
    for (int head = 0; head < capture.heads; ++head) {
      const torch::Tensor matrix = capture.matrix(item, head).to(torch::kCPU, torch::kDouble);  // [Tq, Tk]
      const torch::Tensor patch_block = matrix.slice(0, queries.prefix_tokens()).slice(1, keys.prefix_tokens());
      HeadStatistic statistic;
      statistic.mean_distance = (patch_block * distances).sum(1).mean().item<double>();
      // 0 ln 0 = 0: keys outside a query's window carry no weight.
      statistic.entropy = -torch::xlogy(matrix, matrix).sum(1).mean().item<double>();
      layer.heads.push_back(statistic);
      if (one_grid) layer.offset_maps.push_back(offset_map(patch_block, queries.grid_h, queries.grid_w));
    }
    result.push_back(std::move(layer));
  }
  return result;
}

void HeadStatisticsMean::add(const std::vector<LayerHeadStatistics>& image) {
  if (images == 0) {
    total = image;
    images = 1;
    return;
  }
  if (image.size() != total.size())
    throw std::invalid_argument("an image gave " + std::to_string(image.size()) + " attention layers, the first " +
                                std::to_string(total.size()));
  for (size_t l = 0; l < total.size(); ++l) {
    LayerHeadStatistics& sum = total[l];
    const LayerHeadStatistics& one = image[l];
    if (one.heads.size() != sum.heads.size() || one.offset_maps.size() != sum.offset_maps.size())
      throw std::invalid_argument("layer " + std::to_string(sum.layer) + " differs between images");
    for (size_t h = 0; h < sum.heads.size(); ++h) {
      sum.heads[h].mean_distance += one.heads[h].mean_distance;
      sum.heads[h].entropy += one.heads[h].entropy;
    }
    for (size_t h = 0; h < sum.offset_maps.size(); ++h) {
      if (one.offset_maps[h].values.size() != sum.offset_maps[h].values.size())
        throw std::invalid_argument("layer " + std::to_string(sum.layer) +
                                    " has another grid on this image than on the first: the images need one size");
      for (size_t i = 0; i < sum.offset_maps[h].values.size(); ++i)
        sum.offset_maps[h].values[i] += one.offset_maps[h].values[i];
    }
  }
  ++images;
}

std::vector<LayerHeadStatistics> HeadStatisticsMean::mean() const {
  std::vector<LayerHeadStatistics> result = total;
  const double count = std::max(images, 1);
  for (LayerHeadStatistics& layer : result) {
    for (HeadStatistic& head : layer.heads) {
      head.mean_distance /= count;
      head.entropy /= count;
    }
    for (OffsetMap& map : layer.offset_maps)
      for (double& value : map.values) value /= count;
  }
  return result;
}

}  // namespace attnscope
