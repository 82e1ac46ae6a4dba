// `attnscope glyphs`: writes images of the generated glyph task (with their labels and boxes), to
// look at the task or to use as inputs.
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/excerpt.h"
#include "datasets/glyph_task.h"

namespace attnscope {

CommandSyntax glyphs_syntax() {
  return {"attnscope glyphs --out DIR [--count N] [--seed S]",
          {"out"},
          {{"count", "N", "images to write", "8"},
           {"seed", "N", "seed of the first image (held-out ones start at 10^12)", "0"}}};
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
    throw std::invalid_argument("--seed expects a non-negative integer, got '" + excerpt(seed_text) + "'");
  const uint64_t seed = std::stoull(seed_text);
  write_glyph_samples_png(line.state.out, count, seed);
  std::cout << "wrote " << count << " glyph images and labels.csv to " << line.state.out << "\n";
  return 0;
}

}  // namespace attnscope
