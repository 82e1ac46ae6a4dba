// `attnscope glyphs`: writes images of the generated glyph task (with their labels and boxes), to
// look at the task or to use as inputs.
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "datasets/glyph_task.h"

namespace attnscope {

CommandSyntax glyphs_syntax() {
  return {"attnscope glyphs --out DIR [--count N] [--seed S] [--format png|npy]",
          {"out"},
          {{"count", "N", "images to write", "8"},
           {"seed", "N", "seed of the first image (held-out ones start at 10^12)", "0"},
           {"format", "F",
            "png: glyph_<seed>.png each; npy: one images.npy (uint8 [N, H, W, 3]) plus letters.csv (every "
            "distractor letter, its colour and box)",
            "png"}}};
}

int glyphs_command(const Args& args) {
  auto parsed = parse_or_print_help(args, glyphs_syntax());
  if (!parsed) return 0;
  CommandLine& line = *parsed;
  if (line.state.out.empty()) throw std::invalid_argument("--out is required");
  const int count = line.flag_int("count");
  if (count <= 0) throw std::invalid_argument("--count must be positive");
  const std::string& seed_text = line.flags["seed"];
  if (seed_text.empty() || seed_text.find_first_not_of("0123456789") != std::string::npos || seed_text.size() > 19)
    throw std::invalid_argument("--seed expects a non-negative integer of at most 19 digits, got '" +
                                excerpt(seed_text) + "'");
  const uint64_t seed = std::stoull(seed_text);
  const std::string& format = line.flags["format"];
  if (format == "png") {
    write_glyph_samples_png(line.state.out, count, seed);
    std::cout << "wrote " << count << " glyph images and labels.csv to " << line.state.out << "\n";
  } else if (format == "npy") {
    // One array in memory: 27 KiB an image at 96 x 96, so 100000 images are 2.6 GiB.
    constexpr int kMaxNpyCount = 100000;
    if (count > kMaxNpyCount)
      throw std::invalid_argument("--count " + std::to_string(count) + " is more than --format npy writes at once (" +
                                  std::to_string(kMaxNpyCount) + "): write several folders with different --seed");
    write_glyph_samples_npy(line.state.out, count, seed);
    std::cout << "wrote " << count << " glyph images to images.npy, labels.csv and letters.csv in " << line.state.out
              << "\n";
  } else {
    throw std::invalid_argument("--format expects png or npy, got '" + excerpt(format) + "'");
  }
  return 0;
}

}  // namespace attnscope
