// How far and how broadly each attention head looks: its mean attention distance (figure 7 of the
// ViT paper, as sayakpaul/probing-vits' compute_mean_attention_dist computes it) and the entropy of
// its rows, per layer and head, averaged over a folder of images; with each head's mean attention
// around its query (a map whose distance-weighted sum is the mean distance).
#pragma once

#include <string>
#include <vector>

#include "models/attention.h"

namespace attnscope {

struct HeadStatistic {
  // Pixels: sum over patch keys of A_qk times the distance between the two patches' centres (the
  // patch size times their grid distance), averaged over patch queries. Prefix tokens are dropped
  // from rows and columns and the rows are not renormalised.
  double mean_distance = 0.0;
  // Nats: -sum_k A_qk ln A_qk over every key, averaged over every query (prefix tokens included).
  double entropy = 0.0;
};

// A head's attention around its query, averaged over patch queries: cell (dy + gh - 1, dx + gw - 1)
// holds the mean weight a query gives the patch dy rows and dx columns away.
struct OffsetMap {
  int rows = 0, cols = 0;
  std::vector<double> values;  // row-major
};

struct LayerHeadStatistics {
  int layer = 0;       // among the model's attention layers
  std::string name;    // its module, e.g. "blocks.3" or "layers.1.blocks.0"
  int patch_size = 0;  // pixels per step of its query grid
  std::vector<HeadStatistic> heads;
  // Per head; empty when its keys lie on another grid than its queries (PVT's reduced keys).
  std::vector<OffsetMap> offset_maps;
};

// Every attention layer's heads on image `item` of a forward pass (layers that compute no attention,
// CARE's convolution stages, are left out).
std::vector<LayerHeadStatistics> head_statistics(const std::vector<AttentionCapture>& layers, int64_t item);

// The mean of the statistics of several images (equal weights), added one image at a time.
struct HeadStatisticsMean {
  int images = 0;
  std::vector<LayerHeadStatistics> total;  // sums

  // Throws std::invalid_argument when the image's layers or grids differ from the first image's.
  void add(const std::vector<LayerHeadStatistics>& image);
  std::vector<LayerHeadStatistics> mean() const;
};

}  // namespace attnscope
