// Similarity between patch descriptors as ShirAmir/dino-vit-features computes it: the cosine
// similarity of chunk_cosine_sim (torch.nn.CosineSimilarity, each vector divided by its norm with
// eps 1e-8), and the best buddies of find_correspondences (the mutual nearest neighbours over all
// patch pairs of two images; without its log binning, saliency mask or k-means).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

namespace attnscope {

// [N]: the cosine similarity of `query` [C] with every row of `rows` [N, C], float32.
torch::Tensor cosine_similarity_to(const torch::Tensor& query, const torch::Tensor& rows);

// [N1, N2]: every pair of rows of `first` [N1, C] and `second` [N2, C], float64.
torch::Tensor cosine_similarity_matrix(const torch::Tensor& first, const torch::Tensor& second);

struct BestBuddy {
  int first = 0, second = 0;  // row indices (the patches, row-major) in each image
  double similarity = 0.0;
};

// The pairs whose members are each other's most similar row, in the order of `first`'s rows.
std::vector<BestBuddy> best_buddies(const torch::Tensor& first, const torch::Tensor& second);

// What a second image's forward will cost, said before it starts when it is at least 5 s: a lower
// bound from the first image's forward time and the ratio of their pixels (per-token work grows
// with it, attention's with its square). Empty below 5 s. `second` and `first` are W x H.
std::string second_image_cost_note(int second_width, int second_height, int64_t first_pixels, double first_seconds);

}  // namespace attnscope
