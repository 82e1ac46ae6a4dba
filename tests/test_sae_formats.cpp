// Sparse autoencoders in the four formats (models/sparse_autoencoder.h) against each library's own
// encode and decode, computed in float64 by tests/python/reference_sae.py from files written as each
// library writes them (tests/python/make_sae_cases.py); the intervention's identity; and files that
// must be refused before anything is allocated.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/assets.h"
#include "core/checkpoint.h"
#include "core/npy.h"
#include "models/sparse_autoencoder.h"
#include "tests/numeric_bounds.h"

namespace attnscope {
namespace test_sae_formats {

namespace fs = std::filesystem;
const std::string kFolder = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/sae_cases/";

nlohmann::json read_cases() {
  std::ifstream in(kFolder + "cases.json");
  if (!in) throw std::runtime_error("missing " + kFolder + "cases.json (tests/python/make_sae_cases.py)");
  return nlohmann::json::parse(in);
}

// float32 products of d_in terms against the float64 reference: each feature is off by at most
// d_in * eps32 * sum |x_i W_ij| (and the normalisation's own rounding), so 1e-5 of the row's
// magnitude holds with room; the cases keep every top-k and threshold decision 1e-3 from its edge.
double tolerance(const torch::Tensor& reference) { return 1e-5 * (1.0 + reference.abs().max().item<double>()); }

TEST(SaeFormats, EveryCaseMatchesItsLibrarysEncodeAndDecode) {
  const auto cases = read_cases();
  ASSERT_GE(cases.size(), 20u);
  std::set<std::string> formats;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const std::string dir = kFolder + name + "/";
    const SparseAutoencoder sae = load_sparse_autoencoder(dir + c.at("open").get<std::string>());
    formats.insert(sae.format);
    EXPECT_EQ(sae.d_in, c.at("d_in").get<int64_t>());
    EXPECT_EQ(sae.d_sae, c.at("d_sae").get<int64_t>());
    const torch::Tensor x = read_npy(dir + "x.npy");
    const torch::Tensor expected_features = read_npy(dir + "features.npy");
    const torch::Tensor expected_reconstruction = read_npy(dir + "reconstruction.npy");
    const torch::Tensor features = sae.encode(x);
    const torch::Tensor reconstruction = sae.decode(features, x);
    // The same features fire (the decisions), then their values and the reconstruction.
    EXPECT_TRUE(torch::equal(features > 0, expected_features > 0)) << sae.describe();
    EXPECT_LE(max_abs_difference(features, expected_features), tolerance(expected_features)) << sae.describe();
    EXPECT_LE(max_abs_difference(reconstruction, expected_reconstruction), tolerance(expected_reconstruction))
        << sae.describe();
    // One feature alone, as the map of a feature is computed, is that feature's column.
    for (int64_t feature : {int64_t(0), sae.d_sae / 2, sae.d_sae - 1})
      EXPECT_LE(max_abs_difference(sae.encode_feature(x, feature), features.select(1, feature)),
                tolerance(expected_features));
    if (!c.at("hook").is_null()) {
      EXPECT_FALSE(sae.hook_text.empty());
    }
  }
  EXPECT_EQ(formats.size(), 4u);
}

// The intervention keeps the SAE's error in the stream: an empty edit changes nothing, bit for bit,
// and switching a feature off takes exactly its activation times its decoder row out.
TEST(SaeFormats, InterventionKeepsTheReconstructionError) {
  for (const std::string name : {"saelens_layer_norm", "saev_topk", "dl_autoencoder", "prisma_constant_norm"}) {
    SCOPED_TRACE(name);
    const std::string dir = kFolder + name + "/";
    const auto cases = read_cases();
    std::string open;
    for (const auto& c : cases)
      if (c.at("name") == name) open = c.at("open");
    const SparseAutoencoder sae = load_sparse_autoencoder(dir + open);
    const torch::Tensor x = read_npy(dir + "x.npy");
    const torch::Tensor features = sae.encode(x);
    const torch::Tensor none = sae.edit_delta(x, features, {}, {});
    EXPECT_TRUE(torch::equal(x + none, x));
    // The feature that fires most often.
    const int feature = int((features > 0).sum(0).argmax().item<int64_t>());
    ASSERT_GT((features.select(1, feature) > 0).sum().item<int64_t>(), 0);
    const torch::Tensor off = sae.edit_delta(x, features, {feature}, {});
    const torch::Tensor expected =
        -features.select(1, feature).unsqueeze(1) * sae.W_dec[feature].unsqueeze(0) * sae.stream_scale(x);
    EXPECT_LE(max_abs_difference(off, expected), 1e-6 * (1 + expected.abs().max().item<double>()));
    // Adding with a scale moves every token along the same row, scaled by its normalisation.
    const torch::Tensor added = sae.edit_delta(x, features, {}, {{feature, 2.5}});
    const torch::Tensor along = 2.5 * sae.W_dec[feature].unsqueeze(0) * sae.stream_scale(x);
    EXPECT_LE(max_abs_difference(added, along), 1e-6 * (1 + along.abs().max().item<double>()));
  }
}

std::string refusal(const std::string& path) {
  try {
    load_sparse_autoencoder(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(opened)";
}

TEST(SaeFormats, LegacyPickledConfigsAreRefusedWithWhatToDo) {
  for (const std::string file : {"legacy_pickled_config.pt", "legacy_saelens_pickled_config.pt"}) {
    const std::string why = refusal(kFolder + "hostile/" + file);
    EXPECT_NE(why.find("pickled Python object"), std::string::npos) << why;
    EXPECT_NE(why.find("never runs"), std::string::npos) << why;
  }
}

// A copy of a case's folder with one file changed, in the test's own scratch folder.
fs::path edited_copy(const std::string& name, const std::string& tag) {
  const fs::path to = fs::temp_directory_path() / ("attnscope-sae-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(to);
  fs::copy(kFolder + name, to, fs::copy_options::recursive);
  return to;
}

void edit_json(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(file);
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(file) << config.dump();
}

TEST(SaeFormats, BadFilesAreRefusedFromTheHeader) {
  {  // SAELens cfg declaring a huge width: refused before the weights are read.
    const fs::path dir = edited_copy("saelens_standard", "huge");
    edit_json(dir / "cfg.json", [](nlohmann::json& c) { c["d_sae"] = int64_t(1) << 40; });
    EXPECT_NE(refusal(dir.string()).find("outside 1..2097152"), std::string::npos) << refusal(dir.string());
    fs::remove_all(dir);
  }
  {  // A TopK k larger than the width.
    const fs::path dir = edited_copy("saelens_topk", "bigk");
    edit_json(dir / "cfg.json", [](nlohmann::json& c) { c["k"] = c["d_sae"].get<int64_t>() + 1; });
    EXPECT_NE(refusal(dir.string()).find("k = "), std::string::npos) << refusal(dir.string());
    fs::remove_all(dir);
  }
  {  // saev's header with a top_k above the width (saev would clamp it; it is refused).
    const fs::path dir = edited_copy("saev_topk", "saevk");
    std::ifstream in(dir / "sae.pt", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    const size_t at = bytes.find("\"top_k\":8");
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, std::string("\"top_k\":8").size(), "\"top_k\":99");
    std::ofstream(dir / "sae.pt", std::ios::binary) << bytes;
    EXPECT_NE(refusal((dir / "sae.pt").string()).find("k = 99"), std::string::npos)
        << refusal((dir / "sae.pt").string());
    fs::remove_all(dir);
  }
  {  // A config whose sizes do not match the weights.
    const fs::path dir = edited_copy("saelens_standard", "shape");
    edit_json(dir / "cfg.json", [](nlohmann::json& c) { c["d_in"] = c["d_in"].get<int64_t>() + 1; });
    EXPECT_NE(refusal(dir.string()).find("as its config's sizes say"), std::string::npos) << refusal(dir.string());
    fs::remove_all(dir);
  }
  {  // A NaN threshold.
    const fs::path dir = edited_copy("saelens_jumprelu", "nan");
    std::map<std::string, torch::Tensor> tensors;
    for (auto& [key, value] : load_safetensors((dir / "sae_weights.safetensors").string()).tensors)
      tensors[key] = value;
    tensors["threshold"][3] = std::nan("");
    save_safetensors((dir / "sae_weights.safetensors").string(), tensors);
    EXPECT_NE(refusal(dir.string()).find("NaN"), std::string::npos) << refusal(dir.string());
    fs::remove_all(dir);
  }
  {  // A file of another format named as saev's.
    const fs::path dir = edited_copy("saelens_standard", "named");
    fs::rename(dir / "sae_weights.safetensors", dir / "sae.pt");
    EXPECT_NE(refusal((dir / "sae.pt").string()).find("not an SAE attnscope reads"), std::string::npos)
        << refusal((dir / "sae.pt").string());
    fs::remove_all(dir);
  }
  // A model's checkpoint or an image given as the SAE: said for what it is (the zip reader's text
  // told them to be re-saved with torch.save).
  const std::string model = refusal(asset_path("models/softmax.safetensors"));
  EXPECT_NE(model.find("a safetensors file, not an SAE"), std::string::npos) << model;
  EXPECT_NE(model.find("goes to --model"), std::string::npos) << model;
  EXPECT_EQ(model.find("torch.save"), std::string::npos) << model;
  const std::string image = refusal(asset_path("images/sign_4.png"));
  EXPECT_NE(image.find("a PNG image, not an SAE"), std::string::npos) << image;
  EXPECT_NE(refusal(kFolder + "no-such-sae").find("no such SAE"), std::string::npos);
  {  // A hook the stream has not: refused even with --sae-hook (the file says where it reads).
    const fs::path dir = edited_copy("saelens_standard", "hook");
    edit_json(dir / "cfg.json", [](nlohmann::json& c) { c["metadata"]["hook_name"] = "blocks.1.ln2.hook_normalized"; });
    const SparseAutoencoder sae = load_sparse_autoencoder(dir.string());
    for (const std::string given : {"", "blocks.1.hook_resid_post"}) {
      try {
        sae_stream_point(sae, given, 4, sae.d_in);
        ADD_FAILURE() << "accepted " << given;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("does not have"), std::string::npos) << e.what();
      }
    }
    fs::remove_all(dir);
  }
}

}  // namespace test_sae_formats
}  // namespace attnscope
